"""The relay records a batch published only once the bus accepted all of it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import pytest

from taskyard.events import log as event_log
from taskyard.events import outbox
from taskyard.events.feed import EventFeed
from taskyard.events.memory import MemoryBus
from taskyard.events.outbox import OutboxRelay
from taskyard.events.port import BusUnavailable, Envelope
from taskyard.events.profiles import TC_PREFIX, Profiles
from taskyard.model.guard import ALLOW_ALL
from taskyard.model.messages import Message
from taskyard.queue import tasks
from taskyard.queue.service import Queue
from taskyard.storage import open_storage
from taskyard.storage.port import WAIT_TIMEOUT, Session, Storage
from tests.conftest import FakeClock, new_queue, until
from tests.queue.helpers import definition, new_id


class FlakyBus(MemoryBus):
    """A memory bus that refuses to publish while `down`, as a broker that is away would."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True
        self.attempts = 0
        self.up = asyncio.Event()
        self.pending: list[str] = []
        self.subscribe(TC_PREFIX + "task-pending", "#", lambda e: self.pending.append(e.routing_key))

    async def publish(self, messages: Sequence[Message]) -> None:
        self.attempts += 1
        if self.down:
            raise BusUnavailable("the broker is away")
        await super().publish(messages)

    async def wait_ready(self) -> None:
        await self.up.wait()

    def come_back(self) -> None:
        self.down = False
        self.up.set()


async def test_a_failed_publish_leaves_the_batch_unpublished(
    queue: Queue, storage: Storage, clock: FakeClock
) -> None:
    bus = FlakyBus()
    relay = OutboxRelay(storage, bus)
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now), guard=ALLOW_ALL)
    with pytest.raises(BusUnavailable):
        await relay.relay_once()
    with pytest.raises(BusUnavailable):  # the same batch again: nothing was recorded
        await relay.relay_once()
    bus.come_back()
    assert await relay.relay_once() == 2
    assert await relay.relay_once() == 0
    await bus.flush()
    assert bus.pending == [f"primary.{task_id}.0._._.test-prov.test-worker.-.{task_id}._"]
    await bus.close()


async def test_the_relay_waits_for_an_unavailable_bus_quietly(
    storage: Storage, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    bus = FlakyBus()
    relay = OutboxRelay(storage, bus, idle_seconds=0.01)
    queue = new_queue(storage, clock, events_committed=relay.kick)
    running = asyncio.create_task(relay.run())
    try:
        await tasks.create_task(queue, new_id(), definition(clock.now), guard=ALLOW_ALL)
        await until(lambda: bus.attempts >= 1)
        for _ in range(3):  # commits go on; the relay does not hammer the bus meanwhile
            await tasks.create_task(queue, new_id(), definition(clock.now), guard=ALLOW_ALL)
        await asyncio.sleep(0.1)
        assert bus.attempts == 1 and caplog.records == []
        bus.come_back()
        await until(lambda: len(bus.pending) == 4)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await bus.close()


class RecordingBus(MemoryBus):
    def __init__(self) -> None:
        super().__init__()
        self.published: list[Message] = []

    async def publish(self, messages: Sequence[Message]) -> None:
        self.published += messages
        await super().publish(messages)


async def test_the_event_log_holds_what_the_bus_was_given(
    queue: Queue, storage: Storage, clock: FakeClock
) -> None:
    # The relay logs the outbox's text as it is, without decoding and encoding it again.
    bus = RecordingBus()
    relay = OutboxRelay(storage, bus, clock=clock)
    await tasks.create_task(queue, new_id(), definition(clock.now), guard=ALLOW_ALL)
    assert await relay.relay_once() == 2
    async with storage.reader() as session:
        logged = await event_log.read(session, 0, 2**62, 10)
    assert [entry.message for entry in logged] == bus.published
    assert [m.exchange for m in bus.published] == ["task-defined", "task-pending"]
    await bus.close()


class CountingProfiles(Profiles):
    def __init__(self) -> None:
        super().__init__()
        self.mapped = 0

    def map(self, message: Message) -> list[Envelope]:
        self.mapped += 1
        return super().map(message)


async def test_the_memory_bus_maps_a_message_only_for_subscribers() -> None:
    profiles = CountingProfiles()
    bus = MemoryBus(profiles)
    message = Message("task-pending", "primary.k", {"status": {}}, ["route.r"])
    await bus.publish([message])
    await bus.flush()
    assert profiles.mapped == 0  # nobody listens: nothing to map
    got: list[Envelope] = []
    await bus.publish([message])
    bus.subscribe(TC_PREFIX + "task-pending", "route.#", got.append)  # before the dispatcher runs
    await bus.flush()
    assert profiles.mapped == 1
    assert got == [Envelope(TC_PREFIX + "task-pending", "primary.k", {"status": {}}, ["route.r"])]
    await bus.close()


async def test_a_feed_without_followers_skips_to_the_end_of_the_log(
    queue: Queue, storage: Storage, clock: FakeClock
) -> None:
    feed = EventFeed(storage, Profiles(), poll_seconds=60.0)
    relay = OutboxRelay(storage, MemoryBus(), clock=clock)
    await tasks.create_task(queue, new_id(), definition(clock.now), guard=ALLOW_ALL)
    await relay.relay_once()
    async with storage.reader() as session:
        newest = (await event_log.end(session)).newest
    await feed.catch_up()
    assert feed.position == newest
    follower = feed.follow([(TC_PREFIX + "task-defined", "#")])  # from here on, every event is handed on
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now), guard=ALLOW_ALL)
    await relay.relay_once()
    await feed.catch_up()
    items = await follower.next(0)
    assert [item.envelope.routing_key.split(".")[1] for item in items] == [task_id]
    assert feed.position == newest + 2
    feed.leave(follower)


