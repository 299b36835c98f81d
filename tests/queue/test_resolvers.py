"""One bad row never stops a resolver: it is set aside, logged and counted, and the rest goes on.

A "broken" task here is a row whose stored definition lacks the keys every event needs, written
straight through storage: any transition of it fails, as one on a row the code can't read would.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, resolvers, service, tasks
from taskyard.queue.service import Queue
from tests.conftest import FakeClock, Published
from tests.queue.helpers import definition, new_id

TQ = "test-prov/test-worker"
WORKER = ("wg", "w1")
SET_ASIDE = "resolver_rows_set_aside_total"


async def create(queue: Queue, clock: FakeClock, **overrides: Any) -> str:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now, **overrides), guard=ALLOW_ALL)
    return task_id


async def insert_broken(
    queue: Queue,
    clock: FakeClock,
    *,
    runs: Sequence[dict[str, Any]] = (),
    requires: Sequence[str] = (),
    **cols: Any,
) -> str:
    """A task row no transition can handle, with dependency edges on `requires`."""
    task_id = new_id()
    rec = tasks.new_record(task_id, tasks.define(queue, task_id, definition(clock.now)), 5)
    rec = replace(rec, definition={"broken": True}, runs=list(runs), **cols)
    async with queue.storage.transaction() as tx:
        await service.insert_record_tx(tx, rec)
        edges = [(r, task_id, "all-completed", False, rec.expires) for r in requires]
        if edges:
            await tx.executemany("insert_dependency", edges)
    return task_id


async def state(queue: Queue, task_id: str) -> str:
    return str((await tasks.status(queue, task_id))["status"]["state"])


async def complete(queue: Queue, task_ids: list[str]) -> None:
    found = await claims.claim_pending(queue, TQ, WORKER, len(task_ids))
    assert sorted(c["status"]["taskId"] for c in found) == sorted(task_ids)
    for task_id in task_ids:
        await claims.report(queue, task_id, 0, "completed", "completed")


def set_aside(queue: Queue, resolver: str) -> int:
    return queue.metrics.value(SET_ASIDE, resolver=resolver)


async def waiting_resolutions(queue: Queue) -> list[str]:
    async with queue.storage.reader() as session:
        return [r["task_id"] for r in await session.fetch("waiting_resolutions", 100)]


async def test_a_dependent_that_cannot_be_scheduled_does_not_stop_the_batch(
    queue: Queue, clock: FakeClock, published: Published, caplog: pytest.LogCaptureFixture
) -> None:
    parents = [await create(queue, clock) for _ in range(3)]
    dependents = [await create(queue, clock, dependencies=[p]) for p in parents]
    broken = await insert_broken(queue, clock, requires=[parents[1]])
    await complete(queue, parents)
    await published.collect()

    with caplog.at_level(logging.ERROR):
        assert await resolvers.resolve_dependencies(queue) == 2
    # Every dependent that can be scheduled is, even the broken one's sibling.
    assert [await state(queue, d) for d in dependents] == ["pending"] * 3
    assert set_aside(queue, "dependency-resolver") == 1
    (record,) = [r for r in caplog.records if "set aside" in r.getMessage()]
    assert parents[1] in record.getMessage() and broken in record.getMessage()
    assert "KeyError" in record.getMessage()
    # The other groups were announced; the poisoned resolution stays, to be tried again.
    announced = [m for m in await published.collect() if m.exchange == "task-group-resolved"]
    assert sorted(m.body["taskGroupId"] for m in announced) == sorted([parents[0], parents[2]])
    assert await waiting_resolutions(queue) == [parents[1]]


async def test_a_set_aside_resolution_waits_then_is_tried_again_on_its_own(
    queue: Queue, clock: FakeClock
) -> None:
    parent = await create(queue, clock)
    await insert_broken(queue, clock, requires=[parent])
    await complete(queue, [parent])
    assert await resolvers.resolve_dependencies(queue) == 0
    assert set_aside(queue, "dependency-resolver") == 1
    # Held back: the resolver does not spin on it, and later resolutions go through at once.
    later = await create(queue, clock)
    follower = await create(queue, clock, dependencies=[later])
    await complete(queue, [later])
    assert await resolvers.resolve_dependencies(queue) == 1
    assert await resolvers.resolve_dependencies(queue) == 0
    assert await state(queue, follower) == "pending"
    assert set_aside(queue, "dependency-resolver") == 1
    # Once the hold ends it is tried again; failing again, it is held twice as long.
    clock.advance(61)
    assert await resolvers.resolve_dependencies(queue) == 0
    assert set_aside(queue, "dependency-resolver") == 2
    clock.advance(61)
    assert await resolvers.resolve_dependencies(queue) == 0
    assert set_aside(queue, "dependency-resolver") == 2
    assert await waiting_resolutions(queue) == [parent]


async def test_a_broken_expired_claim_does_not_stop_the_others(queue: Queue, clock: FakeClock) -> None:
    run = {"runId": 0, "state": "running", "reasonCreated": "scheduled", "workerGroup": "wg", "workerId": "x"}
    await insert_broken(queue, clock, runs=[run], taken_until=clock.now + 1000)
    good = await create(queue, clock)
    await claim(queue, good)
    clock.advance(queue.config.claim_timeout + 1)
    assert await resolvers.resolve_expired_claims(queue) == 1
    runs = (await tasks.status(queue, good))["status"]["runs"]
    assert [(r["state"], r.get("reasonResolved")) for r in runs] == [
        ("exception", "claim-expired"),
        ("pending", None),
    ]
    assert set_aside(queue, "claim-resolver") == 1
    assert await resolvers.resolve_expired_claims(queue) == 0
    assert set_aside(queue, "claim-resolver") == 1  # held back, not tried again at once
    clock.advance(61)
    assert await resolvers.resolve_expired_claims(queue) == 0
    assert set_aside(queue, "claim-resolver") == 2


async def claim(queue: Queue, task_id: str) -> None:
    found = await claims.claim_pending(queue, TQ, WORKER, 1)
    assert [c["status"]["taskId"] for c in found] == [task_id]


async def test_a_broken_overdue_task_does_not_stop_the_others(queue: Queue, clock: FakeClock) -> None:
    await insert_broken(queue, clock, deadline=clock.now + 1000)
    good = await create(queue, clock)
    clock.advance(2 * 3600)
    assert await resolvers.resolve_deadlines(queue) == 1
    assert await state(queue, good) == "exception"
    assert set_aside(queue, "deadline-resolver") == 1
    assert await resolvers.resolve_deadlines(queue) == 0
    assert set_aside(queue, "deadline-resolver") == 1


async def test_set_aside_rows_do_not_crowd_out_a_batch(
    queue: Queue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolvers, "BATCH", 2)
    for offset in (1000, 2000, 3000):
        await insert_broken(queue, clock, deadline=clock.now + offset)
    good = await create(queue, clock)
    clock.advance(2 * 3600)
    assert await resolvers.resolve_deadlines(queue) == 0  # the first two, set aside
    assert await resolvers.resolve_deadlines(queue) == 1  # the third set aside, the good one done
    assert await state(queue, good) == "exception"
    assert set_aside(queue, "deadline-resolver") == 3
