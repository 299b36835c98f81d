"""The poll protocol's messages at the service level, on both databases: the backfill a database
from before the messages gets at start-up."""

from __future__ import annotations

from taskyard.model import azure_queue, dates
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import poll, service, tasks
from taskyard.queue.service import Queue
from taskyard.storage.port import Storage
from tests.conftest import FakeClock
from tests.queue.helpers import definition, new_id


async def visible_messages(q: Queue, name: str) -> list[str]:
    async with q.storage.reader() as session:
        rows = await session.fetch("peek_poll_messages", name, q.clock(), 100)
    return [row["task_id"] for row in rows]


async def test_pending_runs_of_an_older_database_get_their_messages(
    queue: Queue, storage: Storage, clock: FakeClock
) -> None:
    created = []
    for _ in range(3):
        task_id = new_id()
        await tasks.create_task(queue, task_id, definition(clock()), guard=ALLOW_ALL)
        created.append(task_id)
    rec = await service.load(queue, created[0])
    name = azure_queue.queue_name(rec.definition["provisionerId"], rec.definition["workerType"], 1)
    assert sorted(await visible_messages(queue, name)) == sorted(created)
    assert await poll.backfill_messages(queue) == 0  # messages exist: nothing to do

    async with storage.transaction() as tx:  # as before migration 0007: no messages at all
        await tx.execute("expire_poll_messages", clock() + 10 * dates.DAY)
    assert await visible_messages(queue, name) == []
    assert await poll.backfill_messages(queue) == 3
    assert sorted(await visible_messages(queue, name)) == sorted(created)
    assert await poll.backfill_messages(queue) == 0
