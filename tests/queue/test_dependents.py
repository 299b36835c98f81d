"""A task with many dependents: the resolver schedules them a chunk per transaction, set-based.

Every dependent it unblocks becomes pending once, with one task-pending event as a transition of
its own would write; a dependent that changed meanwhile is left alone; a run cut short between
chunks is finished by the next without repeating anything; and the statements grow with the
chunks, not with the dependents. listDependentTasks pages them by taskId.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from taskyard.model import dates, paging, runs
from taskyard.model.errors import InputError
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import consistency, inspect, resolvers, service, tasks
from taskyard.queue.service import Queue
from taskyard.storage.counting import counting
from taskyard.storage.port import TransactionRolledBack
from tests.conftest import FakeClock, Published
from tests.queue.helpers import (
    TQ,
    complete,
    create,
    definition,
    insert_broken,
    new_id,
    state,
    waiting_resolutions,
)


async def create_dependents(
    queue: Queue, clock: FakeClock, parent: str, n: int, **overrides: Any
) -> list[str]:
    """`n` tasks that depend on `parent`, created in one transaction, in taskId order."""
    ids = sorted(new_id() for _ in range(n))
    items = [
        (task_id, tasks.define(queue, task_id, definition(clock.now, dependencies=[parent], **overrides)))
        for task_id in ids
    ]
    async with queue.storage.transaction() as tx:
        await tasks.create_tasks_tx(queue, tx, items)
    return ids


async def records(queue: Queue, task_ids: list[str]) -> dict[str, runs.TaskRecord]:
    async with queue.storage.reader() as session:
        rows = await session.fetch("get_tasks", task_ids)
    return {row["task_id"]: service.record_from_row(row) for row in rows}


async def pending_events(published: Published) -> list[Any]:
    return [m for m in await published.collect() if m.exchange == "task-pending"]


async def count_pending(queue: Queue) -> int:
    async with queue.storage.reader() as session:
        return int(await session.fetchval("count_pending", TQ))


async def test_many_dependents_become_pending_each_with_one_event(
    queue: Queue, clock: FakeClock, published: Published
) -> None:
    parent = await create(queue, clock)
    dependents = await create_dependents(queue, clock, parent, 1500)  # three chunks of 500
    await complete(queue, [parent])
    await published.collect()

    assert await resolvers.resolve_dependencies(queue) == 1
    assert await waiting_resolutions(queue) == []
    assert await count_pending(queue) == 1500
    found = await records(queue, dependents)
    assert {r.state for r in found.values()} == {"pending"}
    events = await pending_events(published)
    assert Counter(m.body["status"]["taskId"] for m in events) == Counter(dependents)
    # Each event is the one a transition of that task alone publishes.
    for message in events:
        expected = runs.pending_message(found[message.body["status"]["taskId"]])
        assert (message.routing_key, message.body, message.cc) == (
            expected.routing_key,
            expected.body,
            expected.cc,
        )
    assert await consistency.problems(queue.storage, now=clock.now) == []
    async with queue.storage.reader() as session:  # one poll message per run, as enqueue_tx writes
        rows = await session.fetch("pending_runs_after", "", 2000)
    assert sorted(r["task_id"] for r in rows) == sorted(dependents)


async def test_a_dependent_that_changed_meanwhile_is_left_alone(
    queue: Queue, clock: FakeClock, published: Published, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolvers, "DEPENDENTS_PER_TRANSACTION", 2)
    parent = await create(queue, clock)
    dependents = await create_dependents(queue, clock, parent, 5)
    soon = dates.to_iso(clock.now + 10 * 60 * 1000)
    overdue = await create_dependents(queue, clock, parent, 5, deadline=soon)
    cancelled, scheduled = dependents[1], dependents[3]
    await complete(queue, [parent])
    await tasks.cancel_task(queue, cancelled, guard=ALLOW_ALL)  # before the resolver gets to them
    await tasks.schedule_task(queue, scheduled, guard=ALLOW_ALL)
    await published.collect()
    clock.advance(20 * 60)  # past the deadline of `overdue`, before the resolver runs

    assert await resolvers.resolve_dependencies(queue) == 2  # the parent's, and the cancel's
    assert await waiting_resolutions(queue) == []
    states = {task_id: await state(queue, task_id) for task_id in dependents + overdue}
    assert states[cancelled] == "exception"
    assert [states[d] for d in overdue] == ["unscheduled"] * 5
    assert [states[d] for d in dependents if d != cancelled] == ["pending"] * 4
    announced = [m.body["status"]["taskId"] for m in await pending_events(published)]
    assert sorted(announced) == sorted(d for d in dependents if d not in (cancelled, scheduled))
    found = await records(queue, [scheduled])
    assert len(found[scheduled].runs) == 1  # scheduleTask's run, not a second one


class Crash(BaseException):
    """The process dies: nothing catches it, nothing after it runs."""


async def ten_dependents_in_chunks_of_three(
    queue: Queue, clock: FakeClock, published: Published, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, list[str]]:
    """A task just completed and its ten dependents, to be scheduled three at a time."""
    monkeypatch.setattr(resolvers, "DEPENDENTS_PER_TRANSACTION", 3)
    parent = await create(queue, clock)
    dependents = await create_dependents(queue, clock, parent, 10)
    await complete(queue, [parent])
    await published.collect()
    return parent, dependents


async def assert_all_pending_once(queue: Queue, published: Published, dependents: list[str]) -> None:
    """Every dependent pending, announced once, with one claim-index row; no resolution left."""
    assert [await state(queue, d) for d in dependents] == ["pending"] * len(dependents)
    assert await waiting_resolutions(queue) == []
    announced = Counter(m.body["status"]["taskId"] for m in await pending_events(published))
    assert announced == Counter(dependents)
    assert await count_pending(queue) == len(dependents)


async def test_a_run_cut_short_between_chunks_is_finished_without_repeats(
    queue: Queue, clock: FakeClock, published: Published, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent, dependents = await ten_dependents_in_chunks_of_three(queue, clock, published, monkeypatch)
    chunks = 0
    real = service.transition_many_tx

    async def crash_on_the_second_chunk(*args: Any) -> list[runs.Change]:
        nonlocal chunks
        chunks += 1
        if chunks == 2:
            raise Crash
        return await real(*args)

    monkeypatch.setattr(service, "transition_many_tx", crash_on_the_second_chunk)
    with pytest.raises(Crash):
        await resolvers.resolve_dependencies(queue)
    # The first chunk committed; the resolution waits for the rest.
    assert [await state(queue, d) for d in dependents] == ["pending"] * 3 + ["unscheduled"] * 7
    assert await waiting_resolutions(queue) == [parent]

    monkeypatch.setattr(service, "transition_many_tx", real)  # the next process
    assert await resolvers.resolve_dependencies(queue) == 1
    await assert_all_pending_once(queue, published, dependents)


async def test_a_chunk_rolled_back_and_run_again_is_scheduled(
    queue: Queue, clock: FakeClock, published: Published, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk's transaction that committed nothing (a deadlock, a lost connection) runs again with
    the same dependents, and the chunks after it follow on; none is skipped."""
    monkeypatch.setattr(resolvers, "READY_PER_READ", 4)  # read again within the run, between chunks
    _, dependents = await ten_dependents_in_chunks_of_three(queue, clock, published, monkeypatch)
    chunks = 0
    real = service.transition_many_tx

    async def roll_back_the_second_chunk(*args: Any) -> list[runs.Change]:
        nonlocal chunks
        chunks += 1
        changes = await real(*args)
        if chunks == 2:
            raise TransactionRolledBack("deadlock detected")
        return changes

    monkeypatch.setattr(service, "transition_many_tx", roll_back_the_second_chunk)
    assert await resolvers.resolve_dependencies(queue) == 1
    await assert_all_pending_once(queue, published, dependents)


