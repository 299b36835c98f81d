"""Schedules in TaskCluster's cron format: 5 fields, or 6 with seconds first; UTC; the next time is
the earliest of every entry's strictly after the reference; a bad entry is a 400 naming it."""

from __future__ import annotations

import pytest

from taskyard.hooks import schedules
from taskyard.model import dates
from taskyard.model.errors import InputError

T = dates.parse_iso("2026-11-29T08:30:15.500Z")


def at(text: str) -> int:
    return dates.parse_iso(text)


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        (["0 0 1 * * *"], "2026-11-30T01:00:00.000Z"),  # seconds first: daily at 01:00
        (["0 0 9,21 * * 1-5"], "2026-11-30T09:00:00.000Z"),  # 2026-11-29 is a Sunday
        (["*/5 * * * *"], "2026-11-29T08:35:00.000Z"),  # 5 fields: minutes
        (["* * * * * *"], "2026-11-29T08:30:16.000Z"),
        (["@daily"], "2026-11-30T00:00:00.000Z"),
        (["0 12 * * *", "45 30 8 * * *"], "2026-11-29T08:30:45.000Z"),  # the earliest of all entries
    ],
)
def test_next_date(schedule: list[str], expected: str) -> None:
    assert dates.to_iso(schedules.next_date(schedule, T)) == expected


def test_strictly_after_the_reference() -> None:
    assert schedules.next_date(["0 * * * * *"], at("2026-11-29T08:31:00.000Z")) == at(
        "2026-11-29T08:32:00.000Z"
    )


def test_no_schedule_never_fires() -> None:
    assert schedules.next_date([], T) == schedules.NEVER == at("4000-02-01T00:00:00.000Z")
    assert schedules.upcoming([], T, 5) == []


def test_upcoming() -> None:
    shown = [dates.to_iso(t) for t in schedules.upcoming(["0 0 2 * * *"], T, 3)]
    assert shown == ["2026-11-30T02:00:00.000Z", "2026-12-01T02:00:00.000Z", "2026-12-02T02:00:00.000Z"]


@pytest.mark.parametrize("entry", ["61 * * * *", "* * *", "", "* * * * * * * *", "@sometimes", "a b c d e"])
def test_a_bad_entry_is_a_400_naming_it(entry: str) -> None:
    with pytest.raises(InputError) as info:
        schedules.check(["0 0 * * *", entry])
    assert info.value.message.startswith("schedule[1]: ") and repr(entry) in info.value.message
