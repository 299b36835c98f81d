"""The storage port's contract, on every backend: transactions, errors, notifications, migrations."""

from __future__ import annotations

import asyncio

import pytest

from taskyard.storage import open_storage
from taskyard.storage.port import Storage, UniqueViolation


async def _pending(storage: Storage, task_id: str, priority: int, inserted: int, tq: str = "p/w") -> None:
    async with storage.transaction() as tx:
        await tx.execute("insert_pending", task_id, 0, tq, priority, inserted, 10**13)


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


async def test_take_pending_orders_by_priority_then_age_and_removes(storage: Storage) -> None:
    await _pending(storage, "old-low", 1, 1)
    await _pending(storage, "new-high", 5, 3)
    await _pending(storage, "mid-high", 5, 2)
    await _pending(storage, "other-queue", 7, 1, tq="p/other")
    async with storage.transaction() as tx:
        taken = await tx.fetch("take_pending", "p/w", 2, 0)
    order = sorted(taken, key=lambda r: (-r["priority"], r["inserted"]))
    assert [r["task_id"] for r in order] == ["mid-high", "new-high"]
    async with storage.reader() as session:
        assert await session.fetchval("count_pending", "p/w") == 1


async def test_take_pending_skips_rows_past_deadline(storage: Storage) -> None:
    async with storage.transaction() as tx:
        await tx.execute("insert_pending", "late", 0, "p/w", 1, 1, 100)
    async with storage.transaction() as tx:
        assert await tx.fetch("take_pending", "p/w", 5, 200) == []


async def test_notifications_arrive_after_commit_only(storage: Storage) -> None:
    heard: list[str] = []
    await storage.listen("task_pending", heard.append)
    with pytest.raises(RuntimeError):
        async with storage.transaction() as tx:
            tx.notify("task_pending", "rolled-back")
            raise RuntimeError
    async with storage.transaction() as tx:
        tx.notify("task_pending", "p/w")
        assert heard == []
    assert heard == ["p/w"]


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
        assert await asyncio.wait_for(heard.get(), 10) == "p/w"
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


@pytest.mark.postgres
async def test_notifications_resume_after_the_listener_connection_drops(db_url: str) -> None:
    if not db_url.startswith("postgres"):
        pytest.skip("only PostgreSQL has a notification connection to lose")
    import asyncpg

    storage = await open_storage(db_url)
    try:
        heard = asyncio.Queue[str]()
        await storage.listen("task_pending", heard.put_nowait)
        pid = storage._listen_conn.get_server_pid()  # type: ignore[attr-defined]
        admin = await asyncpg.connect(db_url)
        await admin.execute("SELECT pg_terminate_backend($1)", pid)
        for _ in range(100):  # until the listener is back; then a notification from elsewhere arrives
            await asyncio.sleep(0.05)
            current = storage._listen_conn  # type: ignore[attr-defined]
            if current is not None and current.get_server_pid() != pid:
                break
        await admin.execute("NOTIFY task_pending, 'someone-else:p/w'")
        await admin.close()
        assert await asyncio.wait_for(heard.get(), 10) == "p/w"
    finally:
        await storage.close()
