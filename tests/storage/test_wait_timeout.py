"""A transaction that waits too long for a database connection (SQLite: for the writer) is refused
with `DatabaseBusy` (503, Retry-After: 1) before it begins, rather than piling up behind the others.
The API sets the bound for each request (`WAIT_TIMEOUT`); background work, which leaves it unset,
waits as long as it takes."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from taskyard.storage import open_storage
from taskyard.storage.port import WAIT_TIMEOUT, DatabaseBusy, Storage
from taskyard.storage.postgres import PostgresStorage

WAIT = 0.2  # seconds; what the refusal waits, never a limit on how fast anything must be


async def _open(db_url: str) -> tuple[Storage, int]:
    """The storage, and how many transactions it runs at once."""
    if db_url.startswith("sqlite"):
        return await open_storage(db_url), 1
    return await PostgresStorage(db_url, pool_size=2).open(), 2


async def test_a_transaction_waiting_too_long_for_a_connection_is_refused(db_url: str) -> None:
    storage, at_once = await _open(db_url)
    try:
        async with contextlib.AsyncExitStack() as held:
            for _ in range(at_once):
                await held.enter_async_context(storage.transaction())
            WAIT_TIMEOUT.set(WAIT)
            with pytest.raises(DatabaseBusy) as refused:
                async with storage.transaction():
                    pytest.fail("a transaction began while every connection was held")
            assert (refused.value.status, refused.value.code, refused.value.retry_after) == (
                503,
                "ServiceUnavailable",
                1,
            )
        async with storage.transaction() as tx:  # once they are free, transactions run again
            tx.after_commit(lambda: None)
    finally:
        await storage.close()


async def test_without_a_bound_a_transaction_waits_its_turn(db_url: str) -> None:
    storage, at_once = await _open(db_url)
    try:
        async with contextlib.AsyncExitStack() as held:
            for _ in range(at_once):
                await held.enter_async_context(storage.transaction())

            async def later() -> bool:
                async with storage.transaction():
                    return True

            waiting = asyncio.create_task(later())  # WAIT_TIMEOUT unset: background work's
            await asyncio.sleep(WAIT * 2)
            assert not waiting.done()
        assert await waiting
    finally:
        await storage.close()
