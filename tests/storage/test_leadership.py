"""One process at a time leads a job (`Storage.lead`): the sweeps of a deployment of many
processes run in one of them, and another takes over when it is gone."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from taskyard.storage import open_storage
from taskyard.storage.port import Storage


async def test_sqlite_always_leads(tmp_path: object) -> None:
    storage = await open_storage(f"sqlite:///{tmp_path}/lead.sqlite3")
    try:
        assert await storage.lead("claim-resolver")
        assert await storage.lead("claim-resolver")
    finally:
        await storage.close()


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_one_process_leads_and_another_takes_over_when_it_closes(storage: Storage, db_url: str) -> None:
    other = await open_storage(db_url)
    try:
        assert await storage.lead("claim-resolver")
        assert await storage.lead("claim-resolver")  # and stays it
        assert not await other.lead("claim-resolver")
        assert await other.lead("deadline-resolver")  # jobs are led apart
        assert not await storage.lead("deadline-resolver")
        await storage.close()
        assert await other.lead("claim-resolver")
    finally:
        await other.close()


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_leader_whose_connection_is_lost_is_replaced(
    storage: Storage, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    other = await open_storage(db_url)
    try:
        assert await storage.lead("expiry-sweeper")
        assert not await other.lead("expiry-sweeper")
        admin = await asyncpg.connect(db_url)
        try:  # the leader's lock connection dies (as when its process is killed)
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks"
                " WHERE locktype = 'advisory' AND granted AND database ="
                " (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        finally:
            await admin.close()
        # pg_terminate_backend only signals the backend: its lock goes when it has exited.
        for _ in range(200):
            if await other.lead("expiry-sweeper"):
                break
            await asyncio.sleep(0.05)
        assert await other.lead("expiry-sweeper")
        for _ in range(200):  # until the driver has seen the termination arrive
            if not await storage.lead("expiry-sweeper"):
                break
            await asyncio.sleep(0.05)
        assert not await storage.lead("expiry-sweeper")
        assert any("no longer leading expiry-sweeper" in r.getMessage() for r in caplog.records)
    finally:
        await other.close()
