"""Holding back what a background job failed on, for longer after every failure.

A resolver that fails on one row sets it aside and goes on with the others; the row is tried
again on its own once its hold ends, then held twice as long if it fails again, up to a limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from taskyard.model import dates
from taskyard.model.types import Millis


@dataclass
class _Hold:
    failures: int
    until: Millis


class SetAside:
    """Keys held back after failures: `first` after one, doubling after each more, at most `longest`."""

    def __init__(self, first: Millis = dates.MINUTE, longest: Millis = dates.HOUR) -> None:
        self.first = first
        self.longest = longest
        self._holds: dict[str, _Hold] = {}

    def hold(self, key: str, now: Millis) -> Millis:
        """Hold `key` back after one more failure; answer until when."""
        failures = self._holds[key].failures + 1 if key in self._holds else 1
        until = now + min(self.first << min(failures - 1, 32), self.longest)
        self._holds[key] = _Hold(failures, until)
        return until

    def release(self, key: str) -> None:
        """Forget `key`: it succeeded."""
        self._holds.pop(key, None)

    def held(self, now: Millis) -> set[str]:
        """The keys held back at `now`. A key whose hold ended long ago is forgotten."""
        for key in [k for k, h in self._holds.items() if h.until + self.longest < now]:
            del self._holds[key]
        return {key for key, h in self._holds.items() if h.until > now}

    def failures(self, key: str) -> int:
        hold = self._holds.get(key)
        return 0 if hold is None else hold.failures
