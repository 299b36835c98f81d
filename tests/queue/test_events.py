"""The events each change publishes: exchanges, routing keys, CCs and bodies (docs/protocol.md, Events)."""

from __future__ import annotations

import pytest

from taskyard.model.errors import RequestConflict
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, groups, resolvers, tasks
from taskyard.queue.service import Queue
from tests.conftest import FakeClock, Published
from tests.queue.helpers import definition, new_id

TQ = "test-prov/test-worker"


async def test_lifecycle_events_have_taskclusters_keys_and_bodies(
    queue: Queue, clock: FakeClock, published: Published
) -> None:
    task_id = new_id()
    body = definition(clock.now, routes=["index.a.b", "notify.x"], tags={"kind": "test"})
    await tasks.create_task(queue, task_id, body, guard=ALLOW_ALL)
    await claims.claim_pending(queue, TQ, ("wg", "w1"), 1)
    await claims.report(queue, task_id, 0, "completed", "completed")
    await resolvers.resolve_dependencies(queue)
    messages = await published.collect()
    assert [m.exchange for m in messages] == [
        "task-defined",
        "task-pending",
        "task-running",
        "task-completed",
        "task-group-resolved",
    ]
    defined, pending, running, completed, group = messages
    prefix = f"primary.{task_id}"
    assert defined.routing_key == f"{prefix}._._._.test-prov.test-worker.-.{task_id}._"
    assert pending.routing_key == f"{prefix}.0._._.test-prov.test-worker.-.{task_id}._"
    assert running.routing_key == f"{prefix}.0.wg.w1.test-prov.test-worker.-.{task_id}._"
    assert completed.routing_key == running.routing_key
    assert group.routing_key == f"primary.{task_id}.-._"
    for message in (defined, pending, running, completed):
        assert message.cc == ["route.index.a.b", "route.notify.x"]
        assert message.body["task"] == {"tags": {"kind": "test"}}
        assert message.body["version"] == 1
    assert group.cc == []
    assert set(defined.body) == {"status", "task", "version"}
    assert defined.body["status"]["state"] == "unscheduled" and defined.body["status"]["runs"] == []
    assert set(pending.body) == {"status", "task", "runId", "version"}
    assert set(running.body) == {
        "status",
        "runId",
        "workerGroup",
        "workerId",
        "takenUntil",
        "task",
        "version",
    }
    assert set(completed.body) == {"status", "runId", "workerGroup", "workerId", "task", "version"}
    assert completed.body["status"]["state"] == "completed"
    assert set(group.body) == {"taskGroupId", "schedulerId", "expires", "version"}


async def test_deadline_exception_has_no_worker_in_key_or_body(
    queue: Queue, clock: FakeClock, published: Published
) -> None:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now), guard=ALLOW_ALL)
    await published.collect()
    clock.advance(3601)
    await resolvers.resolve_deadlines(queue)
    (exception,) = [m for m in await published.collect() if m.exchange == "task-exception"]
    assert exception.routing_key.startswith(f"primary.{task_id}.0._._.")
    assert "workerGroup" not in exception.body and exception.body["runId"] == 0


async def test_group_events(queue: Queue, clock: FakeClock, published: Published) -> None:
    group = new_id()
    await tasks.create_task(queue, new_id(), definition(clock.now, taskGroupId=group), guard=ALLOW_ALL)
    await published.collect()
    await groups.seal_task_group(queue, group, guard=ALLOW_ALL)
    await groups.change_task_group_priority(queue, group, "high", guard=ALLOW_ALL)
    messages = await published.collect()
    by_exchange = {m.exchange: m for m in messages}
    sealed = by_exchange["task-group-sealed"]
    assert sealed.routing_key == f"primary.{group}.-._"
    assert set(sealed.body) == {"taskGroupId", "schedulerId", "expires", "sealed", "version"}
    priority = by_exchange["task-group-priority-changed"]
    assert set(priority.body) == {"taskGroupId", "schedulerId", "newPriority", "tasksAffected", "version"}
    assert priority.body["tasksAffected"] == 1
    changed = by_exchange["task-priority-changed"]
    assert set(changed.body) == {"status", "oldPriority", "newPriority", "version"}
    assert changed.routing_key.split(".")[2:5] == ["_", "_", "_"]


async def test_no_event_for_a_change_that_rolled_back(
    queue: Queue, clock: FakeClock, published: Published
) -> None:
    group = new_id()
    await tasks.create_task(queue, new_id(), definition(clock.now, taskGroupId=group), guard=ALLOW_ALL)
    await groups.seal_task_group(queue, group, guard=ALLOW_ALL)
    await published.collect()
    refused = new_id()
    with pytest.raises(RequestConflict):
        await tasks.create_task(queue, refused, definition(clock.now, taskGroupId=group), guard=ALLOW_ALL)
    assert await published.collect() == []
