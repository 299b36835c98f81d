"""The run state machine through the queue service, on every storage backend (docs/protocol.md)."""

from __future__ import annotations

import asyncio

import pytest

from taskyard.model import dates
from taskyard.model.errors import InputError, RequestConflict, ResourceNotFound
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, resolvers, tasks, workers
from taskyard.queue.service import Queue
from tests.conftest import FakeClock, Published
from tests.queue.helpers import definition, new_id

TQ = "test-prov/test-worker"
WORKER = ("wg", "w1")


async def create(queue: Queue, clock: FakeClock, **overrides: object) -> str:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now, **overrides), guard=ALLOW_ALL)
    return task_id


async def claim_one(queue: Queue, worker: tuple[str, str] = WORKER) -> dict:
    found = await claims.claim_pending(queue, TQ, worker, 1)
    assert len(found) == 1
    return found[0]


async def test_create_claim_complete(queue: Queue, clock: FakeClock, published: Published) -> None:
    task_id = await create(queue, clock)
    assert await published.exchanges() == ["task-defined", "task-pending"]
    claim = await claim_one(queue)
    assert claim["status"]["taskId"] == task_id and claim["runId"] == 0
    assert claim["status"]["state"] == "running"
    assert claim["task"] == await tasks.task(queue, task_id)
    assert claim["credentials"]["clientId"].startswith(f"task-client/{task_id}/0/on/wg/w1/until/")
    status = (await claims.report(queue, task_id, 0, "completed", "completed"))["status"]
    assert status["state"] == "completed"
    assert status["runs"][0]["reasonResolved"] == "completed"
    assert await published.exchanges() == ["task-running", "task-completed"]
    await resolvers.resolve_dependencies(queue)
    assert await published.exchanges() == ["task-group-resolved"]


async def test_create_is_idempotent_and_conflicts_on_difference(
    queue: Queue, clock: FakeClock, published: Published
) -> None:
    task_id = new_id()
    body = definition(clock.now)
    first = await tasks.create_task(queue, task_id, body, guard=ALLOW_ALL)
    again = await tasks.create_task(queue, task_id, body, guard=ALLOW_ALL)
    assert first == again
    assert await published.exchanges() == ["task-defined", "task-pending", "task-defined", "task-pending"]
    with pytest.raises(RequestConflict):
        await tasks.create_task(queue, task_id, {**body, "taskQueueId": "test-prov/other"}, guard=ALLOW_ALL)


async def test_unknown_dependency_stores_nothing(queue: Queue, clock: FakeClock) -> None:
    task_id = new_id()
    with pytest.raises(InputError, match="do not exist"):
        await tasks.create_task(
            queue, task_id, definition(clock.now, dependencies=[new_id()]), guard=ALLOW_ALL
        )
    with pytest.raises(ResourceNotFound):
        await tasks.status(queue, task_id)


async def test_claim_order_priority_then_age(queue: Queue, clock: FakeClock) -> None:
    old = await create(queue, clock)
    clock.advance(1)
    high = await create(queue, clock, priority="high")
    found = await claims.claim_pending(queue, TQ, WORKER, 32)
    assert [c["status"]["taskId"] for c in found] == [high, old]


async def test_claimed_tasks_leave_the_pending_index(queue: Queue, clock: FakeClock) -> None:
    await create(queue, clock)
    await claim_one(queue)
    assert await claims.claim_pending(queue, TQ, ("wg", "w2"), 5) == []


async def test_report_repeats_are_idempotent_and_conflicts_409(
    queue: Queue, clock: FakeClock, published: Published
) -> None:
    task_id = await create(queue, clock)
    await claim_one(queue)
    await claims.report(queue, task_id, 0, "failed", "failed")
    await published.collect()
    await claims.report(queue, task_id, 0, "failed", "failed")
    assert await published.exchanges() == ["task-failed"]
    with pytest.raises(RequestConflict, match="already resolved failed"):
        await claims.report(queue, task_id, 0, "completed", "completed")
    with pytest.raises(RequestConflict):
        await claims.reclaim_task(queue, task_id, 0)


async def test_report_on_pending_run_conflicts(queue: Queue, clock: FakeClock) -> None:
    task_id = await create(queue, clock)
    with pytest.raises(RequestConflict, match="pending"):
        await claims.report(queue, task_id, 0, "completed", "completed")


