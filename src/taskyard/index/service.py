"""The index's shared machinery: the `Index` object and the indexer's wake-up."""

from __future__ import annotations

import asyncio

from taskyard.events import log as event_log
from taskyard.queue.service import Queue

INDEXER = "indexer"  # the job's name, in logs and for `Storage.lead`
EXPIRY_SWEEPER = "index-expiry-sweeper"


class Index:
    """Everything the index's operations share: the queue (its storage, clock and artifacts), and
    `published`, set when the relay logs a batch holding a task-completed event with an index
    route (in any process), which wakes the indexer (events/log.py, `concerns`).
    """

    def __init__(self, queue: Queue, *, poll_interval: float = 1.0) -> None:
        self.queue = queue
        self.storage = queue.storage
        self.clock = queue.clock
        self.poll_interval = poll_interval
        self.published = asyncio.Event()

    async def start(self) -> None:
        """Hear of the batches the relay logs, so that the indexer reads one it has events in at once."""
        await self.storage.listen(event_log.CHANNEL, self._heard)

    def _heard(self, payload: str | None) -> None:
        if event_log.concerns(payload, "index"):  # else nothing for the indexer in the batch
            self.published.set()
