"""Replayed Hawk requests: each signed request is accepted once.

Hawk lets a client's clock be off by up to 15 minutes, so a signed request stays acceptable
for that long after it was made; TaskCluster accepts the same request again within that
window. taskyard remembers the MAC of every request it accepted until its timestamp leaves the
window, and refuses a second request with the same MAC with 401. The MAC covers the client's
key, the timestamp, the nonce, the method, the URL, the host and port and the payload hash, so
two different requests never share one.

Two memories do it. This one, `SeenRequests`, is the process's: every header it accepted, reads
too, checked during authentication at no cost to the database. The other is the database's
(`seen_requests`, storage/port.py's Replays): the API hands each header's MAC to storage, and
the first transaction of the request inserts it with the request's own writes, so a replay that
reaches this process after a restart (a deploy, a `kill -9`), or another process of the
deployment, is refused there and commits nothing. A replayed read that reaches a process that
never saw it is answered: it changes nothing. docs/protocol.md says so.

Memory is bounded: MACs are kept in buckets by the second-range of their timestamp, and when
more than `max_entries` are held the oldest bucket is dropped and nothing older than what
remains is accepted any more (401, stale timestamp), so a request is never accepted without
being checked. At 500 requests a second the full window holds about 450,000 MACs (some 50 MB).
"""

from __future__ import annotations

from taskyard.model.types import Millis

BUCKET_MS = 10_000
DEFAULT_MAX_ENTRIES = 1_000_000


class Replayed(Exception):
    """The request was accepted before."""


class TooOld(Exception):
    """The request is older than what is still remembered under memory pressure."""


class SeenRequests:
    """The MACs of requests accepted within the timestamp window."""

    def __init__(self, window_ms: Millis, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self._window = window_ms
        self._max = max_entries
        self._buckets: dict[int, set[str]] = {}
        self._size = 0
        self._floor = -(2**62)  # no bucket below this one is remembered or accepted

    def __len__(self) -> int:
        return self._size

    def admit(self, mac: str, ts_ms: Millis, now_ms: Millis) -> None:
        """Remember `mac`; Replayed if it was admitted before, TooOld if it can't be checked."""
        self._forget_before((now_ms - self._window) // BUCKET_MS)
        bucket = ts_ms // BUCKET_MS
        if bucket < self._floor:
            raise TooOld(mac)
        seen = self._buckets.setdefault(bucket, set())
        if mac in seen:
            raise Replayed(mac)
        seen.add(mac)
        self._size += 1
        while self._size > self._max:
            self._forget_before(min(self._buckets) + 1)

    def _forget_before(self, bucket: int) -> None:
        if bucket <= self._floor:
            return
        self._floor = bucket
        for old in [b for b in self._buckets if b < bucket]:
            self._size -= len(self._buckets.pop(old))
