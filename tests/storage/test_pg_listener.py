"""The notification connection comes back by itself: after a restart, an outage, a killed backend.

Restarts happen on a private cluster (`pg_cluster`): the shared test server is never stopped.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import pytest

from taskyard.storage import open_storage
from taskyard.storage.port import Storage
from tests.pgcluster import PgCluster

pytestmark = pytest.mark.postgres
LOGGER = "taskyard.storage.postgres"


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and text in r.getMessage()]


async def _heard_after_resync(heard: asyncio.Queue[str | None], sender_url: str) -> str | None:
    """After the listener is back, listeners get None (look again), then a notification sent now."""
    assert await asyncio.wait_for(heard.get(), 30) is None
    sender = await asyncpg.connect(sender_url)
    try:
        await sender.execute("NOTIFY task_pending, 'someone-else:p/w'")
    finally:
        await sender.close()
    return await asyncio.wait_for(heard.get(), 10)


@pytest.mark.slow
async def test_the_listener_comes_back_after_a_restart(
    pg_cluster: PgCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    storage = await open_storage(pg_cluster.url())
    try:
        heard = asyncio.Queue[str | None]()
        await storage.listen("task_pending", heard.put_nowait)
        # -m fast: every client gets 57P01, then connections are refused, then answered 57P03
        # (starting up) for a moment: the listener must come back through all of it.
        await asyncio.to_thread(pg_cluster.restart)
        assert await _heard_after_resync(heard, pg_cluster.url()) == "p/w"
        assert len(_lines(caplog, "lost the PostgreSQL notification connection")) == 1
        assert len(_lines(caplog, "notification connection is back")) == 1
        # The pool's connections were all lost too: transactions work again.
        async with storage.transaction() as tx:
            tx.notify("task_pending", "mine")
        assert heard.get_nowait() == "mine"
    finally:
        await storage.close()


@pytest.mark.slow
async def test_the_listener_waits_out_a_long_outage(
    pg_cluster: PgCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    storage = await open_storage(pg_cluster.url())
    try:
        heard = asyncio.Queue[str | None]()
        await storage.listen("task_pending", heard.put_nowait)
        await asyncio.to_thread(pg_cluster.stop)
        # Wait until it has failed to reconnect a few times, whatever the errors were.
        for _ in range(200):
            if len(_lines(caplog, "reconnecting the notification connection failed")) >= 3:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the listener never tried to reconnect")
        assert heard.empty()
        await asyncio.to_thread(pg_cluster.start)
        assert await _heard_after_resync(heard, pg_cluster.url()) == "p/w"
        assert len(_lines(caplog, "notification connection is back")) == 1
    finally:
        await storage.close()


async def test_the_listener_comes_back_after_its_backend_is_terminated(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    if not db_url.startswith("postgres"):
        pytest.skip("only PostgreSQL has a notification connection to lose")
    caplog.set_level(logging.INFO, logger=LOGGER)
    storage = await open_storage(db_url)
    try:
        heard = asyncio.Queue[str | None]()
        await storage.listen("task_pending", heard.put_nowait)
        admin = await asyncpg.connect(db_url)
        try:
            await admin.execute("SELECT pg_terminate_backend($1)", _listener_pid(storage))
        finally:
            await admin.close()
        assert await _heard_after_resync(heard, db_url) == "p/w"
        assert len(_lines(caplog, "lost the PostgreSQL notification connection")) == 1
        assert len(_lines(caplog, "notification connection is back")) == 1
    finally:
        await storage.close()


async def test_a_listener_lost_without_a_word_is_found_by_the_probe(db_url: str) -> None:
    """The driver may never report a connection lost (a silent network): the probe notices."""
    if not db_url.startswith("postgres"):
        pytest.skip("only PostgreSQL has a notification connection to lose")
    storage = await open_storage(db_url)
    storage.listener_probe_seconds = 0.05  # type: ignore[attr-defined]
    try:
        heard = asyncio.Queue[str | None]()
        await storage.listen("task_pending", heard.put_nowait)
        conn = storage._listen_conn  # type: ignore[attr-defined]
        conn.remove_termination_listener(storage._on_listener_lost)  # type: ignore[attr-defined]
        admin = await asyncpg.connect(db_url)
        try:
            await admin.execute("SELECT pg_terminate_backend($1)", conn.get_server_pid())
        finally:
            await admin.close()
        assert await _heard_after_resync(heard, db_url) == "p/w"
    finally:
        await storage.close()


def _listener_pid(storage: Storage) -> int:
    pid: int = storage._listen_conn.get_server_pid()  # type: ignore[attr-defined]
    return pid
