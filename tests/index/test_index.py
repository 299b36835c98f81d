"""The index service on SQLite and PostgreSQL, with a fake clock: the indexer's cursor over the
event log, extra.index, namespaces and their expiry, and the expiry sweep's batches."""

from __future__ import annotations

from typing import Any

import pytest

from taskyard.events import log as event_log
from taskyard.index import entries, indexing
from taskyard.index.service import Index
from taskyard.model import dates, paging
from taskyard.model.errors import ResourceNotFound
from taskyard.model.guard import ALLOW_ALL
from taskyard.model.index_paths import DAY_MS, Entry
from taskyard.queue import claims, tasks
from taskyard.queue.service import Queue
from tests.conftest import FakeClock, Published, until
from tests.queue.helpers import definition, new_id

TQ = "test-prov/test-worker"
WORKER = ("wg", "w1")


@pytest.fixture
def index(queue: Queue) -> Index:
    return Index(queue)


async def run_task(queue: Queue, clock: FakeClock, outcome: str = "completed", **overrides: Any) -> str:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now, **overrides), guard=ALLOW_ALL)
    (claimed,) = await claims.claim_pending(queue, TQ, WORKER, 1)
    assert claimed["status"]["taskId"] == task_id
    await claims.report(queue, task_id, 0, outcome, outcome)
    return task_id


async def cursor(index: Index) -> int:
    async with index.storage.reader() as session:
        return int(await session.fetchval("index_cursor"))


async def found(index: Index, path: str) -> str | None:
    try:
        return (await entries.find_task(index, path))["taskId"]
    except ResourceNotFound:
        return None


async def test_completed_tasks_are_indexed_once_their_event_is_logged(
    index: Index, queue: Queue, clock: FakeClock, published: Published
) -> None:
    extra = {"index": {"rank": 3, "data": {"d": 1}, "expires": dates.to_iso(clock.now + 2 * DAY_MS)}}
    done = await run_task(
        queue, clock, routes=["index.proj.v1.latest", "index.bad..path", "x.y"], extra=extra
    )
    failed = await run_task(queue, clock, "failed", routes=["index.proj.v1.failed"])
    assert await indexing.index_completed(index) == 0 and await found(index, "proj.v1.latest") is None
    await published.collect()  # the relay logs the events
    await indexing.index_completed(index)
    entry = await entries.find_task(index, "proj.v1.latest")
    assert (entry["taskId"], entry["rank"], entry["data"]) == (done, 3, {"d": 1})
    assert entry["expires"] == dates.to_iso(clock.now + 2 * DAY_MS)
    assert await found(index, "proj.v1.failed") is None and failed
    async with index.storage.reader() as session:
        newest = (await session.fetchrow("event_log_end"))["newest"]
    assert await cursor(index) == newest  # past every event read, indexed or not
    listed = await entries.list_namespaces(index, "", paging.Query())
    assert [n["namespace"] for n in listed["namespaces"]] == ["proj"]
    assert [
        n["namespace"] for n in (await entries.list_namespaces(index, "proj", paging.Query()))["namespaces"]
    ] == ["proj.v1"]


async def heard_through_the_end(queue: Queue, heard: list[str | None]) -> None:
    """Wait until `heard` holds the relay's notification of the log's newest event."""
    async with queue.storage.reader() as session:
        newest = (await session.fetchrow("event_log_end"))["newest"]
    await until(lambda: any(p is not None and p.split()[0] == str(newest) for p in heard))


async def test_the_indexer_is_woken_only_by_a_batch_with_a_task_to_index(
    index: Index, queue: Queue, clock: FakeClock, published: Published
) -> None:
    await index.start()
    heard: list[str | None] = []  # heard after the indexer: each payload it was handed first
    await queue.storage.listen(event_log.CHANNEL, heard.append)
    # Nothing to index: no index route, or one on a task that failed.
    await run_task(queue, clock, routes=["x.y", "notify.email.a@x.test.on-any"])
    await run_task(queue, clock, "failed", routes=["index.p.failed"])
    await published.collect()
    await heard_through_the_end(queue, heard)
    assert not index.published.is_set()
    task_id = await run_task(queue, clock, routes=["index.p.done"])
    await published.collect()
    await heard_through_the_end(queue, heard)
    assert index.published.is_set()
    await indexing.index_completed(index)
    assert await found(index, "p.done") == task_id


