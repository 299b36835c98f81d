"""One bad row never stops a resolver: it is set aside, logged and counted, and the rest goes on.

A "broken" task here is a row whose stored definition lacks the keys every event needs, written
straight through storage: any transition of it fails, as one on a row the code can't read would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import pytest

from taskyard.queue import claims, resolvers, tasks
from taskyard.queue.service import Queue
from tests.conftest import FakeClock, Published, until
from tests.queue.helpers import TQ, WORKER, complete, create, insert_broken, state, waiting_resolutions

SET_ASIDE = "resolver_rows_set_aside_total"


def set_aside(queue: Queue, resolver: str) -> int:
    return queue.metrics.value(SET_ASIDE, resolver=resolver)


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


async def test_a_woken_dependency_resolver_does_not_run_a_round_that_finds_nothing(
    queue: Queue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round that took fewer resolutions than a batch took all there were; a resolution committed
    since sets the wake-up. So the resolver waits rather than run one more transaction for none."""
    rounds: list[int | None] = []
    resolve = resolvers.resolve_dependencies

    async def counted(q: Queue) -> int:
        rounds.append(None)
        rounds[-1] = await resolve(q)
        return rounds[-1]

    monkeypatch.setattr(resolvers, "resolve_dependencies", counted)
    queue.config = dataclasses.replace(queue.config, resolver_interval=3600)  # no round by the timer
    running = resolvers.start_all(queue)
    try:
        await until(lambda: rounds == [0])  # the round it starts with, then it waits
        parent = await create(queue, clock)
        dependent = await create(queue, clock, dependencies=[parent])
        await complete(queue, [parent])  # its resolution's commit wakes the resolver
        await until(lambda: 1 in rounds)
        for _ in range(10):  # time for a round that would follow at once
            await asyncio.sleep(0)
        assert rounds == [0, 1]
        assert await state(queue, dependent) == "pending"
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
