"""A worker's next call about a run it claimed (a reclaim, its report) is decided on the record this
process committed, without reading it again; the update that writes the change checks the row's
version and creation time, so a record changed since, by another process or by a task made anew
under the same taskId, is read again and never written over."""

from __future__ import annotations

import pytest

from taskyard.model import dates
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, tasks
from taskyard.queue.service import Queue, RunningRecords
from taskyard.storage.counting import counting
from taskyard.storage.port import Storage
from tests.conftest import FakeClock, new_queue
from tests.queue.helpers import definition, new_id

TQ = "test-prov/test-worker"


async def claimed(queue: Queue, clock: FakeClock, worker: str, task_id: str | None = None) -> str:
    task_id = task_id or new_id()
    body = definition(clock.now, expires=dates.to_iso(clock.now + 2 * dates.HOUR))
    await tasks.create_task(queue, task_id, body, guard=ALLOW_ALL)
    (claim,) = await claims.claim_pending(queue, TQ, ("wg", worker), 1)
    assert claim["status"]["taskId"] == task_id
    return task_id


def reads(trips: list[str]) -> int:
    return sum("get_task" in trip.split("+") for trip in trips)


async def test_a_report_after_a_claim_here_reads_nothing(queue: Queue, clock: FakeClock) -> None:
    task_id = await claimed(queue, clock, "w1")
    with counting() as tally:
        await claims.reclaim_task(queue, task_id, 0)
        answer = await claims.report(queue, task_id, 0, "completed", "completed")
    assert answer["status"]["state"] == "completed"
    assert reads(tally.trips) == 0


async def test_a_record_another_process_changed_is_read_again(
    queue: Queue, storage: Storage, clock: FakeClock
) -> None:
    other = new_queue(storage, clock)  # another process on the same database
    task_id = await claimed(queue, clock, "w1")
    clock.advance(1000)
    reclaimed = await claims.reclaim_task(other, task_id, 0)
    with counting() as tally:
        answer = await claims.report(queue, task_id, 0, "failed", "failed")
    assert reads(tally.trips) == 1
    run = answer["status"]["runs"][0]
    assert (run["state"], run["takenUntil"]) == ("failed", reclaimed["takenUntil"])


async def test_a_task_made_anew_under_its_taskid_is_never_written_from_the_old_record(
    queue: Queue, storage: Storage, clock: FakeClock
) -> None:
    """The old task expires and is deleted; another process creates a task under the same taskId
    and another worker claims it: the same version as the record this process kept. The report is
    decided on the new task, read afresh: its run stays the new worker's."""
    other = new_queue(storage, clock)
    task_id = await claimed(queue, clock, "w1")
    clock.advance(3 * dates.HOUR)
    async with storage.transaction() as tx:
        await tx.execute("expire_tasks", clock.now)
        await tx.execute("expire_pending", clock.now)
    await claimed(other, clock, "w2", task_id)
    answer = await claims.report(queue, task_id, 0, "completed", "completed")
    run = answer["status"]["runs"][0]
    assert (run["state"], run["workerId"]) == ("completed", "w2")
    assert run["started"] == dates.to_iso(clock.now)


async def test_the_oldest_record_goes_first_past_the_limit(
    queue: Queue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(RunningRecords, "LIMIT", 2)
    first, second, third = [await claimed(queue, clock, "w1") for _ in range(3)]
    kept = queue.running
    assert kept.take(first) is None
    assert [rec.task_id for rec in (kept.take(second), kept.take(third)) if rec] == [second, third]
