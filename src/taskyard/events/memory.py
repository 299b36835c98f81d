"""The in-process bus: the embedded default. Subscribers in this process only."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from taskyard.events.port import Handler
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

    def __init__(self) -> None:
        self._subscriptions: list[tuple[str, str, Handler]] = []
        self._queue: asyncio.Queue[Message] = asyncio.Queue()
        self._dispatcher: asyncio.Task[None] | None = None

    async def publish(self, messages: Sequence[Message]) -> None:
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.create_task(self._dispatch(), name="memory-bus")
        for message in messages:
            self._queue.put_nowait(message)

    async def _dispatch(self) -> None:
        while True:
            message = await self._queue.get()
            keys = [message.routing_key, *message.cc]
            for exchange, pattern, handler in list(self._subscriptions):
                if exchange == message.exchange and any(topic_matches(pattern, k) for k in keys):
                    await self._deliver(handler, message)
            self._queue.task_done()

    async def flush(self) -> None:
        """Wait until every message published so far has been delivered."""
        await self._queue.join()

    async def _deliver(self, handler: Handler, message: Message) -> None:
        try:
            result = handler(message)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("event handler failed for %s %s", message.exchange, message.routing_key)

    def subscribe(self, exchange: str, pattern: str, handler: Handler) -> Callable[[], None]:
        entry = (exchange, pattern, handler)
        self._subscriptions.append(entry)
        return lambda: self._subscriptions.remove(entry) if entry in self._subscriptions else None

    async def close(self) -> None:
        self._subscriptions.clear()
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._dispatcher
