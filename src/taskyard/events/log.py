"""The event log: what the relay published, kept for a while so the HTTP stream can replay it.

The relay appends the ids of each batch it publishes to the `event_log` table in the transaction
that records the batch published (`append_tx`), so an event is in the log exactly when it was
published. The events themselves stay in the outbox, written once (outbox.py). Only one relay
publishes at a time (its advisory lock; SQLite's single writer), so the log's ids grow in
publishing order and a reader that asks for `id > last` never misses one that commits later.
The ids are the stream's event ids (`docs/protocol.md`).

Rows older than the retention window are deleted in batches (`prune_forever`), their events from
the outbox with them; the highest id deleted is recorded, so that a client asking to resume from
before it learns it missed events instead of silently skipping them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from taskyard.model import dates
from taskyard.model.messages import Message
from taskyard.storage.port import Row, Session, Storage, Tx

log = logging.getLogger(__name__)
CHANNEL = "events_published"  # notified once per relay batch, in every process
PRUNER = "event-log-pruner"  # the job's name: one process of a deployment runs it (`Storage.lead`)
PRUNE_BATCH = 5000
DEFAULT_RETENTION_SECONDS = 600.0
Clock = Callable[[], int]


@dataclass(frozen=True)
class Logged:
    """One published event as the log keeps it: its id and the stored message."""

    id: int
    message: Message


@dataclass(frozen=True)
class End:
    """Where the log stands: the newest id published, and the highest id pruned (0: none)."""

    newest: int
    pruned: int


async def append_tx(tx: Tx, events: Sequence[int], now: int) -> None:
    """Log the events (outbox ids) the relay published at `now`, in that order, in its transaction;
    after commit, notify every feed of the log's newest id (`EventFeed` needs nothing more when no
    stream follows it)."""
    if not events:
        return
    logged = await tx.fetch("log_events", now, orjson.dumps(list(events)).decode())
    tx.notify(CHANNEL, str(max(int(row["id"]) for row in logged)))


async def end(session: Session) -> End:
    row = await session.fetchrow("event_log_end")
    assert row is not None
    pruned = int(row["pruned"])
    return End(max(int(row["newest"]), pruned), pruned)


async def read(session: Session, after: int, upto: int, limit: int) -> list[Logged]:
    """The events with `after < id <= upto`, oldest first, at most `limit`."""
    rows = await session.fetch("logged_events", after, upto, limit)
    return [_logged(row) for row in rows]


def _logged(row: Row) -> Logged:
    message = Message(row["exchange"], row["routing_key"], orjson.loads(row["body"]), orjson.loads(row["cc"]))
    return Logged(int(row["id"]), message)


async def prune_once(storage: Storage, before: int, batch: int = PRUNE_BATCH) -> int:
    """Delete up to `batch` of the oldest events published before `before`; answer how many ids
    the pruned mark moved past (0: nothing was old enough)."""
    async with storage.transaction() as tx:
        through = await tx.fetchval("event_log_prunable", before, batch)
        if through is None:
            return 0
        await tx.execute("prune_events", int(through))
        deleted = await tx.execute("prune_event_log", int(through))
        await tx.execute("mark_event_log_pruned", int(through))
    return deleted


async def prune_forever(
    storage: Storage, retention_seconds: float, *, interval: float = 10.0, clock: Clock = dates.now_ms
) -> None:
    """Every `interval` seconds, delete the events published more than `retention_seconds` ago, while
    this process leads the job (in every process it would only delete the same rows N times)."""
    while True:
        try:
            if await storage.lead(PRUNER):
                before = clock() - int(retention_seconds * 1000)
                while await prune_once(storage, before) >= PRUNE_BATCH:
                    pass
        except Exception:  # a database outage: try again next time
            log.warning("pruning the event log failed; trying again in %g s", interval, exc_info=True)
        await asyncio.sleep(interval)
