"""Dates as TaskCluster writes them: ISO 8601 UTC with milliseconds and `Z`.

Inside taskyard every instant is an int of milliseconds since the epoch.

Two ranges matter. Every instant in the years 0001 to 9999 (UTC) can be printed; `to_iso` never
raises, and shows anything beyond those years as the nearest printable instant. A date a client
sends must fall in a narrower range, `EARLIEST` to `LATEST`: from the epoch to the end of the year
9998. The year of headroom above it (`HEADROOM`) is there so that what taskyard derives from a
client's date by adding to it (a task group lives an hour past its last task's expiry, a default
expiry is a year past the deadline) still prints with four digits.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from taskyard.model.types import Millis

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EXTRA_DIGITS = re.compile(r"(\.[0-9]{6})[0-9]+")
# What `to_iso` writes (and clients send back): read without the general parser's rewriting.
_CANONICAL = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")
_ONE_MS = timedelta(milliseconds=1)

FIRST_PRINTABLE: Millis = (datetime(1, 1, 1, tzinfo=UTC) - _EPOCH) // _ONE_MS  # 0001-01-01T00:00:00.000Z
LAST_PRINTABLE: Millis = (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - _EPOCH) // _ONE_MS
EARLIEST: Millis = 0  # 1970-01-01T00:00:00.000Z
LATEST: Millis = (datetime(9999, 1, 1, tzinfo=UTC) - _EPOCH) // _ONE_MS - 1  # 9998-12-31T23:59:59.999Z
HEADROOM = 365 * DAY  # the most taskyard may add to a client's date; the year 9999 has 365 days
assert LATEST + HEADROOM <= LAST_PRINTABLE


class OutOfRange(ValueError):
    """A well-formed date-time outside the range allowed where it was given."""


def now_ms() -> Millis:
    """The wall clock, in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def to_iso(ms: Millis) -> str:
    """`2026-11-22T00:18:26.007Z` for an epoch-millisecond instant; never raises.

    An instant past the printable years (only a row stored before the client range was enforced
    can hold one) is shown as the first or last printable instant.
    """
    if not FIRST_PRINTABLE <= ms <= LAST_PRINTABLE:
        ms = min(max(ms, FIRST_PRINTABLE), LAST_PRINTABLE)
    days, ms = divmod(ms, DAY)
    seconds, ms = divmod(ms, SECOND)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{_day_prefix(days)}{hours:02d}:{minutes:02d}:{seconds:02d}.{ms:03d}Z"


@lru_cache(maxsize=4096)
def _day_prefix(days: int) -> str:
    """`2026-11-22T` for the day `days` after the epoch (a pure function, so cached)."""
    return f"{(_EPOCH + timedelta(days=days)).date().isoformat()}T"


def parse_iso(value: str) -> Millis:
    """Parse an ISO 8601 date-time with a timezone; raises ValueError otherwise.

    OutOfRange (a ValueError) if the instant is outside the years 0001 to 9999 in UTC, which a
    timezone offset can push it to: `to_iso` could not print it back.
    """
    if _CANONICAL.fullmatch(value) is not None:  # as to_iso writes it: always in range
        return (datetime.fromisoformat(value) - _EPOCH) // _ONE_MS
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    # Python reads at most six fractional digits; milliseconds are all we keep anyway.
    text = _EXTRA_DIGITS.sub(r"\1", text)
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        raise ValueError("a date-time needs a timezone (end it with Z)")
    ms = (dt - _EPOCH) // _ONE_MS
    if not FIRST_PRINTABLE <= ms <= LAST_PRINTABLE:
        raise OutOfRange(f"a date-time must fall in the years 0001 to 9999 in UTC, not {value[:40]!r}")
    return ms


RANGE_RULE = f"must be a date-time from {to_iso(EARLIEST)} to {to_iso(LATEST)}"


def check_range(ms: Millis) -> Millis:
    """`ms` if a client may send it (EARLIEST to LATEST); OutOfRange otherwise."""
    if not EARLIEST <= ms <= LATEST:
        raise OutOfRange(RANGE_RULE)
    return ms
