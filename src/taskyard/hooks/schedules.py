"""Schedules: TaskCluster's cron format, and the time of a hook's next scheduled fire.

An entry has 5 fields (`min hour dom mon dow`) or 6, the first then being seconds
(`sec min hour dom mon dow`), as TaskCluster's cron parser reads them; `@daily`-style aliases are
accepted too. Times are UTC. The next fire is the earliest time of any entry strictly after the
reference; a hook with no schedule has a far-future date that never comes.
"""

from __future__ import annotations

import datetime as dt

from croniter import croniter
from croniter.croniter import CroniterError

from taskyard.model.errors import InputError
from taskyard.model.types import Millis

NEVER: Millis = int(dt.datetime(4000, 2, 1, tzinfo=dt.UTC).timestamp() * 1000)
MAX_ENTRY = 1000  # characters of one schedule entry


def _fields(expression: str) -> str:
    """croniter's form of a TaskCluster entry: a 6-field entry's seconds moved last."""
    parts = expression.split()
    if len(parts) == 6:
        return " ".join(parts[1:] + parts[:1])
    return " ".join(parts)


def check(schedule: list[str]) -> None:
    """400 naming the first entry of `schedule` that is not a cron expression, and why."""
    for index, expression in enumerate(schedule):
        problem = _problem(expression)
        if problem is not None:
            raise InputError(f"schedule[{index}]: {problem} in {expression!r}")


def _problem(expression: str) -> str | None:
    if len(expression) > MAX_ENTRY:
        return f"an entry is at most {MAX_ENTRY} characters"
    parts = expression.split()
    if not parts:
        return "an empty entry is no cron expression"
    if parts[0].startswith("@"):
        if len(parts) != 1:
            return "an alias such as @daily stands alone"
    elif len(parts) not in (5, 6):
        return f"a cron expression has 5 fields (min hour dom mon dow) or 6 (seconds first), not {len(parts)}"
    try:
        croniter(_fields(expression), dt.datetime(2000, 1, 1, tzinfo=dt.UTC)).get_next(dt.datetime)
    except (CroniterError, ValueError, KeyError, IndexError, TypeError, OverflowError) as exc:
        return str(exc) or type(exc).__name__
    return None


def next_date(schedule: list[str], reference: Millis) -> Millis:
    """The earliest time of any entry strictly after `reference`; `NEVER` for no schedule."""
    start = dt.datetime.fromtimestamp(reference / 1000, dt.UTC)
    found = NEVER
    for expression in schedule:
        try:
            when = croniter(_fields(expression), start).get_next(dt.datetime)
        except (CroniterError, ValueError, KeyError, IndexError, TypeError, OverflowError):
            continue  # checked when the hook was stored; a newer croniter may read it otherwise
        found = min(found, int(when.timestamp() * 1000))
    return found


def upcoming(schedule: list[str], reference: Millis, count: int) -> list[Millis]:
    """The next `count` fire times after `reference` (fewer for no schedule): what a page shows."""
    found: list[Millis] = []
    at = reference
    while len(found) < count:
        at = next_date(schedule, at)
        if at >= NEVER:
            break
        found.append(at)
    return found
