"""The storage port's contract, on every backend: transactions, errors, notifications, migrations."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from taskyard.storage import open_storage
from taskyard.storage.port import Storage, UniqueViolation
from tests.storage.helpers import _pending, take


async def test_rollback_leaves_nothing(storage: Storage) -> None:
    with pytest.raises(RuntimeError):
        async with storage.transaction() as tx:
            await tx.execute("insert_pending", "a", 0, "p/w", 1, 1, 10**13)
            raise RuntimeError("boom")
    async with storage.reader() as session:
        assert await session.fetchval("count_pending", "p/w") == 0


async def test_unique_violation_is_translated(storage: Storage) -> None:
    async with storage.transaction() as tx:
        await tx.execute("insert_group", "g", "-", 1)
    with pytest.raises(UniqueViolation):
        async with storage.transaction() as tx:
            await tx.execute("insert_group", "g", "-", 1)


async def test_take_pending_orders_by_priority_then_age(storage: Storage) -> None:
    await _pending(storage, "old-low", 1, 1)
    await _pending(storage, "new-high", 5, 3)
    await _pending(storage, "mid-high", 5, 2)
    await _pending(storage, "other-queue", 7, 1, tq="p/other")
    async with storage.transaction() as tx:
        rows = await take(tx, 2, 0)
    # The first two in the claim index's order are taken (SQLite answers them in no set order).
    assert sorted(r["task_id"] for r in rows) == ["mid-high", "new-high"]
    assert [r["pending_run_id"] for r in rows] == [0, 0]
    async with storage.transaction() as tx:  # taken: gone from the claim index
        assert [r["task_id"] for r in await take(tx, 5, 0)] == ["old-low"]


async def test_take_pending_skips_runs_past_deadline(storage: Storage) -> None:
    await _pending(storage, "late", 1, 1)
    async with storage.transaction() as tx:
        assert await take(tx, 5, 10**13 + 1) == []


@pytest.mark.postgres
async def test_take_pending_skips_tasks_another_transaction_holds(db_url: str) -> None:
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite has one writer at a time; there is nothing to skip")
    storage = await open_storage(db_url)
    try:
        await _pending(storage, "busy", 5, 1)
        await _pending(storage, "free", 1, 2)
        holding, release = asyncio.Event(), asyncio.Event()

        async def hold() -> None:  # like a cancelTask: the task row first, then its pending row
            async with storage.transaction() as tx:
                await tx.fetchrow("get_task_for_update", "busy")
                holding.set()
                await release.wait()

        holder = asyncio.create_task(hold())
        await holding.wait()
        async with storage.transaction() as tx:
            rows = await asyncio.wait_for(take(tx, 5, 0), 5)
        assert [r["task_id"] for r in rows] == ["free"]
        release.set()
        await holder
    finally:
        await storage.close()


async def test_notifications_arrive_after_commit_only(storage: Storage) -> None:
    heard: list[str] = []
    await storage.listen("task_pending", heard.append)
    with pytest.raises(RuntimeError):
        async with storage.transaction() as tx:
            tx.notify("task_pending", "rolled-back")
            raise RuntimeError
    async with storage.transaction() as tx:
        tx.notify("task_pending", "p/w")
        tx.notify("task_pending", "it's a back\\slash")
        assert heard == []
    assert heard == ["p/w", "it's a back\\slash"]


@pytest.mark.postgres
async def test_notifications_cross_processes(db_url: str) -> None:
    if not db_url.startswith("postgres"):
        pytest.skip("only PostgreSQL shares notifications between processes")
    first, second = await open_storage(db_url), await open_storage(db_url)
    try:
        heard = asyncio.Queue[str]()
        await second.listen("task_pending", heard.put_nowait)
        async with first.transaction() as tx:
            tx.notify("task_pending", "p/w")
            tx.notify("task_pending", "it's a back\\slash")
        assert await asyncio.wait_for(heard.get(), 10) == "p/w"
        assert await asyncio.wait_for(heard.get(), 10) == "it's a back\\slash"
    finally:
        await first.close()
        await second.close()


async def test_migrations_apply_once(db_url: str) -> None:
    again = await open_storage(db_url)  # already migrated by the template: must be a no-op
    await again.close()
    twice = await open_storage(db_url)
    async with twice.reader() as session:
        await session.fetchval("count_pending", "p/w")
    await twice.close()


async def test_cancelled_transactions_never_leave_one_open(storage: Storage) -> None:
    """A caller cancelled at any point (a client hanging up) must not break later transactions."""

    async def write(n: int) -> None:
        async with storage.transaction() as tx:
            await tx.execute("insert_group", f"g{n}", "-", 1)
            await tx.fetchval("group_size", f"g{n}")

    for n in range(60):
        attempt = asyncio.create_task(write(n))
        for _ in range(n % 6):
            await asyncio.sleep(0)
        attempt.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await attempt
    await write(1000)
    async with storage.reader() as session:
        assert await session.fetchrow("get_group", "g1000") is not None


async def test_a_caller_cancelled_inside_its_transaction_rolls_it_back(storage: Storage) -> None:
    """Cancelled while its block awaits something else, with statements already run: they are
    undone, and the next transaction gets the connection (on SQLite: the one writer) at once."""
    inside = asyncio.Event()

    async def write() -> None:
        async with storage.transaction() as tx:
            await tx.execute("insert_group", "cancelled", "-", 1)
            inside.set()
            await asyncio.Event().wait()  # a client hanging up lands here

    attempt = asyncio.create_task(write())
    await inside.wait()
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    async with storage.transaction() as tx:
        await tx.execute("insert_group", "after", "-", 1)
    async with storage.reader() as session:
        assert await session.fetchrow("get_group", "cancelled") is None
        assert await session.fetchrow("get_group", "after") is not None
