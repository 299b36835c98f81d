"""The outbox is the event log's store: an event's row is written once and kept until pruned.

What the relay publishes is recorded without touching the events' rows: on SQLite as an id (one
writer, so ids grow in commit order), on PostgreSQL as snapshots, since there transactions commit
in another order than they took their ids. These tests hold what that must not break: every
event published once, in an order that keeps each change after the ones it saw, however the
commits interleave, across pages, with two relays at once, after an upgrade and after a restore
into another cluster.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import asyncpg
import pytest

from taskyard.events import log as event_log
from taskyard.events import outbox
from taskyard.events.memory import MemoryBus
from taskyard.events.outbox import OutboxRelay
from taskyard.model.messages import Message
from taskyard.storage import _queries, open_storage
from taskyard.storage.port import Storage
from taskyard.storage.postgres import OldPostgres
from tests.conftest import FakeClock, _pg_admin, _pg_url, need_postgres
from tests.upgrade.databases import execute_raw, fetch_raw

OLD_SCHEMA = 12  # the last schema whose relay deleted what it published and copied it to the log


class RecordingBus(MemoryBus):
    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str] = []

    async def publish(self, messages: Sequence[Message]) -> None:
        self.keys += [m.routing_key for m in messages]
        await super().publish(messages)


def event(key: str) -> tuple[str, str, str, str, int]:
    return ("task-defined", key, "[]", "{}", 1)


async def write(storage: Storage, *keys: str) -> None:
    async with storage.transaction() as tx:
        await tx.defer_many("insert_event", [event(k) for k in keys])


async def logged_keys(storage: Storage) -> list[str]:
    async with storage.reader() as session:
        return [e.message.routing_key for e in await event_log.read(session, 0, 2**62, 1000)]


async def relay_all(relay: OutboxRelay) -> list[int]:
    """Relay until nothing is left; the size of each batch."""
    sizes = []
    while n := await relay.relay_once():
        sizes.append(n)
    return sizes


def need_postgres_url(db_url: str, why: str = "SQLite has one writer: its ids grow in commit order") -> None:
    if not db_url.startswith("postgres"):
        pytest.skip(why)


async def test_a_published_event_is_read_from_the_outbox_until_the_log_prunes_it(
    storage: Storage, db_url: str, clock: FakeClock
) -> None:
    bus = RecordingBus()
    relay = OutboxRelay(storage, bus, clock=clock)
    await write(storage, "a", "b")
    assert await relay_all(relay) == [2]
    clock.advance(100)
    await write(storage, "c")
    assert await relay_all(relay) == [1]
    assert bus.keys == await logged_keys(storage) == ["a", "b", "c"]
    assert await fetch_raw(db_url, "SELECT count(*) FROM outbox") == [(3,)]
    assert await event_log.prune_once(storage, clock() - 50_000) == 2  # a and b: older than 50 s
    assert await logged_keys(storage) == ["c"]
    assert await fetch_raw(db_url, "SELECT count(*) FROM outbox") == [(1,)]  # their rows went too
    await bus.close()


async def test_a_backlog_is_published_a_page_at_a_time_in_order(
    storage: Storage, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbox, "BATCH", 2)
    bus = RecordingBus()
    relay = OutboxRelay(storage, bus)
    await write(storage, "a", "b", "c")
    await write(storage, "d", "e")
    assert await relay.relay_once() == 2
    await write(storage, "f")
    # PostgreSQL's window holds what had committed when it opened: f is in the next one.
    assert await relay_all(relay) == ([2, 1, 1] if db_url.startswith("postgres") else [2, 2])
    assert bus.keys == await logged_keys(storage) == ["a", "b", "c", "d", "e", "f"]
    await bus.close()


async def test_a_transaction_that_commits_after_a_later_one_is_published_once_after_it(
    storage: Storage, db_url: str
) -> None:
    """Its id is the lower, taken first; a relay that followed ids would skip it for ever."""
    need_postgres_url(db_url)
    bus = RecordingBus()
    relay = OutboxRelay(storage, bus)
    slow_wrote, slow_may_commit = asyncio.Event(), asyncio.Event()

    async def slow() -> None:
        async with storage.transaction() as tx:
            await tx.execute("insert_event", *event("slow"))
            slow_wrote.set()
            await slow_may_commit.wait()

    slow_task = asyncio.create_task(slow())
    await slow_wrote.wait()
    await write(storage, "fast")
    assert await relay_all(relay) == [1]
    assert bus.keys == ["fast"]
    slow_may_commit.set()
    await slow_task
    assert await relay_all(relay) == [1]
    assert bus.keys == await logged_keys(storage) == ["fast", "slow"]
    await bus.close()


async def test_two_relays_at_once_publish_each_event_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes' relays, each with its own connections, while events keep committing."""
    need_postgres_url(db_url)
    monkeypatch.setattr(outbox, "BATCH", 7)
    stores = [await open_storage(db_url) for _ in range(3)]
    buses = [RecordingBus(), RecordingBus()]
    relays = [OutboxRelay(stores[0], buses[0]), OutboxRelay(stores[1], buses[1])]
    writing = True

    async def writer(n: int) -> None:
        for i in range(40):
            await write(stores[2], *(f"w{n}-{i}-{k}" for k in range(3)))

    async def relaying(relay: OutboxRelay) -> None:
        while writing:
            await relay.relay_once()
            await asyncio.sleep(0)
        await relay_all(relay)

    try:
        relayers = [asyncio.create_task(relaying(r)) for r in relays]
        await asyncio.gather(*(writer(n) for n in range(4)))
        writing = False
        await asyncio.gather(*relayers)
        await relay_all(relays[0])
        published = buses[0].keys + buses[1].keys
        assert len(published) == len(set(published)) == 4 * 40 * 3
        logged = await logged_keys(stores[2])
        assert sorted(logged) == sorted(published)
        for n in range(4):  # each writer's events in the order it committed them
            mine = [k for k in logged if k.startswith(f"w{n}-")]
            assert mine == [f"w{n}-{i}-{k}" for i in range(40) for k in range(3)]
    finally:
        for bus in buses:
            await bus.close()
        for store in stores:
            await store.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new database of each backend, not migrated at all."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'taskyard.sqlite3'}"
        return
    need_postgres()
    name = f"taskyard_t_{uuid.uuid4().hex[:10]}"
    _pg_admin(f"CREATE DATABASE {name}")
    yield _pg_url(name)
    _pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def test_an_upgrade_keeps_the_log_and_publishes_what_waited(
    empty_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database the old relay used: its log's events keep their ids, its outbox's are published
    once, and new events follow both."""
    db_url = await _migrated_to_old_schema(empty_db_url, monkeypatch)
    await execute_raw(
        db_url,
        "INSERT INTO event_log (published, exchange, routing_key, cc, body) VALUES "
        "(5, 'task-defined', 'old1', '[]', '{}'), (6, 'task-pending', 'old2', '[]', '{}');"
        "INSERT INTO outbox (exchange, routing_key, cc, body, created) VALUES "
        "('task-defined', 'waiting1', '[]', '{}', 7), ('task-pending', 'waiting2', '[]', '{}', 8);",
    )
    storage = await open_storage(db_url)
    bus = RecordingBus()
    try:
        async with storage.reader() as session:
            assert [(e.id, e.message.routing_key) for e in await event_log.read(session, 0, 99, 10)] == [
                (1, "old1"),
                (2, "old2"),
            ]
            assert (await event_log.end(session)).newest == 2
        relay = OutboxRelay(storage, bus)
        assert await relay_all(relay) == [2]
        await write(storage, "new")
        assert await relay_all(relay) == [1]
        assert bus.keys == ["waiting1", "waiting2", "new"]
        async with storage.reader() as session:
            logged = await event_log.read(session, 0, 2**62, 10)
        assert [(e.id, e.message.routing_key) for e in logged] == [
            (1, "old1"),
            (2, "old2"),
            (3, "waiting1"),
            (4, "waiting2"),
            (5, "new"),
        ]
    finally:
        await bus.close()
        await storage.close()


async def _migrated_to_old_schema(db_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """`db_url` migrated up to OLD_SCHEMA only, as the last release before this scheme left it."""
    every = _queries.migrations
    monkeypatch.setattr(
        _queries,
        "migrations",
        lambda dialect: [m for m in every(dialect) if m[0] <= OLD_SCHEMA],
    )
    storage = await open_storage(db_url)
    await storage.close()
    monkeypatch.setattr(_queries, "migrations", every)
    return db_url


async def test_a_restore_into_a_cluster_whose_ids_are_behind_loses_nothing(db_url: str) -> None:
    """A dump restored into a new PostgreSQL cluster: its transaction ids start again lower than
    the dumped rows' and snapshots'. Opening the database re-dates them first."""
    need_postgres_url(db_url)
    storage = await open_storage(db_url)
    bus = RecordingBus()
    try:
        await write(storage, "published")
        await relay_all(OutboxRelay(storage, bus))
        await write(storage, "waiting")
    finally:
        await storage.close()
    far = 2**40  # the dumping cluster's ids: far ahead of this one's
    await execute_raw(
        db_url,
        f"UPDATE outbox SET xid = (xid::text::bigint + {far})::text::xid8;"
        "UPDATE outbox_relayed SET done = (pg_snapshot_xmin(done)::text::bigint + "
        f"{far} || ':' || pg_snapshot_xmax(done)::text::bigint + {far} || ':')::pg_snapshot",
    )
    storage = await open_storage(db_url)
    try:
        relay = OutboxRelay(storage, bus)
        await write(storage, "after")
        assert await relay_all(relay) == [2]
        assert bus.keys == ["published", "waiting", "after"]
        assert await logged_keys(storage) == bus.keys
    finally:
        await bus.close()
        await storage.close()


async def test_a_postgresql_older_than_13_is_refused_by_name(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its transaction ids have no xid8: opening says so, rather than failing in a migration."""
    need_postgres_url(db_url, "SQLite is part of taskyard: no server version to check")
    old = asyncpg.types.ServerVersion(12, 18, 0, "final", 0)
    monkeypatch.setattr(asyncpg.Connection, "get_server_version", lambda self: old)
    with pytest.raises(OldPostgres, match=r"is version 12\.18; taskyard needs 13 or later"):
        await open_storage(db_url)


def test_the_relays_notification_names_the_readers_its_batch_concerns() -> None:
    cc = '["route.index.p.v1", "route.x"]'
    assert event_log.readers_of([("task-completed", cc)]) == {"index"}
    assert event_log.readers_of([("task-pending", cc)]) == set()  # the indexer reads completions only
    notify_cc = '["route.notify.email.a@x.test.on-any"]'
    assert event_log.readers_of([("task-pending", notify_cc), ("task-completed", cc)]) == {"index", "notify"}
    assert event_log.readers_of([("task-group-resolved", notify_cc)]) == set()
    assert event_log.concerns("12 index notify", "index") and not event_log.concerns("12 notify", "index")
    assert not event_log.concerns("12", "notify")
    # Notifications lost (None), or another form (an older relay's): every reader looks.
    assert event_log.concerns(None, "index") and event_log.concerns("", "notify")
    assert event_log.newest_of("12 index") == 12 and event_log.newest_of("12") == 12
    assert event_log.newest_of(None) is None and event_log.newest_of("x") is None
