from __future__ import annotations

from taskyard.model import dates
from taskyard.model.backoff import SetAside


def test_holds_double_up_to_an_hour() -> None:
    aside = SetAside()
    holds = [aside.hold("k", 0) for _ in range(9)]
    assert holds == [dates.MINUTE * 2**n for n in range(6)] + [dates.HOUR] * 3
    assert aside.failures("k") == 9
    assert aside.held(dates.HOUR - 1) == {"k"}
    assert aside.held(dates.HOUR) == set()


def test_release_starts_over() -> None:
    aside = SetAside()
    aside.hold("k", 0)
    aside.hold("k", 0)
    aside.release("k")
    assert aside.failures("k") == 0
    assert aside.held(0) == set()
    assert aside.hold("k", 0) == dates.MINUTE


def test_a_hold_long_over_is_forgotten() -> None:
    aside = SetAside()
    aside.hold("old", 0)
    aside.hold("new", 3 * dates.HOUR)
    assert aside.held(3 * dates.HOUR) == {"new"}
    assert aside.failures("old") == 0
    assert aside.failures("new") == 1