async def test_an_unusable_extra_index_indexes_nothing_and_the_defaults_apply(
    index: Index, queue: Queue, clock: FakeClock, published: Published
) -> None:
    await run_task(queue, clock, routes=["index.p.bad"], extra={"index": {"rank": "high"}})
    plain = await run_task(queue, clock, routes=["index.p.plain"])
    await published.collect()
    await indexing.index_completed(index)
    assert await found(index, "p.bad") is None
    entry = await entries.find_task(index, "p.plain")
    assert (entry["taskId"], entry["rank"], entry["data"]) == (plain, 0, {})
    status = await tasks.status(queue, plain)
    assert entry["expires"] == status["status"]["expires"]  # the task's own expiry


async def test_namespaces_expire_a_day_after_their_last_entry_and_never_sooner(
    index: Index, clock: FakeClock
) -> None:
    task_id = new_id()
    await entries.insert_task(index, "a.b.late", Entry(task_id, 0, {}, clock.now + 10 * DAY_MS))
    await entries.insert_task(index, "a.b.early", Entry(task_id, 0, {}, clock.now + DAY_MS))
    (a,) = (await entries.list_namespaces(index, "", paging.Query()))["namespaces"]
    expected = (clock.now + 10 * DAY_MS) // DAY_MS * DAY_MS + DAY_MS
    assert a["expires"] == dates.to_iso(expected)


async def test_the_sweep_deletes_expired_entries_and_namespaces_in_batches(
    index: Index, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(entries, "SWEEP_BATCH", 2)
    for i in range(3):
        await entries.insert_task(index, f"gone.e{i}", Entry(new_id(), 0, {}, clock.now + 1000))
    await entries.insert_task(index, "kept.e", Entry(new_id(), 0, {}, clock.now + 30 * DAY_MS))
    assert await entries.sweep_expired(index) == 0
    clock.advance(2 * DAY_MS / 1000)
    assert await entries.sweep_expired(index) == 3  # two entries, and the namespace `gone`
    assert await entries.sweep_expired(index) == 1
    assert await entries.sweep_expired(index) == 0
    async with index.storage.reader() as session:
        left = await session.fetch("list_indexed_tasks", "kept", "", 0, 10)
        spaces = await session.fetch("list_index_namespaces", "", "", 0, 10)
    assert [r["name"] for r in left] == ["e"] and [r["name"] for r in spaces] == ["kept"]


async def test_a_lower_rank_keeps_the_entry_and_an_equal_one_replaces_it(
    index: Index, clock: FakeClock
) -> None:
    first, second, third = new_id(), new_id(), new_id()
    until = clock.now + DAY_MS
    await entries.insert_task(index, "r.x", Entry(first, 5, {}, until))
    assert (await entries.insert_task(index, "r.x", Entry(second, 4, {"no": 1}, until)))["taskId"] == first
    assert (await entries.insert_task(index, "r.x", Entry(third, 5, {}, until)))["taskId"] == third
    assert await found(index, "r.x") == third


async def test_find_tasks_at_index_pages_through_many_unknown_paths(
    index: Index, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(entries, "LOOKUPS", 10)
    task_id = new_id()
    await entries.insert_task(index, "many.p25", Entry(task_id, 0, {}, clock.now + DAY_MS))
    paths = [f"many.p{i}" for i in range(30)]
    pages, token, seen = 0, None, []
    while True:
        answer = await entries.find_tasks_at_index(index, paths, paging.Query(1000, token))
        pages += 1
        seen += [t["namespace"] for t in answer["tasks"]]
        token = answer.get("continuationToken")
        if token is None:
            break
    assert (pages, seen) == (3, ["many.p25"])


async def test_in_one_batch_the_later_of_equal_ranks_wins_and_a_lower_one_never_does(
    index: Index, queue: Queue, clock: FakeClock, published: Published
) -> None:
    first = await run_task(
        queue, clock, routes=["index.b.same", "index.b.high"], extra={"index": {"rank": 5}}
    )
    second = await run_task(
        queue, clock, routes=["index.b.same", "index.b.high"], extra={"index": {"rank": 1}}
    )
    third = await run_task(queue, clock, routes=["index.b.same"], extra={"index": {"rank": 5}})
    await published.collect()
    await indexing.index_completed(index)
    assert await found(index, "b.same") == third and await found(index, "b.high") == first
    assert second
