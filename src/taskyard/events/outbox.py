"""The outbox relay: publishes committed events in commit order, and logs what it published.

Every state change writes its events into the `outbox` table in its own transaction. The
relay reads them after commit and publishes them: an event is published at least once, never
for a change that rolled back. Only one relay works at a time across processes (an advisory
lock), which keeps the order.

The relay takes a batch and publishes it inside one transaction, which records the batch as
published only once the bus accepted all of it (RabbitMQ: confirmed every message). If the
publish fails the transaction rolls back and the batch is taken again. While the bus is
unavailable the relay waits for it to come back rather than retrying against it.

On SQLite (`Storage.one_writer`) a transaction open across the broker's confirms would keep every
other write of the process waiting for them. There the relay reads the batch, publishes it, and
then records it in a transaction of its own, if no relay recorded it meanwhile (its first event
is still the next to publish); else it was published twice, which at least once allows. A crash
between the publish and the record publishes the batch again after the restart. One process has
the database (its data directory's lock), and in it the relays of one storage take turns.

A published event stays in the outbox: the outbox is the event log's store, and the same
transaction appends the batch's ids to the event log (log.py), which the HTTP event stream
follows, so an event is in the log exactly when the bus accepted it. Its row goes when the log's
retention prunes it. Which events are published is the database's to tell: on SQLite, those up
to an id (one writer: ids grow in commit order); on PostgreSQL, where transactions commit in
another order than they took their ids, those a snapshot shows (migration 0013's comment).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Sequence

import orjson

from taskyard.events import log as event_log
from taskyard.events.port import BusUnavailable, EventBus
from taskyard.model import dates
from taskyard.model.messages import Message
from taskyard.model.outages import Outage
from taskyard.storage.port import DatabaseUnavailable, Row, Storage, Tx

log = logging.getLogger(__name__)
_RELAY_LOCK = 0x7A5C_0002
BATCH = 500
GATHER_SECONDS = 0.002


async def append_tx(tx: Tx, messages: Sequence[Message], *, now: int) -> None:
    """Write `messages` to the outbox inside the caller's transaction, dated `now` (epoch ms)."""
    if messages:
        await tx.defer_many("insert_event", [(*_columns(m), now) for m in messages])


async def append_in_one_tx(tx: Tx, messages: Sequence[Message], *, now: int) -> None:
    """`append_tx` in one statement however many messages there are (a JSON list of their rows, in
    order): for the events of a batch of changes."""
    if messages:
        await tx.execute("insert_events", orjson.dumps([_columns(m) for m in messages]).decode(), now)


def _columns(m: Message) -> tuple[str, str, str, str]:
    """An event's outbox columns: exchange, routing key, and its CC list and body as JSON."""
    return (m.exchange, m.routing_key, orjson.dumps(m.cc).decode(), orjson.dumps(m.body).decode())


class OutboxRelay:
    """Moves events from the outbox to the bus; `kick()` after a commit wakes it at once."""

    def __init__(
        self,
        storage: Storage,
        bus: EventBus,
        *,
        idle_seconds: float = 1.0,
        clock: event_log.Clock = dates.now_ms,
    ) -> None:
        self._storage = storage
        self._bus = bus
        self._clock = clock
        self._idle = idle_seconds
        self._wake = asyncio.Event()

    def kick(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Relay until cancelled. An unavailable database is logged once per outage."""
        outage = Outage()
        while True:
            try:
                # Again at once only after a full batch: a partial one took every event committed
                # when it read, and a commit since has woken the relay (`kick`). Going again until
                # a batch came back empty cost a transaction of three round trips after each wake.
                while await self.relay_once() >= BATCH:
                    # On SQLite a batch is worked on whole in one step of the event loop (the
                    # writer runs on the loop): the next waits for the loop's next turn, so that
                    # a backlog is relayed a batch per turn, not all of it in one.
                    await asyncio.sleep(0)
            except BusUnavailable:
                # The bus logs its outages; the events stay in the outbox until it is back.
                await self._bus.wait_ready()
                continue
            except DatabaseUnavailable as exc:
                if outage.begins(time.monotonic()):
                    log.warning("outbox relay: %s; the events wait in the outbox", exc)
            except Exception:
                log.exception("outbox relay failed; retrying")
            else:
                _, lasted = outage.ends(time.monotonic())
                if lasted is not None:
                    log.info("outbox relay: the database is back after %.1f s", lasted)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._idle):
                    await self._wake.wait()
                # Let the commits of the next few milliseconds join this batch: one relay
                # transaction for many events rather than one per commit.
                await asyncio.sleep(GATHER_SECONDS)
            self._wake.clear()

    async def relay_once(self) -> int:
        """Publish one batch and record it published; answer how many events it held.

        The record commits only if the publish returned: a publish that raises leaves the batch
        to be taken again.
        """
        if self._storage.one_writer:
            async with _turns.setdefault(self._storage, asyncio.Lock()):
                return await self._publish_then_record()
        async with self._storage.transaction() as tx:
            await tx.defer("lock_relay", _RELAY_LOCK)
            # One more than a batch: whether the batch ends its window (PostgreSQL's), so that a
            # window left open always holds another event.
            rows = await tx.fetch("take_events", BATCH + 1)
            batch = rows[:BATCH]
            if batch:
                await self._record_tx(tx, rows)
                await self._bus.publish([_message(r) for r in batch])
        return len(batch)

    async def _record_tx(self, tx: Tx, rows: list[Row]) -> None:
        """Record the batch `rows[:BATCH]` published in `tx`: its ids appended to the event log, and
        where the relay got to (`rows` holds one event more if there is one: whether the batch
        ends its window)."""
        batch = rows[:BATCH]
        last = batch[-1]
        readers = event_log.readers_of((r["exchange"], r["cc"]) for r in batch)
        await event_log.append_tx(tx, [int(r["id"]) for r in batch], self._clock(), readers)
        await tx.defer("relayed", last["window_end"], last["xid"], last["id"], len(rows) <= BATCH)

    async def _publish_then_record(self) -> int:
        """`relay_once` with no transaction open while the bus publishes (see the module's docstring)."""
        async with self._storage.reader() as session:
            rows = await session.fetch("take_events", BATCH + 1)
        batch = rows[:BATCH]
        if not batch:
            return 0
        await self._bus.publish([_message(r) for r in batch])
        async with self._storage.transaction() as tx:
            await tx.defer("lock_relay", _RELAY_LOCK)
            still = await tx.fetch("take_events", 1)
            if not still or still[0]["id"] != batch[0]["id"]:
                log.info("outbox relay: a batch was recorded by another relay meanwhile; published twice")
                return len(batch)
            await self._record_tx(tx, rows)
        return len(batch)


# The relays of one `one_writer` storage in this process take turns (see `_publish_then_record`).
_turns: weakref.WeakKeyDictionary[Storage, asyncio.Lock] = weakref.WeakKeyDictionary()


def _message(row: Row) -> Message:
    return Message(row["exchange"], row["routing_key"], orjson.loads(row["body"]), orjson.loads(row["cc"]))
