"""The indexer: tasks are indexed under their `index.<path>` routes when they complete.

It reads the queue's task-completed events from the event log (`events/log.py`: what the relay
published, in publishing order), from a cursor kept in the database (`index_cursor`). Each batch
is indexed, and the cursor moved past it, in one transaction: a task that completed is indexed
exactly once however the server stops, since its event is in the outbox from the commit that
completed it, logged once the relay publishes it (also after a restart), and read from the log
until the cursor is past it. Failed and exception tasks are never indexed (no event of theirs is
read). The indexer acts on the task's stored definition (its `extra.index`), not on the event.

One indexer runs at a time across a deployment: on PostgreSQL the cursor's row is locked by the
batch's transaction, on SQLite the one writer is the lock. The log is pruned after
`--event-retention`; an indexer that falls behind that far (a database down for longer) skips
what was pruned, with a warning.
"""

from __future__ import annotations

import logging

import orjson

from taskyard.events import log as event_log
from taskyard.index import entries
from taskyard.index.service import EXPIRY_SWEEPER, INDEXER, Index
from taskyard.model.index_paths import Entry, entry_of_task, paths_of_routes
from taskyard.queue import resolvers
from taskyard.queue import service as queue_service
from taskyard.storage.port import Tx, run_in_transaction

log = logging.getLogger(__name__)
BATCH = 200


async def index_completed(ix: Index) -> int:
    """Index the tasks of the next batch of task-completed events the log holds; answer how many
    events it read (0: the indexer is up to date)."""
    async with ix.storage.reader() as session:
        end = await event_log.end(session)
    return await run_in_transaction(ix.storage, lambda tx: _batch_tx(ix, tx, end))


async def _batch_tx(ix: Index, tx: Tx, end: event_log.End) -> int:
    through = int(await tx.fetchval("index_cursor"))
    if through >= end.newest:
        return 0
    if through < end.pruned:
        log.warning(
            "indexer: events %d to %d were pruned from the log before they were indexed",
            through + 1,
            end.pruned,
        )
    rows = await tx.fetch("completed_index_events", through, end.newest, BATCH)
    items: list[tuple[str, Entry]] = []
    for row in rows:
        items += await _entries_tx(tx, orjson.loads(row["body"]))
    if items:
        await entries.insert_many_tx(ix, tx, items)
    full = len(rows) == BATCH
    await tx.execute("move_index_cursor", int(rows[-1]["id"]) if full else end.newest)
    return len(rows) if full else 0


async def _entries_tx(tx: Tx, body: object) -> list[tuple[str, Entry]]:
    """What the completed task an event names is indexed as: (path, entry) for each of its
    `index.` routes; none when it is gone, not completed (rerun since) or its extra.index unusable."""
    status = body.get("status") if isinstance(body, dict) else None
    task_id = status.get("taskId") if isinstance(status, dict) else None
    if not isinstance(task_id, str):
        return []
    row = await tx.fetchrow("get_task", task_id)
    if row is None:
        return []  # expired and swept since
    rec = queue_service.record_from_row(row)
    if rec.state != "completed":
        return []  # rerun since: indexed when it completes again
    paths = paths_of_routes(rec.definition.get("routes"))
    entry = entry_of_task(task_id, rec.definition, expires=rec.expires, created=rec.created)
    if entry is None:
        log.info("task %s completed with an unusable extra.index; not indexed", task_id)
        return []
    return [(path, entry) for path in paths]


async def run_forever(ix: Index) -> None:
    """Index completed tasks until cancelled: at once when the relay logs events for it, else every
    `poll_interval`; only in the process that leads the job."""
    await resolvers.run_forever(
        INDEXER, lambda: index_completed(ix), ix.poll_interval, ix.published, lead=ix.storage.lead
    )


async def sweep_forever(ix: Index) -> None:
    """Delete expired entries and namespaces every `--expiry-interval`, in bounded batches."""
    interval = ix.queue.config.expiry_interval
    await resolvers.run_forever(
        EXPIRY_SWEEPER, lambda: entries.sweep_expired(ix), interval, lead=ix.storage.lead
    )
