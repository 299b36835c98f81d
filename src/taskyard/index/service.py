"""The index's shared machinery: the `Index` object and the indexer's wake-up."""

from __future__ import annotations

import asyncio

from taskyard.events import log as event_log
from taskyard.queue.service import Queue

INDEXER = "indexer"  # the job's name, in logs and for `Storage.lead`
EXPIRY_SWEEPER = "index-expiry-sweeper"


class Index:
    """Everything the index's operations share: the queue (its storage, clock and artifacts), and
    `published`, set whenever the relay logs events (in any process), which wakes the indexer.
    """

    def __init__(self, queue: Queue, *, poll_interval: float = 1.0) -> None:
        self.queue = queue
        self.storage = queue.storage
        self.clock = queue.clock
        self.poll_interval = poll_interval
        self.published = asyncio.Event()

    async def start(self) -> None:
        """Hear of every batch the relay logs, so that the indexer reads it at once."""
        await self.storage.listen(event_log.CHANNEL, self._heard)

    def _heard(self, payload: str | None) -> None:
        self.published.set()
