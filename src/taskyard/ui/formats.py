"""How pages show times, ages and durations: the template filters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from taskyard.model import dates


def when(value: object) -> str:
    """An ISO timestamp or epoch milliseconds as `2026-11-27 05:12:03Z`; empty for none."""
    if value is None or value == "":
        return ""
    text = dates.to_iso(int(value)) if isinstance(value, int | float) else str(value)
    return text.replace("T", " ")[:19] + "Z"


def duration(ms: object) -> str:
    """Milliseconds as `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 03 min`, `3 d 4 h`."""
    if ms is None:
        return ""
    total = max(0, int(ms))  # type: ignore[call-overload]
    if total < 1000:
        return f"{total} ms"
    if total < 60_000:
        return f"{total / 1000:.1f} s"
    seconds = total // 1000
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600} h"


def millis(value: object) -> int | None:
    """An ISO timestamp or epoch milliseconds as epoch milliseconds (None for none)."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return int(value)
    return dates.parse_iso(str(value))


FILTERS: dict[str, Callable[..., Any]] = {"when": when, "duration": duration, "millis": millis}
