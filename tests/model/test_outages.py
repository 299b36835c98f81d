"""An outage is said once when it begins and once when it ends, however many attempts between."""

from __future__ import annotations

from taskyard.model.outages import Outage


def test_one_line_per_outage_and_the_first_connection_once() -> None:
    outage = Outage()
    assert outage.ends(0.0) == (True, None)  # the first connection: announced
    assert outage.ends(1.0) == (False, None)  # up again without an outage: nothing to say
    assert outage.begins(5.0) and not outage.begins(6.0) and not outage.begins(7.0)
    assert outage.ends(9.5) == (False, 4.5)
    assert outage.begins(10.0)  # a new outage is said again


def test_an_outage_before_the_first_connection_ends_as_a_return() -> None:
    outage = Outage()
    assert outage.begins(0.0)
    assert outage.ends(2.0) == (False, 2.0)
