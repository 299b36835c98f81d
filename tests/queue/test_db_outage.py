"""Wake-ups missed while PostgreSQL's notifications were down are made up once they are back; the
background loops (resolvers, outbox relay) say an outage once, not in every round it lasts.

Process A waits (a claimWork, cached roles) while its notification connection is down; process B
changes something meanwhile, and its notification never reaches A. When A's connection is back,
A must look again by itself: the claimWork claims B's task, the caches drop B's old roles.
A's reconnection is held back until B is done, so the notification is lost for certain.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest

from taskyard.auth import roles
from taskyard.auth.service import Auth
from taskyard.config import QueueConfig
from taskyard.events.memory import MemoryBus
from taskyard.events.outbox import OutboxRelay
from taskyard.events.profiles import TC_PREFIX
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, resolvers, tasks
from taskyard.queue.service import CLAIM_RESOLVER, Queue
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


# Background loops through an outage: one warning when it begins, one line when it ends. Found by the
# fault campaign (bench/chaos.py): a 2 s restart logged an ERROR with a traceback per resolver round.


class Rounds:
    """Counts a background loop's rounds that failed because the database was unavailable."""

    def __init__(self) -> None:
        self.failed = 0

    def counting(self, work: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T]]:
        async def counted() -> T:
            try:
                return await work()
            except DatabaseUnavailable:
                self.failed += 1
                raise

        return counted


async def polled(condition: Callable[[], Awaitable[bool]]) -> None:
    """Wait for `condition()` to hold, polling (it fails the test after about 30 s)."""
    for _ in range(600):
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition never held")


async def through_an_outage(pg_cluster: PgCluster, rounds: Rounds) -> None:
    """Stop PostgreSQL until a loop failed several rounds, then start it again."""
    await asyncio.to_thread(pg_cluster.stop)

    async def failed_enough() -> bool:
        return rounds.failed >= 5

    await polled(failed_enough)
    await asyncio.to_thread(pg_cluster.start)


def said(caplog: pytest.LogCaptureFixture, logger: str) -> list[tuple[int, str]]:
    """What `logger` said: a warning when an outage began, a line when it ended, nothing else.

    (A server shutting down may still answer a query between two refusals: two short outages.)
    """
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == logger]
    assert [level for level, _ in lines] in (
        [logging.WARNING, logging.INFO],
        [logging.WARNING, logging.INFO] * 2,
    )
    return lines


async def test_a_resolver_logs_a_database_outage_once_not_every_round(
    pg_cluster: PgCluster, caplog: pytest.LogCaptureFixture
) -> None:
    storage = await open_storage(pg_cluster.url())
    queue = Queue(storage, QueueConfig(claim_timeout=1), credentials_issuer=QUEUE_ISSUER)
    rounds = Rounds()
    work = rounds.counting(lambda: resolvers.resolve_expired_claims(queue))
    loop = asyncio.create_task(resolvers.run_forever(CLAIM_RESOLVER, work, 0.02))
    try:
        with caplog.at_level(logging.INFO, logger="taskyard.queue.resolvers"):
            await through_an_outage(pg_cluster, rounds)
            task_id = new_id()
            body: Any = definition(queue.clock())
            await eventually(lambda: tasks.create_task(queue, task_id, body, guard=ALLOW_ALL))
            await eventually(lambda: claims.claim_work(queue, TASK_QUEUE, WORKER, 1))

            async def expired() -> bool:  # back at work: the claim expires and the resolver resolves it
                return (await tasks.status(queue, task_id))["status"]["runs"][0]["state"] == "exception"

            await polled(expired)
    finally:
        loop.cancel()
        await storage.close()
    lines = said(caplog, "taskyard.queue.resolvers")
    assert lines[-2][1].startswith(f"{CLAIM_RESOLVER}: PostgreSQL is unavailable"), lines
    assert lines[-1][1].startswith(f"{CLAIM_RESOLVER}: the database is back after"), lines
    assert rounds.failed >= 5


async def test_the_outbox_relay_logs_a_database_outage_once_not_every_round(
    pg_cluster: PgCluster, caplog: pytest.LogCaptureFixture
) -> None:
    storage = await open_storage(pg_cluster.url())
    queue = Queue(storage, QueueConfig(), credentials_issuer=QUEUE_ISSUER)
    bus = MemoryBus()
    defined: list[str] = []
    bus.subscribe(TC_PREFIX + "task-defined", "#", lambda e: defined.append(e.routing_key))
    relay = OutboxRelay(storage, bus, idle_seconds=0.02)
    rounds = Rounds()
    relay.relay_once = rounds.counting(relay.relay_once)  # type: ignore[method-assign]
    loop = asyncio.create_task(relay.run())
    try:
        with caplog.at_level(logging.INFO, logger="taskyard.events.outbox"):
            await through_an_outage(pg_cluster, rounds)
            body: Any = definition(queue.clock())
            await eventually(lambda: tasks.create_task(queue, new_id(), body, guard=ALLOW_ALL))

            async def relayed() -> bool:  # the relay is back at work
                return bool(defined)

            await polled(relayed)
    finally:
        loop.cancel()
        await storage.close()
    lines = said(caplog, "taskyard.events.outbox")
    assert "PostgreSQL is unavailable" in lines[-2][1], lines
    assert lines[-1][1].startswith("outbox relay: the database is back after"), lines
    assert rounds.failed >= 5
