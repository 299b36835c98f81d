"""Dates (model/dates.py) as properties: every printable instant prints and reads back, the
printed form sorts as the instants do, and a date-time in any timezone reads as the same instant."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from taskyard.model import dates
from tests.model.properties import PROPERTIES

printable = st.integers(dates.FIRST_PRINTABLE, dates.LAST_PRINTABLE)
CANONICAL = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")


@PROPERTIES
@given(ms=printable)
def test_every_printable_instant_reads_back(ms: int) -> None:
    text = dates.to_iso(ms)
    assert CANONICAL.fullmatch(text)
    assert dates.parse_iso(text) == ms


@PROPERTIES
@given(ms=st.integers(-(2**62), 2**62))
def test_to_iso_never_raises_and_clamps_to_the_printable_years(ms: int) -> None:
    clamped = min(max(ms, dates.FIRST_PRINTABLE), dates.LAST_PRINTABLE)
    assert dates.to_iso(ms) == dates.to_iso(clamped)


@PROPERTIES
@given(a=printable, b=printable)
def test_the_printed_form_sorts_as_the_instants_do(a: int, b: int) -> None:
    assert (dates.to_iso(a) < dates.to_iso(b)) is (a < b)


@PROPERTIES
@given(
    ms=st.integers(dates.EARLIEST, dates.LATEST),
    offset_minutes=st.integers(-23 * 60 - 59, 23 * 60 + 59),
    micros=st.integers(0, 999),
)
def test_a_date_time_in_any_timezone_reads_as_the_same_instant(
    ms: int, offset_minutes: int, micros: int
) -> None:
    instant = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms, microseconds=micros)
    zone = timezone(timedelta(minutes=offset_minutes))
    text = instant.astimezone(zone).isoformat()  # e.g. 2026-11-22T01:18:26.007123+01:00
    assert dates.parse_iso(text) == ms  # sub-millisecond digits are dropped, not rounded
    assert dates.check_range(dates.parse_iso(text)) == ms