@pytest.mark.parametrize(
    ("reason", "created"), [("worker-shutdown", "retry"), ("intermittent-task", "task-retry")]
)
async def test_retrying_exceptions(
    queue: Queue, clock: FakeClock, published: Published, reason: str, created: str
) -> None:
    task_id = await create(queue, clock)
    await claim_one(queue)
    await published.collect()
    status = (await claims.report(queue, task_id, 0, "exception", reason))["status"]
    assert [r["state"] for r in status["runs"]] == ["exception", "pending"]
    assert status["runs"][1]["reasonCreated"] == created and status["retriesLeft"] == 4
    assert await published.exchanges() == ["task-exception", "task-pending"]
    again = (await claims.report(queue, task_id, 0, "exception", reason))["status"]
    assert len(again["runs"]) == 2
    with pytest.raises(RequestConflict):
        await claims.report(queue, task_id, 0, "exception", "malformed-payload")
    assert (await claim_one(queue))["runId"] == 1


async def test_no_retry_without_retries_left(queue: Queue, clock: FakeClock) -> None:
    task_id = await create(queue, clock, retries=0)
    await claim_one(queue)
    status = (await claims.report(queue, task_id, 0, "exception", "worker-shutdown"))["status"]
    assert status["state"] == "exception" and len(status["runs"]) == 1


async def test_claim_expiry_retries_then_resolves(
    queue: Queue, clock: FakeClock, published: Published
) -> None:
    task_id = await create(queue, clock, retries=1)
    await claim_one(queue)
    clock.advance(queue.config.claim_timeout + 1)
    assert await resolvers.resolve_expired_claims(queue) == 1
    status = (await tasks.status(queue, task_id))["status"]
    assert [(r["state"], r.get("reasonResolved")) for r in status["runs"]] == [
        ("exception", "claim-expired"),
        ("pending", None),
    ]
    assert status["retriesLeft"] == 0
    await claim_one(queue)
    clock.advance(queue.config.claim_timeout + 1)
    await resolvers.resolve_expired_claims(queue)
    assert (await tasks.status(queue, task_id))["status"]["state"] == "exception"


async def test_reclaim_extends_the_claim(queue: Queue, clock: FakeClock) -> None:
    task_id = await create(queue, clock)
    claim = await claim_one(queue)
    clock.advance(30)
    again = await claims.reclaim_task(queue, task_id, 0)
    assert again["takenUntil"] > claim["takenUntil"]
    clock.advance(40)  # past the first takenUntil, not the second
    assert await resolvers.resolve_expired_claims(queue) == 0


async def test_cancel_pending_unscheduled_and_running(
    queue: Queue, clock: FakeClock, published: Published
) -> None:
    pending = await create(queue, clock)
    status = (await tasks.cancel_task(queue, pending, guard=ALLOW_ALL))["status"]
    assert status["runs"][0]["reasonCreated"] == "scheduled"
    assert status["runs"][0]["reasonResolved"] == "canceled"
    await published.collect()
    assert (await tasks.cancel_task(queue, pending, guard=ALLOW_ALL))["status"] == status
    assert await published.exchanges() == ["task-exception"]

    blocked = new_id()
    await tasks.create_task(queue, blocked, definition(clock.now, dependencies=[blocked]), guard=ALLOW_ALL)
    run = (await tasks.cancel_task(queue, blocked, guard=ALLOW_ALL))["status"]["runs"]
    assert run == [
        {**run[0], "reasonCreated": "exception", "reasonResolved": "canceled", "state": "exception"}
    ]

    running = await create(queue, clock)
    await claim_one(queue)
    await tasks.cancel_task(queue, running, guard=ALLOW_ALL)
    with pytest.raises(RequestConflict):
        await claims.reclaim_task(queue, running, 0)


async def test_concurrent_cancels_make_one_run(queue: Queue, clock: FakeClock) -> None:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now, dependencies=[task_id]), guard=ALLOW_ALL)
    await asyncio.gather(*(tasks.cancel_task(queue, task_id, guard=ALLOW_ALL) for _ in range(10)))
    assert len((await tasks.status(queue, task_id))["status"]["runs"]) == 1


