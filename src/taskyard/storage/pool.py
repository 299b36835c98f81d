"""The PostgreSQL storage's connection pool: open connections handed out one caller at a time.

A small pool of our own rather than asyncpg's: that one costs about 40 µs of CPU to acquire and
release a connection (a proxy object, a future and a timeout each time, a reset coroutine on
release) and 10 µs more per statement through its proxy, where a request makes one to three
transactions of a few statements. Here the common case, an idle connection ready, is a pop from
a deque and an append back, with no await.

- At most `max_size` connections are open or opening. A caller that finds none idle opens one
  while there is room, else waits its turn: waiters are served first come, first served, each
  by the next connection released.
- The most recently released connection is handed out first, so that under light load the same
  few stay warm and the rest go idle; one idle longer than `max_idle` seconds is closed (a timer,
  not a check per call), down to one.
- A connection released closed or inside a transaction (a failure left it so) is not handed out
  again: it is terminated, and its room goes to the first waiter, which opens a new one.
- A waiter cancelled as it was handed a connection gives it back; nothing leaks under
  cancellation.
- Nothing is reset on release (asyncpg's pool sends UNLISTEN, RESET ALL ...: a round trip per
  transaction). taskyard leaves no session state behind but the statements it prepared, which are
  meant to stay: transactions end in COMMIT or ROLLBACK, advisory locks are transaction-scoped,
  LISTEN has a connection of its own.
- `close()` refuses new callers, fails the waiting ones, closes the idle connections and waits for
  those in use to come back; `terminate()` drops them all at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


class PoolClosed(Exception):
    """The pool was closed: it hands out no more connections."""


class ConnectionPool:
    """At most `max_size` connections made by `connect`, handed out one caller at a time (see the
    module's docstring). `acquire()` / `release()`; `take_idle()` for a caller that wants no wait."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[Any]],
        *,
        max_size: int,
        max_idle: float = 300.0,
    ) -> None:
        if max_size < 1:
            raise ValueError(f"a pool needs room for one connection at least, not {max_size}")
        self._connect = connect
        self.max_size = max_size
        self._max_idle = max_idle
        self._idle: deque[tuple[Any, float]] = deque()  # (connection, released at); newest on the right
        self._in_use: set[Any] = set()
        self._opening = 0
        # Futures of callers waiting their turn: each gets a connection, or None for room to open one.
        self._waiters: deque[asyncio.Future[Any]] = deque()
        self._retiring: asyncio.TimerHandle | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._all_back: asyncio.Event | None = None  # set by close() to wait for those in use
        self.closed = False

    @property
    def size(self) -> int:
        """Connections open or opening."""
        return len(self._idle) + len(self._in_use) + self._opening

    def take_idle(self) -> Any | None:
        """An idle connection if one is ready (the newest), else None: no wait, no await."""
        idle = self._idle
        while idle:
            conn, _ = idle.pop()
            if conn.is_closed():  # the server or the network closed it while it was idle
                continue
            self._in_use.add(conn)
            return conn
        return None

    async def acquire(self) -> Any:
        """A connection for this caller alone, until it gives it back with `release()`."""
        if self.closed:
            raise PoolClosed("the pool is closed")
        conn = self.take_idle()
        if conn is not None:
            return conn
        if self.size < self.max_size:
            return await self._open()
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            conn = await waiter
        except BaseException:
            if not waiter.done():
                self._waiters.remove(waiter)
            elif not waiter.cancelled() and waiter.exception() is None:
                self.release(waiter.result())  # handed one (or room) as it was cancelled
            raise
        if conn is None:  # room: a connection closed, and its place is this caller's
            self._opening -= 1
            return await self._open()
        return conn

    def release(self, conn: Any) -> None:
        """Give `conn` back: to the first waiter, else to the idle ones. A connection closed or left
        in a transaction is terminated instead, and its room handed on."""
        if conn is None:  # room handed to a waiter that went away
            self._opening -= 1
            self._room_freed()
            return
        self._in_use.discard(conn)
        if conn.is_closed() or conn.is_in_transaction():
            conn.terminate()
            self._room_freed()
            return
        if self.closed:
            self._close_later(conn)
            self._room_freed()
            return
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                self._in_use.add(conn)
                waiter.set_result(conn)
                return
        self._idle.append((conn, time.monotonic()))
        if self._retiring is None:
            self._retiring = asyncio.get_running_loop().call_later(self._max_idle, self._retire)

    def _room_freed(self) -> None:
        """One connection fewer: the first waiter may open one in its place."""
        if self._all_back is not None and not self._in_use and not self._opening:
            self._all_back.set()
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                self._opening += 1
                waiter.set_result(None)
                return

    async def _open(self) -> Any:
        self._opening += 1
        try:
            conn = await self._connect()
        except BaseException:
            self._opening -= 1
            self._room_freed()
            raise
        self._opening -= 1
        if self.closed:
            conn.terminate()
            self._room_freed()
            raise PoolClosed("the pool was closed while a connection was opening")
        self._in_use.add(conn)
        return conn

    def _retire(self) -> None:
        """Close the connections idle longer than `max_idle`, the oldest first, keeping one open."""
        self._retiring = None
        idle, old = self._idle, time.monotonic() - self._max_idle
        while len(idle) > 1 and idle[0][1] <= old:
            self._close_later(idle.popleft()[0])
        if len(idle) > 1:
            self._retiring = asyncio.get_running_loop().call_later(
                idle[0][1] + self._max_idle - time.monotonic(), self._retire
            )

    def _close_later(self, conn: Any) -> None:
        task = asyncio.get_running_loop().create_task(_close(conn))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Refuse new callers, fail the waiting ones, close the idle connections and wait for those in
        use to be released (a caller bounds the wait, then calls `terminate()`)."""
        self.closed = True
        self._stop_retiring()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(PoolClosed("the pool was closed"))
        idle = [conn for conn, _ in self._idle]
        self._idle.clear()
        await asyncio.gather(*(_close(conn) for conn in idle), *self._closing)
        if self._in_use or self._opening:
            self._all_back = asyncio.Event()
            await self._all_back.wait()
        await asyncio.gather(*self._closing)

    def terminate(self) -> None:
        """Drop every connection at once, idle or in use."""
        self.closed = True
        self._stop_retiring()
        for conn in [conn for conn, _ in self._idle] + list(self._in_use):
            conn.terminate()
        self._idle.clear()
        self._in_use.clear()

    def _stop_retiring(self) -> None:
        if self._retiring is not None:
            self._retiring.cancel()
            self._retiring = None

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """`acquire()` and `release()` around a block."""
        conn = await self.acquire()
        try:
            yield conn
        finally:
            self.release(conn)


async def _close(conn: Any) -> None:
    """Close `conn` politely, or drop it if that fails or takes over 5 s."""
    try:
        await asyncio.wait_for(conn.close(), timeout=5)
    except Exception as exc:
        log.debug("closing an idle connection failed (%r): dropped it", exc)
        conn.terminate()
