"""Connections the server closes by itself: the request head's timeout, and the file-descriptor limit.

uvicorn closes a kept-alive connection that stays idle `timeout_keep_alive` seconds after a
response, but it waits forever for the first request of a new connection, and for the rest of a
request head that arrives a byte at a time: a client that opens connections and sends nothing
(slowloris) would hold them, and their file descriptors, for as long as it likes.
`HeadTimeoutProtocol` is uvicorn's httptools protocol (the C parser: the pure-Python h11 one costs
a good share of the server's CPU) with one more timer: from the moment a connection opens, or a new
request head begins, the whole head must arrive within `head_timeout` seconds, or the connection is
closed without an answer.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)


class HeadTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request head takes too long to
    arrive. `head_timeout` is set on a subclass (`with_head_timeout`): uvicorn builds protocols."""

    head_timeout = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_timer is None:  # a new head begun on a kept-alive connection
            self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()  # the head arrived: the request is the app's now
        super().on_headers_complete()

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
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being answered
        if not self.transport.is_closing():
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