async def test_rerun(queue: Queue, clock: FakeClock) -> None:
    task_id = await create(queue, clock)
    before = await tasks.rerun_task(queue, task_id, guard=ALLOW_ALL)
    assert len(before["status"]["runs"]) == 1  # pending: unchanged
    await claim_one(queue)
    await claims.report(queue, task_id, 0, "completed", "completed")
    status = (await tasks.rerun_task(queue, task_id, guard=ALLOW_ALL))["status"]
    assert status["runs"][1]["reasonCreated"] == "rerun" and status["state"] == "pending"
    again = (await tasks.rerun_task(queue, task_id, guard=ALLOW_ALL))["status"]
    assert len(again["runs"]) == 2


async def test_deadline_resolves_open_tasks(queue: Queue, clock: FakeClock, published: Published) -> None:
    pending = await create(queue, clock)
    blocked = new_id()
    await tasks.create_task(queue, blocked, definition(clock.now, dependencies=[blocked]), guard=ALLOW_ALL)
    done = await create(queue, clock)
    claim = await claims.claim_pending(queue, TQ, WORKER, 5)
    assert {c["status"]["taskId"] for c in claim} == {pending, done}
    await claims.report(queue, done, 0, "completed", "completed")
    clock.advance(3601)
    assert await resolvers.resolve_deadlines(queue) == 2
    pending_runs = (await tasks.status(queue, pending))["status"]["runs"]
    assert pending_runs[-1]["reasonResolved"] == "deadline-exceeded"
    blocked_runs = (await tasks.status(queue, blocked))["status"]["runs"]
    assert blocked_runs[0]["reasonCreated"] == "exception"
    assert (await tasks.status(queue, done))["status"]["state"] == "completed"
    for action in (tasks.cancel_task, tasks.rerun_task, tasks.schedule_task):
        with pytest.raises(RequestConflict, match="deadline"):
            await action(queue, pending, guard=ALLOW_ALL)


async def test_dependencies_all_completed_and_all_resolved(queue: Queue, clock: FakeClock) -> None:
    group = new_id()
    parent_ok = await create(queue, clock, taskGroupId=group)
    parent_bad = await create(queue, clock, taskGroupId=group)
    x = await create(queue, clock, taskGroupId=group, dependencies=[parent_ok])
    y = await create(queue, clock, taskGroupId=group, dependencies=[parent_bad], requires="all-resolved")
    z = await create(queue, clock, taskGroupId=group, dependencies=[parent_bad])
    assert (await tasks.status(queue, x))["status"]["state"] == "unscheduled"
    assert {c["status"]["taskId"] for c in await claims.claim_pending(queue, TQ, WORKER, 5)} == {
        parent_ok,
        parent_bad,
    }
    await claims.report(queue, parent_ok, 0, "completed", "completed")
    await claims.report(queue, parent_bad, 0, "failed", "failed")
    await resolvers.resolve_dependencies(queue)
    states = {t: (await tasks.status(queue, t))["status"]["state"] for t in (x, y, z)}
    assert states == {x: "pending", y: "pending", z: "unscheduled"}


async def test_schedule_task_ignores_dependencies(queue: Queue, clock: FakeClock) -> None:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now, dependencies=[task_id]), guard=ALLOW_ALL)
    status = (await tasks.schedule_task(queue, task_id, guard=ALLOW_ALL))["status"]
    assert status["state"] == "pending"


async def test_claim_work_wakes_on_new_task(queue: Queue, clock: FakeClock) -> None:
    waiting = asyncio.create_task(claims.claim_work(queue, TQ, WORKER, 1))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    task_id = await create(queue, clock)
    found = await asyncio.wait_for(waiting, 5)
    assert [c["status"]["taskId"] for c in found] == [task_id]


async def test_claim_work_times_out_empty(queue: Queue) -> None:
    assert await claims.claim_work(queue, TQ, WORKER, 1) == []


async def test_a_busy_worker_s_reclaims_keep_it_active(queue: Queue, clock: FakeClock) -> None:
    """A worker at full capacity calls no claimWork: its reclaims record it active (at most once
    a minute), so `worker list` does not show it idle for as long as its tasks run."""
    task_id = await create(queue, clock)
    await claim_one(queue)
    claimed_at = clock.now
    clock.advance(30)
    await claims.reclaim_task(queue, task_id, 0)  # within the minute of the claim: no write
    assert (await workers.get_worker(queue, TQ, WORKER))["lastDateActive"] == dates.to_iso(claimed_at)
    clock.advance(150)
    await claims.reclaim_task(queue, task_id, 0)
    assert (await workers.get_worker(queue, TQ, WORKER))["lastDateActive"] == dates.to_iso(clock.now)
