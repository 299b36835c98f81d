"""The event-bus port: publish the queue's events to topic exchanges; subscribe by pattern.

A bus takes the stored events (`Message`), maps each through its profiles into `Envelope`s
(full exchange name, routing key, CCs, body) and sends those. Patterns follow AMQP topic rules:
words separated by `.`, `*` matches one word, `#` any number. An adapter delivers each envelope
to every subscription whose exchange is the envelope's and whose pattern matches its routing key
or one of its CC keys, at most once per subscription.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from taskyard.model.messages import Message
from taskyard.model.types import LooseJSON


@dataclass(frozen=True)
class Envelope:
    """One message as sent: `exchange` is the full name (`exchange/taskcluster-queue/v1/task-pending`)."""

    exchange: str
    routing_key: str
    body: LooseJSON
    cc: list[str] = field(default_factory=list)


Handler = Callable[[Envelope], Awaitable[None] | None]


class BusUnavailable(Exception):
    """The bus cannot take messages now (broker down, refusing us, or not confirming).

    Nothing of the batch counts as published: the relay keeps the events and tries again once
    `wait_ready()` returns.
    """


class EventBus(Protocol):
    async def publish(self, messages: Sequence[Message]) -> None:
        """Publish `messages` in order; return once the bus has accepted them all, else raise."""

    async def wait_ready(self) -> None:
        """Return once the bus can take messages again (at once for a bus that always can)."""

    def subscribe(self, exchange: str, pattern: str, handler: Handler) -> Callable[[], None]:
        """Call `handler` for matching envelopes; answer a function that unsubscribes."""

    async def close(self) -> None:
        """Stop delivering."""
