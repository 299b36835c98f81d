"""An outage of a connection, as its logs tell it: one line when it begins, one when it ends.

However many attempts a reconnection takes, the outage is said once when it begins and once when
it ends (with how long it lasted); the first connection of all is announced once. Both the
RabbitMQ bus and the worker's cancellation listener keep one. Pure bookkeeping: the caller logs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Outage:
    since: float | None = None  # when the current outage began (a monotonic clock); None: up
    announced: bool = False  # whether the first connection has been said

    def begins(self, now: float) -> bool:
        """The connection is lost; True if this starts an outage (say so), False if it goes on."""
        if self.since is not None:
            return False
        self.since = now
        return True

    def ends(self, now: float) -> tuple[bool, float | None]:
        """The connection is up: (whether it is the first ever, seconds the outage lasted or None)."""
        first, lasted = not self.announced and self.since is None, None
        if self.since is not None:
            lasted = now - self.since
        self.since, self.announced = None, True
        return first, lasted
