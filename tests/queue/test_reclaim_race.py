"""reclaimTask, like every change through `service.transition()`, reads the task without a lock and
writes with an update that checks the version read: on PostgreSQL a change made between its read
and its write wins, and the run is judged again on the fresh row. (On SQLite the one writer holds
from the read to the write: there is no race to lose.)"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from taskyard.model.errors import RequestConflict
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, tasks
from taskyard.queue.service import Queue
from taskyard.storage.counting import counting
from taskyard.storage.port import Storage
from tests.conftest import FakeClock
from tests.queue.helpers import definition, new_id

TQ = "test-prov/test-worker"
WORKER = ("wg", "w1")


class _ReadThenMeanwhile:
    def __init__(self, tx: Any, interloper: Interloper) -> None:
        self._tx, self._interloper = tx, interloper

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)

    async def fetchrow(self, name: str, *args: object, **params: object) -> Any:
        row = await self._tx.fetchrow(name, *args, **params)
        if self._interloper.meanwhile is not None:
            meanwhile, self._interloper.meanwhile = self._interloper.meanwhile, None
            await meanwhile()
        return row


class Interloper:
    """The queue's storage, which lets `meanwhile` change the database just after the first read of
    an optimistic transaction: between reclaimTask's read and its write."""

    def __init__(self, inner: Storage, meanwhile: Callable[[], Awaitable[object]]) -> None:
        self.inner = inner
        self.meanwhile: Callable[[], Awaitable[object]] | None = meanwhile

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @asynccontextmanager
    async def optimistic(self) -> AsyncIterator[Any]:
        async with self.inner.optimistic() as tx:
            yield _ReadThenMeanwhile(tx, self)


@pytest.fixture(autouse=True)
def _postgres_only(db_url: str) -> None:
    if not db_url.startswith("postgres"):
        pytest.skip("on SQLite the one writer holds from the read to the write: no race to lose")


async def running(queue: Queue, clock: FakeClock) -> str:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now), guard=ALLOW_ALL)
    (claim,) = await claims.claim_pending(queue, TQ, WORKER, 1)
    task_id = str(claim["status"]["taskId"])
    queue.running.forget(task_id)  # decide on a read, whose race this module is about
    return task_id


def interloping(queue: Queue, meanwhile: Callable[[], Awaitable[object]]) -> Storage:
    original = queue.storage
    queue.storage = Interloper(original, meanwhile)  # type: ignore[assignment]
    return original


async def test_a_report_between_read_and_write_wins_and_the_reclaim_is_refused(
    queue: Queue, clock: FakeClock
) -> None:
    task_id = await running(queue, clock)
    original = interloping(queue, lambda: claims.report(queue, task_id, 0, "completed", "completed"))
    try:
        with pytest.raises(RequestConflict, match="completed"):
            await claims.reclaim_task(queue, task_id, 0)
    finally:
        queue.storage = original
    status = await tasks.status(queue, task_id)
    assert status["status"]["state"] == "completed"  # the reclaim's stale write never landed
    assert status["status"]["runs"][0]["state"] == "completed"


async def test_a_reclaim_that_lost_a_race_with_another_reclaim_reads_again_and_extends(
    queue: Queue, clock: FakeClock
) -> None:
    task_id = await running(queue, clock)
    clock.advance(10)
    original = interloping(queue, lambda: claims.reclaim_task(queue, task_id, 0))
    try:
        clock.advance(10)
        with counting() as tally:
            answer = await claims.reclaim_task(queue, task_id, 0)
    finally:
        queue.storage = original
    assert answer["status"]["state"] == "running"
    # read, (the other reclaim's read and update), update lost, read again, update
    assert tally.trips == [
        "get_task",
        "get_task",
        "update_task_checked",
        "update_task_checked",
        "get_task",
        "update_task_checked",
    ]
    status = await tasks.status(queue, task_id)
    assert status["status"]["runs"][0]["takenUntil"] == answer["takenUntil"]
