"""Replays: a signed request is accepted once; memory stays bounded without accepting the unchecked."""

from __future__ import annotations

import pytest

from taskyard.auth.nonces import BUCKET_MS, Replayed, SeenRequests, TooOld

WINDOW = 15 * 60 * 1000
NOW = 1_800_000_000_000


def test_a_request_is_admitted_once() -> None:
    seen = SeenRequests(WINDOW)
    seen.admit("mac-1", NOW, NOW)
    seen.admit("mac-2", NOW, NOW)  # another request, the same second
    with pytest.raises(Replayed):
        seen.admit("mac-1", NOW, NOW + 14 * 60 * 1000)
    assert len(seen) == 2


def test_it_is_forgotten_once_its_timestamp_leaves_the_window() -> None:
    seen = SeenRequests(WINDOW)
    seen.admit("mac-1", NOW, NOW)
    seen.admit("mac-2", NOW + WINDOW + 2 * BUCKET_MS, NOW + WINDOW + 2 * BUCKET_MS)
    assert len(seen) == 1  # mac-1's timestamp is stale by now: Hawk refuses it before asking here


def test_under_memory_pressure_the_oldest_are_dropped_and_no_longer_accepted() -> None:
    seen = SeenRequests(WINDOW, max_entries=3)
    for i in range(3):
        seen.admit(f"old-{i}", NOW, NOW)
    seen.admit("new", NOW + BUCKET_MS, NOW + BUCKET_MS)
    assert len(seen) == 1  # the oldest bucket went
    with pytest.raises(TooOld):
        seen.admit("old-0", NOW, NOW + BUCKET_MS)  # a replay it can no longer check is refused
    with pytest.raises(TooOld):
        seen.admit("never-seen", NOW, NOW + BUCKET_MS)
    seen.admit("newer", NOW + BUCKET_MS, NOW + BUCKET_MS)
