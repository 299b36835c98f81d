from __future__ import annotations

import pytest

from taskyard.model.metrics import Counters, Sample


def test_counters_count_by_name_and_labels() -> None:
    metrics = Counters()
    assert metrics.value("rows_total", job="a") == 0
    metrics.inc("rows_total", job="a")
    metrics.inc("rows_total", 2, job="a")
    metrics.inc("rows_total", job="b")
    metrics.inc("other_total")
    assert metrics.value("rows_total", job="a") == 3
    assert metrics.value("rows_total", job="b") == 1
    assert metrics.value("rows_total") == 0
    assert metrics.samples() == [
        Sample("other_total", {}, 1),
        Sample("rows_total", {"job": "a"}, 3),
        Sample("rows_total", {"job": "b"}, 1),
    ]


def test_label_order_does_not_matter() -> None:
    metrics = Counters()
    metrics.inc("x", a="1", b="2")
    assert metrics.value("x", b="2", a="1") == 1


def test_counters_only_go_up() -> None:
    with pytest.raises(ValueError, match="only goes up"):
        Counters().inc("x", -1)
