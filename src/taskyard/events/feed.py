"""The event feed: one per API process, it follows the event log and hands each new event to the
HTTP streams that want it.

The relay notifies `log.CHANNEL` after each batch it logs (in every process, through the
database's notifications on PostgreSQL); the feed then reads what is new, maps each event
through the deployment's profiles once, and offers the envelopes to every `Follower`. A feed
that heard nothing looks anyway every `poll_seconds`, in case a notification was lost.

A follower holds at most `buffer` events for its client. One that is full when an event comes is
dropped, with a log line, and its stream ends: a client that does not read cannot make the server
hold more than that for it. A follower registered at the feed's position, then replaying from the
log up to that position (`replay`), sees every event once, with no gap between the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from taskyard.events import log as event_log
from taskyard.events.memory import topic_matches
from taskyard.events.port import Envelope
from taskyard.events.profiles import Profiles
from taskyard.storage.port import Storage

log = logging.getLogger(__name__)
DEFAULT_BUFFER = 1000  # events a follower may hold for a client that reads slowly
PAGE = 500  # events read from the log at a time
_POSITION = re.compile(r"^(0|[1-9][0-9]{0,17})(?:\.(0|[1-9][0-9]{0,2}))?$")


@dataclass(frozen=True)
class Position:
    """A place in the log: after message `index` of event `seq`, or after all of it (`index` None).

    Its text is the stream's event id: `<seq>.<index>` for one message (an event may map to more
    than one: a `tc` and a `seed` exchange), `<seq>` for the end of an event.
    """

    seq: int
    index: int | None = None

    def __str__(self) -> str:
        return str(self.seq) if self.index is None else f"{self.seq}.{self.index}"

    @classmethod
    def parse(cls, text: str) -> Position | None:
        """The position `text` names; None if it is not one."""
        match = _POSITION.match(text)
        if match is None:
            return None
        return cls(int(match[1]), None if match[2] is None else int(match[2]))

    def before(self, seq: int, index: int) -> bool:
        """Whether message `index` of event `seq` comes after this position."""
        return seq > self.seq or (seq == self.seq and self.index is not None and index > self.index)


@dataclass(frozen=True)
class Item:
    """One message for a client: where it is in the log, and the envelope."""

    position: Position
    envelope: Envelope


@dataclass(frozen=True)
class Missed:
    """The log no longer holds the events after `after` up to `through`: the client missed them."""

    after: Position
    through: int


Binding = tuple[str, str]  # (full exchange name, AMQP topic pattern)


def wanted(bindings: Sequence[Binding], envelope: Envelope) -> bool:
    """Whether a binding takes `envelope`: its exchange, and its pattern matching the routing key or
    a CC key (AMQP's rules; delivered once however many match)."""
    keys = (envelope.routing_key, *envelope.cc)
    return any(e == envelope.exchange and any(topic_matches(p, k) for k in keys) for e, p in bindings)


class Dropped(Exception):
    """The follower is over: dropped (its client did not read fast enough), or ended by the server."""


class Follower:
    """What one stream's client is sent: the events after `start` its bindings take, buffered."""

    def __init__(self, bindings: Sequence[Binding], start: int, buffer: int) -> None:
        self.bindings = tuple(bindings)
        self.start = start
        self.limit = buffer
        self._items: deque[Item] = deque()
        self._arrived = asyncio.Event()
        self.dropped = asyncio.Event()  # set when given up on: its client may not be reading at all
        self._ended = False

    @property
    def held(self) -> int:
        return len(self._items)

    def offer(self, seq: int, envelopes: Sequence[Envelope]) -> bool:
        """Take the envelopes of event `seq` the bindings want; False (and nothing taken) when full."""
        taken = [Item(Position(seq, i), e) for i, e in enumerate(envelopes) if wanted(self.bindings, e)]
        if not taken:
            return True
        if len(self._items) + len(taken) > self.limit:
            self._items.clear()
            self.dropped.set()
            self._arrived.set()
            return False
        self._items.extend(taken)
        self._arrived.set()
        return True

    def end(self) -> None:
        """End the stream once what it holds is sent (the server is stopping)."""
        self._ended = True
        self._arrived.set()

    async def next(self, timeout: float) -> list[Item]:
        """What arrived since the last call, waiting up to `timeout` seconds ([]: nothing came);
        Dropped once the follower has been dropped."""
        if not self._items and not self.dropped.is_set() and not self._ended:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._arrived.wait()
        if self.dropped.is_set() or (self._ended and not self._items):
            raise Dropped()
        self._arrived.clear()
        items = list(self._items)
        self._items.clear()
        return items


class EventFeed:
    """Follows the event log for this process's streams."""

    def __init__(
        self,
        storage: Storage,
        profiles: Profiles,
        *,
        buffer: int = DEFAULT_BUFFER,
        poll_seconds: float = 2.0,
    ) -> None:
        self._storage = storage
        self.profiles = profiles
        self.buffer = buffer
        self._poll = poll_seconds
        self._wake = asyncio.Event()
        self._followers: set[Follower] = set()
        self._task: asyncio.Task[None] | None = None
        self._reading = asyncio.Lock()  # one catch-up at a time, or two would hand out the same events
        self.position = 0  # the newest event handed to the followers
        self.dropped = 0  # followers dropped for not reading, since the start

    async def start(self) -> None:
        """Start at the end of the log: streams see what is published from now on (or replay)."""
        async with self._storage.reader() as session:
            self.position = (await event_log.end(session)).newest
        await self._storage.listen(event_log.CHANNEL, self._published)
        self._task = asyncio.create_task(self._run(), name="event-feed")

    def _published(self, payload: str | None) -> None:
        """A relay (of any process) logged events up to id `payload`. With no follower and no
        catch-up under way, the position moves there without reading the log; else a catch-up
        hands the followers what is new."""
        newest = event_log.newest_of(payload)
        if not self._followers and not self._reading.locked() and newest is not None:
            self.position = max(self.position, newest)
            return
        self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.end_streams()

    def end_streams(self, grace: float = 5.0) -> None:
        """End every stream once what it holds is sent: the server is stopping. A stream still
        sending after `grace` seconds (its client does not read) is given up on."""
        loop = asyncio.get_running_loop()
        for follower in self._followers:
            follower.end()
            loop.call_later(grace, follower.dropped.set)

    @property
    def followers(self) -> int:
        return len(self._followers)

    def follow(self, bindings: Sequence[Binding]) -> Follower:
        """A follower of every event after the feed's position; `leave()` it when done."""
        follower = Follower(bindings, self.position, self.buffer)
        self._followers.add(follower)
        return follower

    def leave(self, follower: Follower) -> None:
        self._followers.discard(follower)

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.catch_up()
            except Exception:  # a database outage: the next look tries again
                log.warning("the event feed cannot read the event log; trying again", exc_info=True)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._poll):
                    await self._wake.wait()

    async def catch_up(self) -> None:
        """Hand the followers every event logged after the position. With no follower there is
        nobody to hand them to: the position moves to the end of the log without reading it."""
        async with self._reading:
            if not self._followers:
                async with self._storage.reader() as session:
                    newest = (await event_log.end(session)).newest
                if not self._followers:  # none came while reading, so none started before `newest`
                    self.position = max(self.position, newest)
                    return
            while True:
                async with self._storage.reader() as session:
                    logged = await event_log.read(session, self.position, 2**62, PAGE)
                for entry in logged:
                    self._deliver(entry.id, self.profiles.map(entry.message))
                if len(logged) < PAGE:
                    return

    def _deliver(self, seq: int, envelopes: list[Envelope]) -> None:
        self.position = seq
        for follower in list(self._followers):
            if not follower.offer(seq, envelopes):
                self._followers.discard(follower)
                self.dropped += 1
                log.warning(
                    "dropped an event stream: its client did not read its events (%d held, the most "
                    "a stream may hold); it may reconnect with Last-Event-ID",
                    follower.limit,
                )

    async def replay(
        self, after: Position, upto: int, bindings: Sequence[Binding]
    ) -> AsyncIterator[Item | Missed]:
        """The messages after `after` up to event `upto` that `bindings` take, read from the log;
        a `Missed` first if the log was pruned past `after`."""
        cursor = after.seq if after.index is None else after.seq - 1
        while cursor < upto:
            async with self._storage.reader() as session:
                pruned = (await event_log.end(session)).pruned
                if pruned > cursor:
                    yield Missed(after, pruned)
                    cursor = pruned
                logged = await event_log.read(session, cursor, upto, PAGE)
            for entry in logged:
                for index, envelope in enumerate(self.profiles.map(entry.message)):
                    if after.before(entry.id, index) and wanted(bindings, envelope):
                        yield Item(Position(entry.id, index), envelope)
            if len(logged) < PAGE:
                return
            cursor = logged[-1].id