async def test_a_failing_chunk_falls_back_to_one_at_a_time(
    queue: Queue, clock: FakeClock, published: Published, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolvers, "DEPENDENTS_PER_TRANSACTION", 4)
    parent = await create(queue, clock)
    dependents = await create_dependents(queue, clock, parent, 10)
    broken = await insert_broken(queue, clock, requires=[parent])  # no transition can handle it
    await complete(queue, [parent])
    await published.collect()

    assert await resolvers.resolve_dependencies(queue) == 0  # set aside, the others done
    assert [await state(queue, d) for d in dependents] == ["pending"] * 10
    assert (await records(queue, [broken]))[broken].state == "unscheduled"
    assert await waiting_resolutions(queue) == [parent]
    announced = Counter(m.body["status"]["taskId"] for m in await pending_events(published))
    assert announced == Counter(dependents)


async def dependents_statements(queue: Queue, clock: FakeClock, n: int) -> int:
    parent = await create(queue, clock)
    await create_dependents(queue, clock, parent, n, taskQueueId="test-prov/dependents")
    await complete(queue, [parent])
    with counting() as tally:
        assert await resolvers.resolve_dependencies(queue) == 1
    return tally.statements


async def test_statements_grow_with_the_chunks_not_the_dependents(
    queue: Queue, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolvers, "DEPENDENTS_PER_TRANSACTION", 40)
    one, two, three = [await dependents_statements(queue, clock, n) for n in (40, 80, 120)]
    per_chunk = two - one
    assert three - two == per_chunk
    # BEGIN, the resolutions, their rows, 4 writes, COMMIT (with a notification): the dependents
    # themselves are read once for many chunks
    assert per_chunk <= 9, (one, two, three)
    # and satisfying the edges, announcing, deleting, and on PostgreSQL the plan setting
    # (`plan_generically`, riding with the first statement)
    assert one <= 15, (one, two, three)


async def test_list_dependents_pages_by_task_id(queue: Queue, clock: FakeClock) -> None:
    parent = await create(queue, clock)
    dependents = await create_dependents(queue, clock, parent, 7)
    seen: list[str] = []
    query = paging.Query(limit=3)
    while True:
        page = await inspect.list_dependents(queue, parent, query)
        seen += [t["status"]["taskId"] for t in page["tasks"]]
        if "continuationToken" not in page:
            break
        query = paging.Query(limit=3, token=page["continuationToken"])
    assert seen == dependents
    old = paging.encode({"o": 3})  # a token from when this list paged by offset
    with pytest.raises(InputError, match="offset"):
        await inspect.list_dependents(queue, parent, paging.Query(limit=3, token=old))
