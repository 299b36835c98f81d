"""Dates as TaskCluster writes them: ISO 8601 UTC with milliseconds and `Z`.

Inside taskyard every instant is an int of milliseconds since the epoch.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

from taskyard.model.types import Millis

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EXTRA_DIGITS = re.compile(r"(\.[0-9]{6})[0-9]+")


def now_ms() -> Millis:
    """The wall clock, in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def to_iso(ms: Millis) -> str:
    """`2026-11-22T00:18:26.007Z` for an epoch-millisecond instant."""
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return f"{dt.year:04d}-" + dt.strftime("%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_iso(value: str) -> Millis:
    """Parse an ISO 8601 date-time with a timezone; raises ValueError otherwise."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    # Python reads at most six fractional digits; milliseconds are all we keep anyway.
    text = _EXTRA_DIGITS.sub(r"\1", text)
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        raise ValueError("a date-time needs a timezone (end it with Z)")
    return (dt - _EPOCH) // timedelta(milliseconds=1)
