"""Connections the server closes by itself: the request head's timeout, and the file-descriptor limit.

uvicorn closes a kept-alive connection that stays idle `timeout_keep_alive` seconds after a
response, but it waits forever for the first request of a new connection, and for the rest of a
request head that arrives a byte at a time: a client that opens connections and sends nothing
(slowloris) would hold them, and their file descriptors, for as long as it likes.
`HeadTimeoutProtocol` is uvicorn's h11 protocol with one more timer: from the moment a connection
opens, or the first bytes of a new request head arrive, the whole head must arrive within
`head_timeout` seconds, or the connection is closed without an answer.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)


class HeadTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head takes too long to arrive.
    `head_timeout` is set on a subclass (`with_head_timeout`): uvicorn builds protocols itself."""

    head_timeout = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # a head begun (or nothing yet): it must be done in time
            if self._head_timer is None:
                self._arm()
        else:  # the head arrived: the request is the app's now
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is not h11.IDLE or (
            self.cycle is not None and not self.cycle.response_complete
        ):
            return  # a request is being answered
        if self.transport.is_closing():
            return
        if self.conn.our_state is h11.IDLE:  # h11 lets a server close only from a state it allows
            self.conn.send(h11.ConnectionClosed())
        self.transport.close()


def with_head_timeout(seconds: float) -> type[HeadTimeoutProtocol]:
    """The protocol class to give uvicorn, closing connections whose head takes over `seconds`."""
    return type("HeadTimeoutProtocol", (HeadTimeoutProtocol,), {"head_timeout": seconds})


def raise_open_files_limit() -> int:
    """Raise this process's limit on open files (RLIMIT_NOFILE) to the most it may have: each
    connection is one, and the usual soft limit of 1,024 is below what a server holds under load
    (thousands of claimWork long polls). Answers the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open-files limit from %d to %d: %s", soft, wanted, exc)
        return soft
    return wanted