async def test_a_backlog_is_relayed_a_batch_per_turn_of_the_loop(
    queue: Queue, storage: Storage, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbox, "BATCH", 1)
    for _ in range(2):
        await tasks.create_task(queue, new_id(), definition(clock.now), guard=ALLOW_ALL)
    loop_turn = 0
    published_in: list[int] = []

    class TurnNoting(MemoryBus):
        async def publish(self, messages: Sequence[Message]) -> None:
            published_in.append(loop_turn)
            await super().publish(messages)

    async def count_loop_turns() -> None:
        nonlocal loop_turn
        while True:
            await asyncio.sleep(0)
            loop_turn += 1

    bus = TurnNoting()
    counter = asyncio.create_task(count_loop_turns())
    running = asyncio.create_task(OutboxRelay(storage, bus).run())
    try:
        await until(lambda: len(published_in) == 4)
    finally:
        for task in (running, counter):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await bus.close()
    assert len(set(published_in)) == 4  # each batch in a turn of its own


async def test_with_no_stream_open_the_feed_follows_the_log_without_reading_it(
    queue: Queue, storage: Storage, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay's notification carries the log's newest id: a feed nobody follows takes it from
    there, where it read the log's end after every batch."""
    feed = EventFeed(storage, Profiles(), poll_seconds=60.0)
    reads: list[str] = []
    ends, reads_of = event_log.end, event_log.read

    async def counted_end(session: Session) -> event_log.End:
        reads.append("end")
        return await ends(session)

    async def counted_read(session: Session, after: int, upto: int, limit: int) -> list[event_log.Logged]:
        reads.append("read")
        return await reads_of(session, after, upto, limit)

    monkeypatch.setattr(event_log, "end", counted_end)
    monkeypatch.setattr(event_log, "read", counted_read)
    await feed.start()
    await until(lambda: reads == ["end", "end"])  # where it starts, and its first look
    relay = OutboxRelay(storage, MemoryBus(), clock=clock)
    try:
        for _ in range(3):
            await tasks.create_task(queue, new_id(), definition(clock.now), guard=ALLOW_ALL)
            await relay.relay_once()
        async with storage.reader() as session:
            newest = (await ends(session)).newest
        await until(lambda: feed.position == newest)  # PostgreSQL's notifications take a moment
        assert reads == ["end", "end"]
        follower = feed.follow([(TC_PREFIX + "task-defined", "#")])  # a stream: now it reads the log
        task_id = new_id()
        await tasks.create_task(queue, task_id, definition(clock.now), guard=ALLOW_ALL)
        await relay.relay_once()
        items = await follower.next(5.0)
        assert [item.envelope.routing_key.split(".")[1] for item in items] == [task_id]
        assert "read" in reads
        feed.leave(follower)
    finally:
        await feed.close()


async def test_the_relay_stops_when_cancelled_as_it_is_woken(storage: Storage) -> None:
    """A cancel that arrives in the same turn as a wake-up ends the relay (asyncio.wait_for of
    Python 3.11 answered the wake-up instead and swallowed the cancel: the relay ran on, and a
    server's shutdown waited for it for ever)."""
    relay = OutboxRelay(storage, MemoryBus(), idle_seconds=60)
    running = asyncio.create_task(relay.run())
    for _ in range(50):  # until it waits to be woken: its first look found nothing
        await asyncio.sleep(0.01)
    relay.kick()
    running.cancel()
    try:
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(5):
                await running
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


class HeldBus(RecordingBus):
    """A bus whose publish waits until `release` is set, as one waiting for a broker's confirms."""

    def __init__(self) -> None:
        super().__init__()
        self.publishing = asyncio.Event()
        self.release = asyncio.Event()

    async def publish(self, messages: Sequence[Message]) -> None:
        self.publishing.set()
        await self.release.wait()
        await super().publish(messages)


async def test_writes_go_on_while_the_relay_waits_for_the_bus(
    queue: Queue, storage: Storage, clock: FakeClock
) -> None:
    """On SQLite, whose one writer a transaction holds, the relay holds none while the bus has its
    batch: a createTask meanwhile commits at once (on PostgreSQL it always did). The batch is
    recorded after the publish, and the next batch holds just what came after."""
    bus = HeldBus()
    relay = OutboxRelay(storage, bus, clock=clock)
    await tasks.create_task(queue, new_id(), definition(clock.now), guard=ALLOW_ALL)
    relaying = asyncio.create_task(relay.relay_once())
    await bus.publishing.wait()
    token = WAIT_TIMEOUT.set(10.0)  # waiting for the writer that long: DatabaseBusy
    try:
        await tasks.create_task(queue, new_id(), definition(clock.now), guard=ALLOW_ALL)
    finally:
        WAIT_TIMEOUT.reset(token)
        bus.release.set()
    assert await relaying == 2
    assert await relay.relay_once() == 2
    async with storage.reader() as session:
        logged = await event_log.read(session, 0, 2**62, 10)
    assert [entry.message for entry in logged] == bus.published
    assert len(bus.published) == 4
    await bus.close()


async def test_a_batch_another_relay_recorded_meanwhile_is_logged_once(
    queue: Queue, storage: Storage, clock: FakeClock, db_url: str
) -> None:
    """Two storages on one SQLite file (two relays that do not take turns): while the first waits
    for its bus, the second publishes and records the same batch. The first's publish then counts
    as a second one, and is not logged again."""
    if not storage.one_writer:
        pytest.skip("PostgreSQL's relay publishes inside its transaction")
    other = await open_storage(db_url)
    held, quick = HeldBus(), RecordingBus()
    try:
        await tasks.create_task(queue, new_id(), definition(clock.now), guard=ALLOW_ALL)
        first = asyncio.create_task(OutboxRelay(storage, held, clock=clock).relay_once())
        await held.publishing.wait()
        assert await OutboxRelay(other, quick, clock=clock).relay_once() == 2
        held.release.set()
        assert await first == 2
        async with storage.reader() as session:
            logged = await event_log.read(session, 0, 2**62, 10)
        assert [entry.message for entry in logged] == quick.published == held.published
    finally:
        await other.close()
        await held.close()
        await quick.close()


async def test_a_wake_is_one_relay_transaction_not_one_more_that_finds_nothing(
    storage: Storage, clock: FakeClock
) -> None:
    """A partial batch took every event committed when it read; a commit since kicks the relay. So
    the relay goes back to waiting rather than run another transaction to find the outbox empty
    (three round trips on PostgreSQL after every wake)."""
    relay = OutboxRelay(storage, MemoryBus(), idle_seconds=3600)
    rounds: list[int | None] = []
    relay_once = relay.relay_once

    async def counted() -> int:
        rounds.append(None)
        rounds[-1] = await relay_once()
        return rounds[-1]

    relay.relay_once = counted  # type: ignore[method-assign]
    queue = new_queue(storage, clock, events_committed=relay.kick)
    running = asyncio.create_task(relay.run())
    try:
        await until(lambda: rounds == [0])  # the round it starts with, then it waits
        await tasks.create_task(queue, new_id(), definition(clock.now), guard=ALLOW_ALL)
        await until(lambda: 2 in rounds)
        for _ in range(10):  # time for a round that would follow at once
            await asyncio.sleep(0)
        assert rounds == [0, 2]
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
