"""The event-bus port: publish the queue's messages to topic exchanges; subscribe by pattern.

Patterns follow AMQP topic rules: words separated by `.`, `*` matches one word, `#` any number.
An adapter delivers each message to every subscription whose exchange matches and whose
pattern matches the routing key or one of the message's CC keys, at most once per subscription.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from taskyard.model.messages import Message

Handler = Callable[[Message], Awaitable[None] | None]


class EventBus(Protocol):
    async def publish(self, messages: Sequence[Message]) -> None:
        """Publish `messages` in order; returns once the bus has accepted them all."""

    def subscribe(self, exchange: str, pattern: str, handler: Handler) -> Callable[[], None]:
        """Call `handler` for matching messages; answer a function that unsubscribes."""

    async def close(self) -> None:
        """Stop delivering."""
