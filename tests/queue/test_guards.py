"""Services authorize with the guard they are given, inside their transaction, after the load.

On every storage backend: the guard sees the stored record's fields; an unknown id is a 404 before
the guard is asked; a refusal changes nothing; and the record is read once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from taskyard.model.errors import InsufficientScopes, ResourceNotFound
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import artifacts, claims, groups, tasks, workers
from taskyard.queue.service import Queue
from taskyard.storage.port import Storage
from tests.conftest import FakeClock
from tests.queue.helpers import definition, new_id

TQ = "test-prov/test-worker"
WORKER = ("wg", "w1")
TASK_READS = ("get_task", "get_task_for_update")


class Recorder:
    """A guard that remembers what it was asked, and refuses when told to."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.seen: list[dict[str, object]] = []
        self.refuse = refuse

    def __call__(self, **values: object) -> None:
        self.seen.append(values)
        if self.refuse:
            raise InsufficientScopes("refused")


class _CountingSession:
    def __init__(self, inner: Any, counts: Counter[str]) -> None:
        self._inner, self._counts = inner, counts

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if name not in ("execute", "executemany", "fetch", "fetchrow", "fetchval"):
            return found

        async def counted(query: str, *args: object, **params: object) -> Any:
            self._counts[query] += 1
            return await found(query, *args, **params)

        return counted


Opener = Callable[[], AbstractAsyncContextManager[Any]]


