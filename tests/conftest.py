"""Shared fixtures: real storage backends, a fake clock, a queue and its published events.

PostgreSQL tests use the local server (TASKYARD_TEST_POSTGRES, default
postgresql://postgres@127.0.0.1:5432/test): a template database is migrated once per
session and cloned for every test. Without the server they skip, except under CI=true.
RabbitMQ tests likewise use TASKYARD_TEST_RABBITMQ (default amqp://guest:guest@127.0.0.1:5672/).
Tests that stop or restart the server get a private cluster of their own (`pg_cluster`, see
`tests/pgcluster.py`), and tests that stop a broker a private RabbitMQ node (`private_rabbit`):
the shared ones are never stopped.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from taskyard.artifacts.port import BlobStore
from taskyard.auth import static
from taskyard.auth.service import Auth
from taskyard.config import QueueConfig
from taskyard.events.memory import MemoryBus
from taskyard.events.outbox import OutboxRelay
from taskyard.events.port import Envelope
from taskyard.events.profiles import TC_PREFIX
from taskyard.model import dates
from taskyard.model.messages import EXCHANGES, Message
from taskyard.queue.livelogs import StreamUrls
from taskyard.queue.poll import PollKeys
from taskyard.queue.service import Queue
from taskyard.scheduler.service import Scheduler
from taskyard.secrets.service import Secrets
from taskyard.storage import open_storage
from taskyard.storage.port import Storage
from tests.events.rabbit import PrivateRabbit, PrivateRabbits, private_rabbit_unavailable
from tests.pgcluster import PgCluster, unavailable_reason

ROOT_TOKEN = "api-tests-root-access-token"
SECRET_KEY = "tests-secret-key"
PG_URL = os.environ.get("TASKYARD_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
RABBITMQ_URL = os.environ.get("TASKYARD_TEST_RABBITMQ", "amqp://guest:guest@127.0.0.1:5672/")


def _pg_admin(sql: str) -> None:
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(PG_URL, timeout=5)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def _pg_url(database: str) -> str:
    return PG_URL.rsplit("/", 1)[0] + "/" + database


def postgres_available() -> str | None:
    """None if the test server answers, else why not."""
    try:
        _pg_admin("SELECT 1")
    except Exception as exc:  # any failure to connect means: not available
        return f"PostgreSQL at {PG_URL} is not available: {exc}"
    return None


def need_postgres() -> None:
    reason = postgres_available()
    if reason is not None:
        if IN_CI:
            pytest.fail(reason + " (CI=true: PostgreSQL tests must run)")
        pytest.skip(reason)


def rabbitmq_available() -> str | None:
    """None if the test broker answers, else why not."""
    import pika

    try:
        pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL)).close()
    except Exception as exc:  # any failure to connect means: not available
        where = RABBITMQ_URL.split("@")[-1]
        return f"RabbitMQ at {where} is not available: {type(exc).__name__} {exc}"
    return None


def need_rabbitmq() -> None:
    reason = rabbitmq_available()
    if reason is not None:
        if IN_CI:
            pytest.fail(reason + " (CI=true: RabbitMQ tests must run)")
        pytest.skip(reason)


def need_pg_binaries() -> None:
    reason = unavailable_reason()
    if reason is not None:
        if IN_CI:
            pytest.fail(reason + " (CI=true: PostgreSQL tests must run)")
        pytest.skip(reason)


@pytest.fixture
def pg_cluster() -> Iterator[PgCluster]:
    """A private PostgreSQL cluster, running, that the test may stop, restart or break at will."""
    need_pg_binaries()
    cluster = PgCluster.create()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(scope="session")
def _private_rabbits() -> Iterator[PrivateRabbits]:
    reason = private_rabbit_unavailable()
    if reason is not None:
        if IN_CI:
            pytest.fail(reason + " (CI=true: RabbitMQ tests must run)")
        pytest.skip(reason)
    base = Path(tempfile.mkdtemp(prefix="ty-rabbit-"))
    nodes = PrivateRabbits(base)
    yield nodes
    nodes.close()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def private_rabbit(_private_rabbits: PrivateRabbits) -> PrivateRabbit:
    """A private RabbitMQ node (tests/events/rabbit.py), shared by the session and running when a
    test gets it: for tests that stop it, start it or add users to it. The shared broker is never
    stopped."""
    return _private_rabbits.running()


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """A migrated template database, made once per session."""
    need_postgres()
    name = f"taskyard_tpl_{uuid.uuid4().hex[:8]}"
    _pg_admin(f"CREATE DATABASE {name}")

    async def migrate() -> None:
        storage = await open_storage(_pg_url(name))
        await storage.close()

    asyncio.run(migrate())
    yield name
    _pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.sqlite3"

    async def migrate() -> None:
        storage = await open_storage(f"sqlite:///{path}")
        await storage.close()

    asyncio.run(migrate())
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, migrated database of each backend for one test."""
    if request.param == "sqlite":
        path = tmp_path / "taskyard.sqlite3"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    template = request.getfixturevalue("pg_template")
    name = f"taskyard_t_{uuid.uuid4().hex[:10]}"
    _pg_admin(f"CREATE DATABASE {name} TEMPLATE {template}")
    yield _pg_url(name)
    _pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@dataclass
