"""Transactions that committed nothing through no fault of their own run again, on PostgreSQL:
one whose connection is killed before COMMIT (during a statement, or between the body's last
statement and COMMIT), one that PostgreSQL aborts to end a deadlock."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import pytest

from taskyard.storage import open_storage
from taskyard.storage.port import Tx, run_in_transaction
from tests.storage.helpers import _pending

pytestmark = pytest.mark.postgres


async def test_a_transaction_whose_connection_is_killed_is_run_again(db_url: str) -> None:
    """Killed before COMMIT, the first run commits nothing (else the second would conflict)."""
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite has no connection to lose")
    storage = await open_storage(db_url)
    admin = await asyncpg.connect(db_url)
    runs = 0

    async def body(tx: Tx) -> None:
        nonlocal runs
        runs += 1
        await tx.execute("insert_group", "killed", "-", 1)
        if runs == 1:
            pid = await tx._conn.fetchval("SELECT pg_backend_pid()")  # type: ignore[attr-defined]
            assert await admin.fetchval("SELECT pg_terminate_backend($1, 10000)", pid)
            await tx.execute("insert_group", "never", "-", 1)

    try:
        await run_in_transaction(storage, body)
        assert runs == 2
        assert await admin.fetchval("SELECT count(*) FROM task_groups WHERE task_group_id = 'killed'") == 1
        assert await admin.fetchval("SELECT count(*) FROM task_groups WHERE task_group_id = 'never'") == 0
    finally:
        await admin.close()
        await storage.close()


async def test_a_connection_killed_after_the_body_is_run_again(db_url: str) -> None:
    """Killed once the body's statements are done, before COMMIT: the driver has seen the connection
    close by then. Found by the fault campaign (bench/chaos.py) when PostgreSQL stopped while the
    relay waited for RabbitMQ's confirms: under asyncpg's pool, which took the dead connection back
    at once and whose proxy then refused every call, an InterfaceError escaped (a 500 in a request,
    an ERROR in the outbox relay)."""
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite has no connection to lose")
    storage = await open_storage(db_url)
    admin = await asyncpg.connect(db_url)
    runs = 0

    async def body(tx: Tx) -> None:
        nonlocal runs
        runs += 1
        await tx.execute("insert_group", "killed-after", "-", 1)
        if runs == 1:
            conn = tx._conn  # type: ignore[attr-defined]
            pid = await conn.fetchval("SELECT pg_backend_pid()")
            assert await admin.fetchval("SELECT pg_terminate_backend($1, 10000)", pid)
            for _ in range(500):  # until asyncpg saw it die
                if conn.is_closed():
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("asyncpg never noticed the connection was gone")

    try:
        await run_in_transaction(storage, body)
        assert runs == 2
        count = "SELECT count(*) FROM task_groups WHERE task_group_id = 'killed-after'"
        assert await admin.fetchval(count) == 1
    finally:
        await admin.close()
        await storage.close()


@pytest.mark.slow
async def test_a_deadlocked_transaction_is_run_again(db_url: str) -> None:
    """Two transactions lock two tasks in opposite orders: PostgreSQL aborts one (after its
    deadlock_timeout, a second by default), which runs again and succeeds."""
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite has one writer at a time: it can't deadlock")
    storage = await open_storage(db_url)
    try:
        await _pending(storage, "left", 1, 1)
        await _pending(storage, "right", 1, 2)
        runs = {"left": 0, "right": 0}
        holding = {"left": asyncio.Event(), "right": asyncio.Event()}
        holding_both = {"left": asyncio.Event(), "right": asyncio.Event()}

        def locker(first: str, second: str) -> object:
            async def body(tx: Tx) -> str:
                runs[first] += 1
                if runs[first] > 1:
                    # Run again once the other holds both rows: it commits, then this goes on. (Were
                    # it to take a row first, which a loaded machine allows, it would deadlock again.)
                    await holding_both[second].wait()
                await tx.fetchrow("get_task_for_update", first)
                if runs[first] == 1:  # the first time, meet the other half-way: a deadlock
                    holding[first].set()
                    await holding[second].wait()
                await tx.fetchrow("get_task_for_update", second)
                holding_both[first].set()
                return first

            return body

        done = await asyncio.wait_for(
            asyncio.gather(
                run_in_transaction(storage, locker("left", "right")),  # type: ignore[arg-type]
                run_in_transaction(storage, locker("right", "left")),  # type: ignore[arg-type]
            ),
            30,
        )
        assert done == ["left", "right"]
        assert sorted(runs.values()) == [1, 2]  # one of them was aborted and ran again
    finally:
        await storage.close()


async def test_transactions_cancelled_anywhere_leave_no_transaction_open(db_url: str) -> None:
    """Cancelled at any point, even with BEGIN on its way (the server begins after the cancel), a
    transaction hands its connection back closed or rolled back: the pool never finds one open
    ("Resetting connection with an active transaction", an ERROR through the event loop). Seen
    when the outbox relay was stopped on a busy machine."""
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite has no connection to lose")
    storage = await open_storage(db_url)
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _, context: reported.append(context["message"]))

    async def short() -> None:
        async with storage.transaction() as tx:
            await tx.fetchrow("get_group", "cancelled")

    try:
        for turns in list(range(12)) * 25:  # cancelled after 0 to 11 turns of the loop
            task = asyncio.create_task(short())
            for _ in range(turns):
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            async with storage.transaction() as tx:  # the pool still serves
                assert await tx.fetchrow("get_group", "after") is None
        await asyncio.sleep(0.1)
    finally:
        loop.set_exception_handler(None)
        await storage.close()
    assert reported == []
