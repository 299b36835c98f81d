from __future__ import annotations

import pytest

from taskyard.model import dates


@pytest.mark.parametrize(
    "text",
    [
        "1970-01-01T00:00:00.000Z",
        "2024-02-29T23:59:59.999Z",
        "0001-01-01T00:00:00.000Z",
        "0999-12-31T23:59:59.999Z",
        "9998-12-31T23:59:59.999Z",
        "9999-12-31T23:59:59.999Z",
    ],
)
def test_to_iso_prints_back_what_parse_iso_reads(text: str) -> None:
    assert dates.to_iso(dates.parse_iso(text)) == text


def test_to_iso_before_the_epoch_counts_milliseconds_forwards() -> None:
    assert dates.to_iso(-1) == "1969-12-31T23:59:59.999Z"
    assert dates.to_iso(-1001) == "1969-12-31T23:59:58.999Z"


@pytest.mark.parametrize(
    ("ms", "shown"),
    [
        (dates.LAST_PRINTABLE + 1, "9999-12-31T23:59:59.999Z"),
        (dates.LATEST + dates.HOUR + dates.DAY * 365, "9999-12-31T23:59:59.999Z"),
        (2**62, "9999-12-31T23:59:59.999Z"),
        (dates.FIRST_PRINTABLE - 1, "0001-01-01T00:00:00.000Z"),
        (-(2**62), "0001-01-01T00:00:00.000Z"),
    ],
)
def test_to_iso_never_raises_and_shows_the_nearest_printable_instant(ms: int, shown: str) -> None:
    assert dates.to_iso(ms) == shown


def test_the_latest_client_date_leaves_a_year_of_headroom() -> None:
    assert dates.to_iso(dates.LATEST) == "9998-12-31T23:59:59.999Z"
    assert dates.to_iso(dates.LATEST + dates.HEADROOM) == "9999-12-31T23:59:59.999Z"
    assert dates.LATEST + dates.HEADROOM <= dates.LAST_PRINTABLE
    assert dates.to_iso(dates.EARLIEST) == "1970-01-01T00:00:00.000Z"


@pytest.mark.parametrize("text", ["9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00+01:00"])
def test_parse_iso_refuses_what_to_iso_could_not_print(text: str) -> None:
    with pytest.raises(dates.OutOfRange, match="years 0001 to 9999"):
        dates.parse_iso(text)


def test_check_range() -> None:
    assert dates.check_range(dates.EARLIEST) == dates.EARLIEST
    assert dates.check_range(dates.LATEST) == dates.LATEST
    for ms in (dates.EARLIEST - 1, dates.LATEST + 1):
        with pytest.raises(dates.OutOfRange) as info:
            dates.check_range(ms)
        assert str(info.value) == dates.RANGE_RULE
    assert dates.RANGE_RULE == "must be a date-time from 1970-01-01T00:00:00.000Z to 9998-12-31T23:59:59.999Z"
