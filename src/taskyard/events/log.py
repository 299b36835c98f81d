"""The event log: what the relay published, kept for a while so the HTTP stream can replay it.

The relay appends the ids of each batch it publishes to the `event_log` table in the transaction
that records the batch published (`append_tx`), so an event is in the log exactly when it was
published. The events themselves stay in the outbox, written once (outbox.py). Only one relay
publishes at a time (its advisory lock; SQLite's single writer), so the log's ids grow in
publishing order and a reader that asks for `id > last` never misses one that commits later.
The ids are the stream's event ids (`docs/protocol.md`).

The relay's notification names the batch's newest id, then the log's readers (`READERS`: the
indexer, the notifier) that the batch holds an event for, e.g. `1234 index notify`: a reader
woken by it (`concerns`) reads only batches it has something in, and the others wake it only
by its poll interval, its safety net. A batch with no such event says its newest id alone.
Whatever a reader is not woken for stays in the log for its cursor: a wake-up skipped delays
nothing it reads. A missed notification (None) or a payload of another form (an older relay
during a deploy) concerns every reader.

Rows older than the retention window are deleted in batches (`prune_forever`), their events from
the outbox with them; the highest id deleted is recorded, so that a client asking to resume from
before it learns it missed events instead of silently skipping them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
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
TASK_EXCHANGES = frozenset(
    ("task-defined", "task-pending", "task-running", "task-completed", "task-failed", "task-exception")
)
READERS: dict[str, tuple[frozenset[str], str]] = {
    # reader: the exchanges and the CC'd route (in the outbox's CC JSON) of the events it reads,
    # as its query selects them (index.sql's completed_index_events, notify.sql's notify_task_events)
    "index": (frozenset(("task-completed",)), '"route.index.'),
    "notify": (TASK_EXCHANGES, '"route.notify.'),
}


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


async def append_tx(tx: Tx, events: Sequence[int], now: int, readers: Iterable[str] = ()) -> None:
    """Log the events (outbox ids) the relay published at `now`, in that order, in its transaction;
    after commit, notify every feed of the log's newest id (`EventFeed` needs nothing more when no
    stream follows it) and the `readers` the batch holds events for (`readers_of`)."""
    if not events:
        return
    logged = await tx.fetch("log_events", now, orjson.dumps(list(events)).decode())
    tx.notify(CHANNEL, " ".join([str(max(int(row["id"]) for row in logged)), *sorted(readers)]))


def readers_of(events: Iterable[tuple[str, str]]) -> set[str]:
    """The `READERS` that read any of `events`, each given as (exchange, its CC list as the outbox's
    JSON text)."""
    found: set[str] = set()
    for exchange, cc in events:
        for reader, (exchanges, route) in READERS.items():
            if reader not in found and exchange in exchanges and route in cc:
                found.add(reader)
    return found


def concerns(payload: str | None, reader: str) -> bool:
    """Whether a notification on CHANNEL may concern `reader`: the batch holds an event of its, or
    the payload can't tell (None: notifications may have been lost; another form)."""
    words = payload.split() if payload is not None else []
    return not words or not words[0].isdigit() or reader in words[1:]


def newest_of(payload: str | None) -> int | None:
    """The log's newest id a notification on CHANNEL names (None: it names none)."""
    first = payload.split(maxsplit=1)[0] if payload else ""
    return int(first) if first.isdigit() else None


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
