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


def _to_iso_by_datetime(ms: int) -> str:
    """to_iso spelled out with datetime, as the module once wrote it."""
    from datetime import UTC, datetime, timedelta

    instant = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
        milliseconds=min(max(ms, dates.FIRST_PRINTABLE), dates.LAST_PRINTABLE)
    )
    return (
        f"{instant.year:04d}-" + instant.strftime("%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"
    )


def test_to_iso_matches_datetime_across_days_and_its_day_cache() -> None:
    # The day prefix is memoized: instants on either side of midnight, on days met before and
    # new ones, must each get their own day.
    import random

    rng = random.Random(7)
    samples = [
        rng.randrange(dates.FIRST_PRINTABLE - dates.DAY, dates.LAST_PRINTABLE + dates.DAY)
        for _ in range(3000)
    ]
    midnights = [d * dates.DAY + offset for d in range(-3, 3) for offset in (-1, 0, 1, dates.DAY - 1)]
    for ms in samples + midnights + samples:
        assert dates.to_iso(ms) == _to_iso_by_datetime(ms), ms


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-22T00:18:26.007Z",
        "2026-11-22t00:18:26.007z",
        " 2026-11-22T00:18:26.007Z",
        "2026-11-22T00:18:26.007+00:00",
        "2026-11-22T01:18:26.007+01:00",
        "2026-11-22T00:18:26.0071234Z",
        "2026-11-22T00:18:26Z",
    ],
)
def test_parse_iso_reads_its_own_format_and_the_others_alike(text: str) -> None:
    assert dates.parse_iso(text) == dates.parse_iso("2026-11-22T00:18:26.007Z") - (0 if "." in text else 7)


@pytest.mark.parametrize(
    "text",
    [
        "2026-02-30T00:00:00.000Z",
        "2026-11-22T24:00:00.000Z",
        "2026-11-22T00:60:00.000Z",
        "0000-01-01T00:00:00.000Z",
    ],
)
def test_parse_iso_refuses_impossible_dates_in_its_own_format(text: str) -> None:
    with pytest.raises(ValueError):
        dates.parse_iso(text)