class FakeClock:
    """Time that moves only when a test says so."""

    now: int = field(default_factory=dates.now_ms)

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def storage(db_url: str) -> AsyncIterator[Storage]:
    opened = await open_storage(db_url)
    yield opened
    await opened.close()


@dataclass
class Published:
    """Events the queue published, in order, as the outbox relay delivered them.

    The bus publishes both profiles; `messages` are the `tc` profile's envelopes, told apart by
    their short exchange names (`task-pending`), as the queue stored them.
    """

    relay: OutboxRelay
    bus: MemoryBus
    messages: list[Message] = field(default_factory=list)

    async def collect(self) -> list[Message]:
        """Relay everything committed so far; answer all messages seen since the last call."""
        while await self.relay.relay_once():
            pass
        await self.bus.flush()
        seen = list(self.messages)
        self.messages.clear()
        return seen

    async def exchanges(self) -> list[str]:
        return [m.exchange for m in await self.collect()]


@pytest.fixture
async def auth(storage: Storage, clock: FakeClock) -> Auth:
    """The auth service on the test's storage, with the static clients of ROOT_TOKEN."""
    service = Auth(
        storage, secret_key=SECRET_KEY, static_clients=static.static_clients(ROOT_TOKEN), clock=clock
    )
    await service.start()
    return service


# The queue signs task credentials as the static queue client of ROOT_TOKEN, as `taskyard serve` does.
QUEUE_ISSUER = (static.QUEUE_CLIENT_ID, static.derived_token(ROOT_TOKEN, static.QUEUE_CLIENT_ID))


def new_queue(storage: Storage, clock: FakeClock, **parts: Any) -> Queue:
    """A queue on `storage` with the tests' settings; `parts` are more of Queue's arguments."""
    config = QueueConfig(claim_timeout=60, claim_work_timeout=0.5, resolver_interval=0.05)
    parts.setdefault("poll_keys", PollKeys("http://testserver", SECRET_KEY))
    return Queue(storage, config, clock=clock, credentials_issuer=QUEUE_ISSUER, **parts)


@pytest.fixture
def blobs() -> BlobStore | None:
    """The `queue` fixture's blob store: none, so s3 artifacts are refused. Modules override it."""
    return None


@pytest.fixture
def live_log_urls() -> StreamUrls | None:
    """The `queue` fixture's live-log URLs: none, so live logs are refused. Modules override it."""
    return None


@pytest.fixture
async def queue(
    storage: Storage, clock: FakeClock, blobs: BlobStore | None, live_log_urls: StreamUrls | None
) -> AsyncIterator[Queue]:
    q = new_queue(storage, clock, blobs=blobs, live_log_urls=live_log_urls)
    await q.start()
    yield q


@pytest.fixture
def scheduler(queue: Queue, auth: Auth) -> Scheduler:
    """The task-graph scheduler on the test's queue, expanding graph scopes with `auth`'s roles."""
    return Scheduler(queue, expand=auth.expand)


@pytest.fixture
def secrets(storage: Storage, clock: FakeClock) -> Secrets:
    """The secrets service on the test's storage, its values sealed with a key from SECRET_KEY."""
    return Secrets(storage, secret_key=SECRET_KEY, clock=clock)


@pytest.fixture
async def published(queue: Queue, storage: Storage) -> AsyncIterator[Published]:
    bus = MemoryBus()
    relay = OutboxRelay(storage, bus)
    record = Published(relay, bus)

    def seen(envelope: Envelope) -> None:
        short = envelope.exchange.removeprefix(TC_PREFIX)
        record.messages.append(Message(short, envelope.routing_key, envelope.body, envelope.cc))

    for exchange in EXCHANGES:
        bus.subscribe(TC_PREFIX + exchange, "#", seen)
    yield record
    await bus.close()


async def until(condition: Callable[[], bool]) -> None:
    """Wait (up to about 5 s) for `condition()` to hold; fail the test if it never does."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")
