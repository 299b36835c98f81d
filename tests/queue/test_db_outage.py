"""Wake-ups missed while PostgreSQL's notifications were down are made up once they are back.

Process A waits (a claimWork, cached roles) while its notification connection is down; process B
changes something meanwhile, and its notification never reaches A. When A's connection is back,
A must look again by itself: the claimWork claims B's task, the caches drop B's old roles.
A's reconnection is held back until B is done, so the notification is lost for certain.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest

from taskyard.auth import roles
from taskyard.auth.service import Auth
from taskyard.config import QueueConfig
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, tasks
from taskyard.queue.service import Queue
from taskyard.storage import open_storage
from taskyard.storage.port import DatabaseUnavailable, Storage
from tests.conftest import QUEUE_ISSUER, SECRET_KEY, until
from tests.pgcluster import PgCluster
from tests.queue.helpers import definition, new_id

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
T = TypeVar("T")
TASK_QUEUE = "test-prov/test-worker"
WORKER = ("wg", "w1")


@pytest.fixture
async def two_processes(pg_cluster: PgCluster) -> AsyncIterator[tuple[Storage, Storage]]:
    first, second = await open_storage(pg_cluster.url()), await open_storage(pg_cluster.url())
    yield first, second
    await first.close()
    await second.close()


def hold_reconnection(storage: Storage, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Until the answered event is set, `storage` can't bring its notification connection back."""
    gate = asyncio.Event()
    connect = storage._connect_listener  # type: ignore[attr-defined]

    async def held() -> None:
        await gate.wait()
        await connect()

    monkeypatch.setattr(storage, "_connect_listener", held)
    return gate


async def eventually(action: Callable[[], Awaitable[T]]) -> T:
    """`action()`, asked again while the database answers 503 (as a client does)."""
    for _ in range(100):
        try:
            return await action()
        except DatabaseUnavailable:
            await asyncio.sleep(0.1)
    return await action()


async def test_a_claim_work_waiting_through_a_restart_finds_work_made_meanwhile(
    pg_cluster: PgCluster, two_processes: tuple[Storage, Storage], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = two_processes
    config = QueueConfig(claim_work_timeout=60)
    waiting_queue = Queue(first, config, credentials_issuer=QUEUE_ISSUER)
    other_queue = Queue(second, config, credentials_issuer=QUEUE_ISSUER)
    await waiting_queue.start()
    looked = asyncio.Event()
    claim_pending = claims.claim_pending

    async def look(*args: Any) -> list[claims.Claim]:
        found = await claim_pending(*args)
        looked.set()
        return found

    monkeypatch.setattr(claims, "claim_pending", look)
    waiting = asyncio.create_task(claims.claim_work(waiting_queue, TASK_QUEUE, WORKER, 1))
    try:
        # Waiting, its first look done: a restart in the middle of that look would fail the call.
        await asyncio.wait_for(looked.wait(), 30)
        await until(lambda: waiting_queue.signals.waiting(TASK_QUEUE) == 1)
        gate = hold_reconnection(first, monkeypatch)
        await asyncio.to_thread(pg_cluster.restart)
        task_id = new_id()
        body: Any = definition(other_queue.clock())
        await eventually(lambda: tasks.create_task(other_queue, task_id, body, guard=ALLOW_ALL))
        assert not waiting.done()  # its notification went nowhere
        gate.set()
        claimed = await asyncio.wait_for(waiting, 30)  # well before its 60 s are up
        assert [c["status"]["taskId"] for c in claimed] == [task_id]
    finally:
        waiting.cancel()


async def test_auth_caches_forget_what_changed_while_notifications_were_down(
    pg_cluster: PgCluster, two_processes: tuple[Storage, Storage], monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncpg

    first, second = two_processes
    # Without notifications, only the periodic re-check would notice: put it out of reach.
    cached = Auth(first, secret_key=SECRET_KEY, recheck_seconds=3600)
    changer = Auth(second, secret_key=SECRET_KEY)
    await cached.start()
    await changer.start()
    assert await cached.expand(["assume:builder"]) == ["assume:builder"]
    gate = hold_reconnection(first, monkeypatch)
    admin = await asyncpg.connect(pg_cluster.url())
    try:
        pid = first._listen_conn.get_server_pid()  # type: ignore[attr-defined]
        await admin.execute("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    await until(lambda: first._listen_conn is None)  # type: ignore[attr-defined]
    await roles.create_role(changer, "builder", "builds", ["queue:create-task:highest:*"], guard=ALLOW_ALL)
    assert await cached.expand(["assume:builder"]) == ["assume:builder"]  # still the cached roles
    gate.set()
    for _ in range(300):
        if "queue:create-task:highest:*" in await cached.expand(["assume:builder"]):
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("the cached roles were never dropped")
