"""The PostgreSQL storage's connection pool (storage/pool.py), on real connections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from taskyard.storage.pool import ConnectionPool, PoolClosed
from tests.conftest import PG_URL, need_postgres

pytestmark = pytest.mark.postgres


class Connections:
    """`connect` for a pool: opens real connections, counts them, and fails the next `fail` opens."""

    def __init__(self) -> None:
        self.opened: list[Any] = []
        self.fail = 0

    async def connect(self) -> Any:
        if self.fail:
            self.fail -= 1
            raise ConnectionRefusedError("refused, as the test asked")
        conn = await asyncpg.connect(PG_URL)
        self.opened.append(conn)
        return conn

    def open(self) -> list[Any]:
        return [c for c in self.opened if not c.is_closed()]


@pytest.fixture
def postgres_here() -> None:
    need_postgres()


@pytest.fixture
async def made(postgres_here: None) -> AsyncIterator[Connections]:
    made = Connections()
    yield made
    for conn in made.opened:
        conn.terminate()


async def waiting(task: asyncio.Task[Any]) -> None:
    """Let `task` run until it waits."""
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()


async def in_line(pool: ConnectionPool) -> asyncio.Task[Any]:
    """A caller of `acquire()`, let run until it waits its turn."""
    task = asyncio.create_task(pool.acquire())
    await waiting(task)
    return task


async def test_a_released_connection_is_handed_out_again(made: Connections) -> None:
    pool = ConnectionPool(made.connect, max_size=4)
    first = await pool.acquire()
    assert await first.fetchval("SELECT 1") == 1
    pool.release(first)
    assert await pool.acquire() is first
    second = await pool.acquire()
    pool.release(first)
    pool.release(second)
    assert pool.take_idle() is second  # the newest first: the others may go idle
    assert len(made.opened) == 2 and pool.size == 2


async def test_at_most_max_size_are_open_and_waiters_are_served_in_turn(made: Connections) -> None:
    pool = ConnectionPool(made.connect, max_size=2)
    a, b = await pool.acquire(), await pool.acquire()
    first, second = await in_line(pool), await in_line(pool)
    pool.release(b)
    assert await first is b
    assert not second.done()
    pool.release(a)
    assert await second is a
    assert len(made.opened) == 2


async def test_a_waiter_cancelled_as_it_is_handed_a_connection_gives_it_back(made: Connections) -> None:
    pool = ConnectionPool(made.connect, max_size=1)
    held = await pool.acquire()
    waiter = await in_line(pool)
    pool.release(held)  # handed to the waiter, which has not run yet
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert pool.take_idle() is held and pool.size == 1


async def test_a_cancelled_waiter_leaves_the_line(made: Connections) -> None:
    pool = ConnectionPool(made.connect, max_size=1)
    held = await pool.acquire()
    gone, stays = await in_line(pool), await in_line(pool)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    pool.release(held)
    assert await stays is held


async def test_a_connection_released_closed_or_in_a_transaction_is_replaced(made: Connections) -> None:
    pool = ConnectionPool(made.connect, max_size=1)
    broken = await pool.acquire()
    waiter = await in_line(pool)
    broken.terminate()
    pool.release(broken)  # its room goes to the waiter, which opens a new one
    fresh = await waiter
    assert fresh is not broken and await fresh.fetchval("SELECT 2") == 2
    await fresh.execute("BEGIN")
    pool.release(fresh)  # left in a transaction: never handed out again
    assert fresh.is_closed()
    again = await pool.acquire()
    assert again not in (broken, fresh) and not again.is_in_transaction()
    assert pool.size == 1 and made.open() == [again]


async def test_a_failed_open_frees_its_room(made: Connections) -> None:
    pool = ConnectionPool(made.connect, max_size=1)
    made.fail = 1
    with pytest.raises(ConnectionRefusedError):
        await pool.acquire()
    assert pool.size == 0
    conn = await pool.acquire()
    assert await conn.fetchval("SELECT 3") == 3


async def test_a_failed_open_hands_its_room_to_a_waiter(made: Connections) -> None:
    pool = ConnectionPool(made.connect, max_size=1)
    held = await pool.acquire()
    waiter = await in_line(pool)
    held.terminate()
    made.fail = 1
    pool.release(held)  # the waiter's open fails: its room is free again
    with pytest.raises(ConnectionRefusedError):
        await waiter
    assert pool.size == 0
    assert await (await pool.acquire()).fetchval("SELECT 4") == 4


async def test_connections_idle_too_long_are_closed_down_to_one(made: Connections) -> None:
    pool = ConnectionPool(made.connect, max_size=4, max_idle=0.05)
    conns = [await pool.acquire() for _ in range(3)]
    for conn in conns:
        pool.release(conn)
    while pool.size > 1 or len(made.open()) > 1:  # the retiring timer's, not a poll of ours
        await asyncio.sleep(0.05)
    assert made.open() == [conns[-1]]  # the newest stays
    assert await pool.acquire() is conns[-1]


async def test_close_fails_the_waiters_and_waits_for_the_connections_in_use(made: Connections) -> None:
    pool = ConnectionPool(made.connect, max_size=2)
    first, second = await pool.acquire(), await pool.acquire()
    waiter = await in_line(pool)
    closing = asyncio.create_task(pool.close())
    with pytest.raises(PoolClosed):
        await waiter
    await waiting(closing)
    with pytest.raises(PoolClosed):
        await pool.acquire()
    pool.release(first)
    await waiting(closing)
    assert not second.is_closed()
    pool.release(second)
    await closing
    assert first.is_closed() and second.is_closed() and pool.size == 0


async def test_close_closes_the_idle_connections(made: Connections) -> None:
    pool = ConnectionPool(made.connect, max_size=2)
    conn = await pool.acquire()
    pool.release(conn)
    await pool.close()
    assert conn.is_closed() and pool.size == 0


async def test_terminate_drops_them_all(made: Connections) -> None:
    pool = ConnectionPool(made.connect, max_size=2)
    idle, held = await pool.acquire(), await pool.acquire()
    pool.release(idle)
    pool.terminate()
    assert idle.is_closed() and held.is_closed()
    pool.release(held)  # a caller still holding one gives it back as usual
    assert pool.size == 0
