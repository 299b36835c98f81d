"""Wake-ups for claimWork (a waiting worker learns at once that its task queue has work) and for
live-log followers (a new chunk was appended).

A commit that makes a run pending calls `notify(task_queue_id)` (in this process directly, in
others through the database's notifications). Each notification wakes one waiter. A waiter
that leaves without using a wake-up it received passes it on, so none is lost. When
notifications may have been lost (the database's notification connection was down), storage
calls `notify(None)`: every waiter wakes and looks again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Iterator
from contextvars import ContextVar

# Called (if set) as a claimWork long poll begins to wait: the API hands back the request's turn
# to be worked on, since waiting takes none (api/shedding.py). Set per request, in its context.
BEFORE_WAITING: ContextVar[Callable[[], None] | None] = ContextVar("taskyard_before_waiting", default=None)


def before_waiting() -> None:
    """Tell the caller's API request that it waits now, doing no work until woken."""
    hand_back = BEFORE_WAITING.get()
    if hand_back is not None:
        hand_back()


class Waiter:
    def __init__(self, signals: PendingSignals, task_queue_id: str) -> None:
        self._signals = signals
        self._task_queue_id = task_queue_id
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._used = False

    async def wait(self, timeout: float, gone: asyncio.Event) -> bool:
        """Wait up to `timeout` seconds, or until `gone` is set or the server closes; True if woken."""
        before_waiting()
        stop: asyncio.Future[bool] = asyncio.ensure_future(gone.wait())
        closing: asyncio.Future[bool] = asyncio.ensure_future(self._signals.closing.wait())
        either: set[asyncio.Future[None] | asyncio.Future[bool]] = {self.future, stop, closing}
        try:
            await asyncio.wait(either, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            closing.cancel()
        # A wake-up that arrives as the worker leaves is not used: leaving passes it on.
        left = gone.is_set() or self._signals.closing.is_set()
        self._used = self.future.done() and not self.future.cancelled() and not left
        return self._used

    def pass_on(self) -> None:
        """This waiter will not use a wake-up: hand any it got to the next waiter."""
        self._used = False

    def __enter__(self) -> Waiter:
        self._signals._waiters.setdefault(self._task_queue_id, deque()).append(self.future)
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.future.done():
            self.future.cancel()
        elif not self._used and not self.future.cancelled():
            self._signals.notify(self._task_queue_id)


class PendingSignals:
    def __init__(self) -> None:
        self._waiters: dict[str, deque[asyncio.Future[None]]] = {}
        # Set as the server stops: every claimWork long poll answers what it has (nothing) at once,
        # rather than holding the server's shutdown for the rest of its timeout.
        self.closing = asyncio.Event()

    def close(self) -> None:
        """The server is stopping: end every long poll now, and any that begins from now on."""
        self.closing.set()

    def waiter(self, task_queue_id: str) -> Waiter:
        """Register interest before looking for work, so a commit in between is not missed."""
        return Waiter(self, task_queue_id)

    def notify(self, task_queue_id: str | None) -> None:
        """Wake one waiter of `task_queue_id`, if any is waiting; None: every waiter of every queue."""
        if task_queue_id is None:
            for queue_waiters in list(self._waiters.values()):
                for future in queue_waiters:
                    if not future.done():
                        future.set_result(None)
            return
        waiting = self._waiters.get(task_queue_id)
        while waiting:
            future = waiting.popleft()
            if not future.done():
                future.set_result(None)
                return
        self._waiters.pop(task_queue_id, None)

    def waiting(self, task_queue_id: str) -> int:
        return sum(1 for f in self._waiters.get(task_queue_id, ()) if not f.done())


class Followers:
    """Wake-ups for live-log followers: every follower of a run wakes on each append to its log.

    Unlike claimWork's wake-ups, one is not handed to a single waiter: every follower streams the
    new chunk. A follower registers before it reads, so an append in between is not missed.
    """

    def __init__(self) -> None:
        self._events: dict[str, set[asyncio.Event]] = {}
        self.closed = False

    @contextlib.contextmanager
    def watch(self, key: str) -> Iterator[asyncio.Event]:
        """An event set by each `notify(key)` while the block runs."""
        event = asyncio.Event()
        self._events.setdefault(key, set()).add(event)
        try:
            yield event
        finally:
            watching = self._events.get(key, set())
            watching.discard(event)
            if not watching:
                self._events.pop(key, None)

    def notify(self, key: str | None) -> None:
        """Wake every follower of `key`; None: every follower of every log (notifications were lost)."""
        watched = self._events.values() if key is None else [self._events.get(key, set())]
        for events in watched:
            for event in events:
                event.set()

    def watching(self, key: str) -> int:
        return len(self._events.get(key, ()))

    def count(self) -> int:
        """Followers of every log."""
        return sum(len(events) for events in self._events.values())

    def close(self) -> None:
        """The server is stopping: wake every follower, to send what is stored and end."""
        self.closed = True
        for events in self._events.values():
            for event in events:
                event.set()


class EmptyPollQueues:
    """Which poll queues this process knows to be empty, and until when, so that a worker polling
    the empty queues above its work (a poll worker reads every priority in order: docs/poll.md)
    costs no query.

    A queue is marked empty after a query found no visible message in it, until the first of its
    messages that is invisible now becomes visible again (forever when it has none). Every commit
    that can make a message visible early clears the mark, in this process and others: a new
    pending run by its PENDING_CHANNEL notification (every poll queue of its task queue), a
    message moved by a priority change or an Update Message that shortens a visibility by one on
    POLL_CHANNEL with the queue's name. A query that began before a notification for its queue
    arrived can't set a mark (`snapshot`), so a message committed during the query is never
    hidden. Notifications possibly lost (`heard(None)`) clear everything.
    """

    LIMIT = 50_000  # names remembered; past it, everything is forgotten (and marks start afresh)

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._changed: dict[str, int] = {}  # queue name -> the `_heard` count of its last notification
        self._heard = 0
        self._reset = 0  # snapshots older than this may have missed a forgotten notification

    def snapshot(self) -> int:
        """Take before querying a queue; give to `mark_empty` after."""
        return self._heard

    def is_empty(self, name: str, now: int) -> bool:
        return self._until.get(name, -1) > now

    def mark_empty(self, name: str, snapshot: int, until: float) -> None:
        """The query begun at `snapshot` found no visible message in `name` before `until`."""
        if snapshot >= self._reset and self._changed.get(name, -1) <= snapshot:
            if len(self._until) >= self.LIMIT:
                self._until.clear()
            self._until[name] = until

    def heard(self, name: str | None) -> None:
        """A notification on POLL_CHANNEL: `name` may have a visible message now (None: any may)."""
        self._heard += 1
        if name is None or len(self._changed) >= self.LIMIT:
            self._until.clear()
            self._changed.clear()
            self._reset = self._heard
        if name is not None:
            self._until.pop(name, None)
            self._changed[name] = self._heard
