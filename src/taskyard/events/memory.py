"""The in-process bus: the embedded default. Subscribers in this process only.

It maps events through the same profiles as the RabbitMQ bus, so a subscriber sees the
exchanges, keys and bodies RabbitMQ's consumers would.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from taskyard.events.port import Envelope, Handler, check_pattern
from taskyard.events.profiles import Profiles
from taskyard.model.messages import Message

log = logging.getLogger(__name__)


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str]:
    words = []
    for word in pattern.split("."):
        words.append({"*": r"[^.]*", "#": r".*"}.get(word, re.escape(word)))
    regex = r"\.".join(words).replace(r".*\.", r"(?:.*\.)?").replace(r"\..*", r"(?:\..*)?")
    return re.compile(f"^{regex}$")


def topic_matches(pattern: str, key: str) -> bool:
    """AMQP topic matching: `*` is one word, `#` zero or more."""
    return _compile(pattern).match(key) is not None


class MemoryBus:
    """Publishing enqueues; one dispatcher task delivers in order, outside the publisher's transaction."""

    def __init__(self, profiles: Profiles | None = None) -> None:
        self.profiles = profiles or Profiles()
        self._subscriptions: list[tuple[str, str, Handler]] = []
        # Messages are mapped when dispatched, and only if someone subscribes by then.
        self._queue: asyncio.Queue[Envelope | Message] = asyncio.Queue()
        self._dispatcher: asyncio.Task[None] | None = None

    async def publish(self, messages: Sequence[Message]) -> None:
        self._enqueue(messages)

    def deliver(self, envelopes: Sequence[Envelope]) -> None:
        """Hand envelopes already mapped to the subscribers, in order."""
        self._enqueue(envelopes)

    def _enqueue(self, items: Sequence[Envelope | Message]) -> None:
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.create_task(self._dispatch(), name="memory-bus")
        for item in items:
            self._queue.put_nowait(item)

    async def wait_ready(self) -> None:
        return None

    async def _dispatch(self) -> None:
        while True:
            item = await self._queue.get()
            if isinstance(item, Message):
                envelopes = self.profiles.map(item) if self._subscriptions else []
            else:
                envelopes = [item]
            for envelope in envelopes:
                keys = [envelope.routing_key, *envelope.cc]
                for exchange, pattern, handler in list(self._subscriptions):
                    if exchange == envelope.exchange and any(topic_matches(pattern, k) for k in keys):
                        await self._deliver(handler, envelope)
            self._queue.task_done()

    async def flush(self) -> None:
        """Wait until every message published so far has been delivered."""
        await self._queue.join()

    async def _deliver(self, handler: Handler, envelope: Envelope) -> None:
        try:
            result = handler(envelope)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("event handler failed for %s %s", envelope.exchange, envelope.routing_key)

    def subscribe(self, exchange: str, pattern: str, handler: Handler) -> Callable[[], None]:
        """BadPattern, and no subscription, for a pattern that breaks AMQP's topic rules."""
        entry = (exchange, check_pattern(pattern), handler)
        self._subscriptions.append(entry)
        return lambda: self._subscriptions.remove(entry) if entry in self._subscriptions else None

    def consume(
        self, queue: str, bindings: Sequence[tuple[str, str]], handler: Handler
    ) -> Callable[[], None]:
        """In process there is nothing durable: every binding is a subscription."""
        stops = [self.subscribe(exchange, pattern, handler) for exchange, pattern in bindings]

        def stop_all() -> None:
            for stop in stops:
                stop()

        return stop_all

    async def close(self) -> None:
        self._subscriptions.clear()
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._dispatcher