class CountingStorage:
    """The queue's storage, counting the queries run through it and the transactions opened."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.counts: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def transaction(self) -> AbstractAsyncContextManager[Any]:
        return self._transaction(self.inner.transaction)

    def optimistic(self) -> AbstractAsyncContextManager[Any]:
        return self._transaction(self.inner.optimistic)

    @asynccontextmanager
    async def _transaction(self, opener: Opener) -> AsyncIterator[Any]:
        self.counts["<transaction>"] += 1
        async with opener() as tx:
            yield _CountingSession(tx, self.counts)

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[Any]:
        self.counts["<reader>"] += 1
        async with self.inner.reader() as session:
            yield _CountingSession(session, self.counts)


async def counting(queue: Queue, action: Callable[[], Awaitable[Any]]) -> tuple[Any, Counter[str]]:
    counter = CountingStorage(queue.storage)
    queue.storage, original = counter, queue.storage  # type: ignore[assignment]
    try:
        return await action(), counter.counts
    finally:
        queue.storage = original


async def create(queue: Queue, clock: FakeClock, **overrides: object) -> str:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now, **overrides), guard=ALLOW_ALL)
    return task_id


TASK_FIELDS = {
    "schedulerId": "-",
    "projectId": "none",
    "taskQueueId": TQ,
    "provisionerId": "test-prov",
    "workerType": "test-worker",
}


async def test_claim_task_reads_the_task_once_in_one_transaction(queue: Queue, clock: FakeClock) -> None:
    task_id = await create(queue, clock)
    guard = Recorder()
    claim, counts = await counting(queue, lambda: claims.claim_task(queue, task_id, 0, WORKER, guard=guard))
    assert claim["status"]["state"] == "running" and claim["workerId"] == "w1"
    assert sum(counts[q] for q in TASK_READS) == 1
    assert counts["<transaction>"] == 1 and counts["<reader>"] == 0
    assert counts["get_worker"] == 1  # one read serves the quarantine check and the seen record
    (seen,) = guard.seen
    assert seen == {**TASK_FIELDS, "taskGroupId": task_id}
    # The worker was recorded as seen, with the task it claimed, in the same transaction.
    found = await workers.get_worker(queue, TQ, WORKER)
    assert found["recentTasks"] == [{"taskId": task_id, "runId": 0}]


async def test_claim_task_refused_or_unknown_changes_nothing(queue: Queue, clock: FakeClock) -> None:
    unknown = Recorder()
    with pytest.raises(ResourceNotFound):
        await claims.claim_task(queue, new_id(), 0, WORKER, guard=unknown)
    assert unknown.seen == []  # 404 before 403
    task_id = await create(queue, clock)
    with pytest.raises(InsufficientScopes):
        await claims.claim_task(queue, task_id, 0, WORKER, guard=Recorder(refuse=True))
    assert (await tasks.status(queue, task_id))["status"]["state"] == "pending"
    with pytest.raises(ResourceNotFound):
        await workers.get_worker(queue, TQ, WORKER)


async def test_claim_task_answers_nothing_to_a_quarantined_worker(queue: Queue, clock: FakeClock) -> None:
    task_id = await create(queue, clock)
    await workers.declare_worker(
        queue, TQ, WORKER, {"expires": definition(clock.now + 86_400_000)["deadline"]}, guard=ALLOW_ALL
    )
    until = definition(clock.now + 3_600_000)["created"]
    await workers.quarantine_worker(queue, TQ, WORKER, {"quarantineUntil": until}, "tester")
    assert await claims.claim_task(queue, task_id, 0, WORKER, guard=ALLOW_ALL) == {}
    assert (await tasks.status(queue, task_id))["status"]["state"] == "pending"


async def test_claim_work_takes_nothing_for_a_quarantined_worker(queue: Queue, clock: FakeClock) -> None:
    """take_pending refuses the quarantined worker in the statement that would take the run: the
    run stays in the claim index for another worker, who is recorded with the task it took."""
    task_id = await create(queue, clock)
    await workers.declare_worker(
        queue, TQ, WORKER, {"expires": definition(clock.now + 86_400_000)["deadline"]}, guard=ALLOW_ALL
    )
    until = definition(clock.now + 3_600_000)["created"]
    await workers.quarantine_worker(queue, TQ, WORKER, {"quarantineUntil": until}, "tester")
    with pytest.raises(workers.Quarantined):
        await claims.claim_pending(queue, TQ, WORKER, 1)
    assert (await tasks.status(queue, task_id))["status"]["state"] == "pending"
    (claim,) = await claims.claim_pending(queue, TQ, ("wg", "w2"), 1)
    assert claim["status"]["taskId"] == task_id
    second = await create(queue, clock)
    await claims.claim_pending(queue, TQ, ("wg", "w2"), 1)  # its row, read by the take, grows
    other = await workers.get_worker(queue, TQ, ("wg", "w2"))
    assert other["recentTasks"] == [{"taskId": task_id, "runId": 0}, {"taskId": second, "runId": 0}]
    quarantined = await workers.get_worker(queue, TQ, WORKER)
    assert quarantined["recentTasks"] == [] and quarantined["quarantineUntil"] == until


@pytest.mark.parametrize("action", ["schedule", "rerun", "cancel", "priority"])
async def test_task_actions_guard_after_the_load(queue: Queue, clock: FakeClock, action: str) -> None:
    def act(task_id: str, guard: Recorder) -> Awaitable[Any]:
        if action == "schedule":
            return tasks.schedule_task(queue, task_id, guard=guard)
        if action == "rerun":
            return tasks.rerun_task(queue, task_id, guard=guard)
        if action == "cancel":
            return tasks.cancel_task(queue, task_id, guard=guard)
        return tasks.change_task_priority(queue, task_id, "high", guard=guard)

    unknown = Recorder()
    with pytest.raises(ResourceNotFound):
        await act(new_id(), unknown)
    assert unknown.seen == []

    blocked = new_id()  # waits on itself: unscheduled until scheduled, rerun or cancelled
    await tasks.create_task(queue, blocked, definition(clock.now, dependencies=[blocked]), guard=ALLOW_ALL)
    before = await tasks.status(queue, blocked)
    with pytest.raises(InsufficientScopes):
        await act(blocked, Recorder(refuse=True))
    assert await tasks.status(queue, blocked) == before

    guard = Recorder()
    answer, counts = await counting(queue, lambda: act(blocked, guard))
    assert answer["status"]["taskId"] == blocked
    assert sum(counts[q] for q in TASK_READS) == 1 and counts["<transaction>"] == 1
    assert guard.seen == [{**TASK_FIELDS, "taskGroupId": blocked}]


async def test_create_task_guards_the_definition_before_writing(queue: Queue, clock: FakeClock) -> None:
    task_id = new_id()
    body = definition(clock.now, priority="high", routes=["index.x"], scopes=["secrets:get:x"])
    with pytest.raises(InsufficientScopes):
        await tasks.create_task(queue, task_id, body, guard=Recorder(refuse=True))
    with pytest.raises(ResourceNotFound):
        await tasks.status(queue, task_id)
    guard = Recorder()
    await tasks.create_task(queue, task_id, body, guard=guard)
    assert guard.seen == [
        {
            "scopes": ["secrets:get:x"],
            "routes": ["index.x"],
            "projectId": "none",
            "schedulerId": "-",
            "taskQueueId": TQ,
            "priorities": ["highest", "very-high", "high"],
        }
    ]


@pytest.mark.parametrize("action", ["seal", "cancel", "priority"])
async def test_group_actions_guard_after_the_load(queue: Queue, clock: FakeClock, action: str) -> None:
    def act(group_id: str, guard: Recorder) -> Awaitable[Any]:
        if action == "seal":
            return groups.seal_task_group(queue, group_id, guard=guard)
        if action == "cancel":
            return groups.cancel_task_group(queue, group_id, guard=guard)
        return groups.change_task_group_priority(queue, group_id, "high", guard=guard)

    unknown = Recorder()
    with pytest.raises(ResourceNotFound):
        await act(new_id(), unknown)
    assert unknown.seen == []

    group = new_id()
    task_id = await create(queue, clock, taskGroupId=group, schedulerId="sched")
    if action == "cancel":
        await groups.seal_task_group(queue, group, guard=ALLOW_ALL)
    before = (await groups.get_task_group(queue, group), await tasks.status(queue, task_id))
    with pytest.raises(InsufficientScopes):
        await act(group, Recorder(refuse=True))
    assert (await groups.get_task_group(queue, group), await tasks.status(queue, task_id)) == before

    guard = Recorder()
    _, counts = await counting(queue, lambda: act(group, guard))
    assert guard.seen == [{"schedulerId": "sched"}]
    assert counts["get_group"] == (2 if action == "seal" else 1)  # seal reads the sealed group back


async def test_follow_guards_every_name_on_the_link_chain(queue: Queue, clock: FakeClock) -> None:
    task_id = await create(queue, clock)
    await claims.claim_pending(queue, TQ, WORKER, 1)
    expires = definition(clock.now)["deadline"]
    target = {
        "storageType": "reference",
        "url": "https://example.com/x",
        "contentType": "text/plain",
        "expires": expires,
    }
    await artifacts.create_artifact(queue, task_id, 0, "public/target", target)
    link = {"storageType": "link", "artifact": "public/target", "expires": expires}
    await artifacts.create_artifact(queue, task_id, 0, "public/link", link)

    guard = Recorder()
    found = await artifacts.follow(queue, task_id, None, "public/link", guard=guard)
    assert found.name == "public/target"
    assert guard.seen == [{"names": ["public/link"]}, {"names": ["public/link", "public/target"]}]

    unknown = Recorder()
    with pytest.raises(ResourceNotFound):
        await artifacts.follow(queue, new_id(), None, "public/link", guard=unknown)
    assert unknown.seen == [{"names": ["public/link"]}]  # the name asked for is checked before any 404
    with pytest.raises(InsufficientScopes):
        await artifacts.follow(queue, new_id(), 0, "public/link", guard=Recorder(refuse=True))


async def test_declare_worker_guards_the_properties_it_declares(queue: Queue, clock: FakeClock) -> None:
    body = {"expires": definition(clock.now + 86_400_000)["deadline"]}
    with pytest.raises(InsufficientScopes):
        await workers.declare_worker(queue, TQ, WORKER, body, guard=Recorder(refuse=True))
    with pytest.raises(ResourceNotFound):
        await workers.get_worker(queue, TQ, WORKER)
    guard = Recorder()
    await workers.declare_worker(queue, TQ, WORKER, body, guard=guard)
    assert guard.seen == [{"properties": ["expires"]}]
