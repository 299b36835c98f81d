"""reclaimTask without a transaction (`service.transition_alone`): its version-checked update loses
to a change made between its read and its write, and the run is judged again on the fresh row."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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


class Interloper:
    """The queue's storage, which lets `meanwhile` change the database just before the first
    single-statement write (`Storage.execute`) goes through: between reclaimTask's read and write."""

    def __init__(self, inner: Storage, meanwhile: Callable[[], Awaitable[object]]) -> None:
        self.inner = inner
        self.meanwhile: Callable[[], Awaitable[object]] | None = meanwhile

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def execute(self, name: str, *args: object, **params: object) -> int:
        if self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            await meanwhile()
        return await self.inner.execute(name, *args, **params)


async def running(queue: Queue, clock: FakeClock) -> str:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now), guard=ALLOW_ALL)
    (claim,) = await claims.claim_pending(queue, TQ, WORKER, 1)
    return str(claim["status"]["taskId"])


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
    # read, lost update, (the other reclaim's read and update), read again, update
    assert tally.trips == ["get_task", "get_task", "update_task", "update_task", "get_task", "update_task"]
    status = await tasks.status(queue, task_id)
    assert status["status"]["runs"][0]["takenUntil"] == answer["takenUntil"]
