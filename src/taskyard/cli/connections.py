"""Connections the server closes by itself: the request head's timeout, and the file-descriptor limit.

uvicorn closes a kept-alive connection that stays idle `timeout_keep_alive` seconds after a
response, but it waits forever for the first request of a new connection, and for the rest of a
request head that arrives a byte at a time: a client that opens connections and sends nothing
(slowloris) would hold them, and their file descriptors, for as long as it likes.
`HeadTimeoutProtocol` is uvicorn's httptools protocol (the C parser: the pure-Python h11 one costs
a good share of the server's CPU) with one more timer: from the moment a connection opens, or a new
request head begins, the whole head must arrive within `head_timeout` seconds, or the connection is
closed without an answer. The body, if any, must then arrive within `body_timeout` seconds, plus
one for each `BODY_RATE` bytes of it (a large upload at a fair pace is not cut short), or the
request is answered 408 `RequestTimeout` and the connection closed: the app, which was waiting for
the body, sees the client gone, so a client that sends a head and then its body a byte at a time
(or never) holds its connection and request only that long (and no place in flight meanwhile).

It also caps the connections one client address holds at once (`max_per_client`, the
`--max-connections-per-client` option): one beyond is answered 503 `ServiceUnavailable` with
`Retry-After` at once, before anything of it is read, and closed. The address is the peer's; a
trusted proxy's (uvicorn's `FORWARDED_ALLOW_IPS`, by default 127.0.0.1 and ::1) is not capped,
since every client behind it comes from it: the proxy caps its clients itself. So loopback
clients (the local worker of `taskyard up`, the CLI, a proxy on the same host) are not capped
unless `FORWARDED_ALLOW_IPS` says otherwise. It also tells the app, in the request's scope,
whether the body is still on its way (`shedding.BODY_PENDING`): a request is counted in flight only
once its body has arrived (`api/shedding.py`).

It also sends a response's head with its body: uvicorn writes the status line and headers, then
the body, each a send() of its own, and on loopback a send() does the receiving side's work too
(it was a sixth of the server's CPU on SQLite). `_HeadWithBody` holds the head until the body's
first write, or until the loop's next turn when none comes (a HEAD, a stream that waits).
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
from collections.abc import Container, Iterable
from typing import Any, cast

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from taskyard.api.shedding import BODY_PENDING, Counts
from taskyard.internals.server import HttpToolsProtocol, ProxyHeadersMiddleware, TrustedHosts
from taskyard.model import dates

log = logging.getLogger(__name__)


class HeadTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request head, or body, takes too
    long to arrive. `head_timeout` and `body_timeout` are set on a subclass (`with_head_timeout`):
    uvicorn builds protocols.

    A head's beginning, and its end, only note when the head, then the body, is due; one timer per
    connection, armed when none is pending, checks it when it fires and, if a later one is due by
    then, waits for that one. A kept-alive connection's requests thus cost no timer each (a timer
    armed and cancelled per request was a noticeable share of the server's CPU).

    The hooks it overrides and the attributes it uses are uvicorn's internals, listed (and
    checked) in `internals/server.py`."""

    head_timeout = 10.0
    body_timeout = 30.0
    max_per_client = 0  # connections one address may hold at once (0: no bound)
    trusted: Container[str | None] = ()  # addresses not capped: the trusted proxies'
    held_per_client: dict[str, int]  # connections held now, by address (its own per subclass)
    counts: Counts | None = None  # the app's, for the refusals (`/metrics`)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_due: float | None = None  # when the head, or body, being received must be whole
        self._in_body = False  # the head has come: `_head_due` is the body's
        self._head_timer: asyncio.TimerHandle | None = None
        self._client_held: str | None = None  # the address this connection counts against
        self._refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(_HeadWithBody(transport, self.loop))  # type: ignore[arg-type]
        self._head_begun()
        if self.max_per_client:
            self._count_client()

    def _count_client(self) -> None:
        """Count the connection against its address, or refuse it if that holds its share."""
        host = self.client[0] if self.client else None
        if host is None or host in self.trusted:
            return
        held = self.held_per_client.get(host, 0)
        if held >= self.max_per_client:
            self._refuse(held)
            return
        self.held_per_client[host] = held + 1
        self._client_held = host

    def _refuse(self, held: int) -> None:
        """Answer 503 before anything is read, and stop sending. What the client sends is read
        and dropped until it closes (closing with it unread would reset the connection, and the
        answer with it); the head timeout closes it at the latest."""
        self._refused = True
        if self.counts is not None:
            self.counts.refused_connections += 1
        message = (
            f"this client address holds {held} connections to this server, the most one address may "
            "hold at once; nothing was done: send the request again after Retry-After seconds"
        )
        self.transport.write(_error_answer(b"503 Service Unavailable", "ServiceUnavailable", message, 5))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        else:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_due is None:  # a new head begun on a kept-alive connection
            self._head_begun()

    def on_headers_complete(self) -> None:
        # The head arrived: the request is the app's now, and its body (if any; a request without
        # one is complete at once, in this same call) is due in `body_timeout`.
        self._in_body = True
        cast(dict[str, Any], self.scope)[BODY_PENDING] = True  # until the message is complete
        self._head_due = due = self.loop.time() + self.body_timeout
        timer = self._head_timer
        if timer is None or timer.when() > due + _EARLY:  # a short body timeout: check it sooner
            if timer is not None:
                timer.cancel()
            self._head_timer = self.loop.call_at(due, self._head_check)
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._head_due is not None:
            self._head_due += len(body) / BODY_RATE
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._head_due = None  # the whole request arrived
        self._in_body = False
        cast(dict[str, Any], self.scope)[BODY_PENDING] = False
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_due = None
        host, self._client_held = self._client_held, None
        if host is not None:
            held = self.held_per_client
            if held[host] <= 1:
                del held[host]
            else:
                held[host] -= 1
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def _head_begun(self) -> None:
        self._in_body = False
        self._head_due = due = self.loop.time() + self.head_timeout
        if self._head_timer is None:
            self._head_timer = self.loop.call_at(due, self._head_check)

    def _head_check(self) -> None:
        self._head_timer = None
        due = self._head_due
        if due is None:  # no head on its way: the next one arms the timer again
            return
        if due - self.loop.time() > _EARLY:  # a later head is on its way: wait for it
            self._head_timer = self.loop.call_at(due, self._head_check)
            return
        self._head_due = None
        if self._in_body:
            self._body_late()
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being answered
        if not self.transport.is_closing():
            self.transport.close()

    def _body_late(self) -> None:
        """The body did not come in time: answer 408 unless the app began its answer without it,
        tell the app the client is gone, and close the connection."""
        self._in_body = False
        cycle = self.cycle
        if self.transport.is_closing():
            return
        if cycle is not None:
            if cycle.response_started and not cycle.response_complete:
                return  # the app answers without waiting for the body: let it finish
            if not cycle.response_started:
                cycle.response_started = True  # the app's own answer, if it tries one, is dropped
                self.transport.write(_timeout_answer())
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.close()


_EARLY = 0.001  # seconds a timer may fire before its time (the loop's clock is coarse)
BODY_RATE = 64 * 1024  # bytes of a body that earn it one more second


def _timeout_answer() -> bytes:
    """The 408 for a request whose body did not arrive in time, in TaskCluster's error body (the
    call is not known here: the route is the app's to find)."""
    message = "the request body did not arrive in time; nothing was done"
    return _error_answer(b"408 Request Timeout", "RequestTimeout", message)


def _error_answer(status: bytes, code: str, message: str, retry_after: int | None = None) -> bytes:
    """An error answer the connection gives by itself, closing, in TaskCluster's error body."""
    body = orjson.dumps(
        {
            "code": code,
            "message": message,
            "requestInfo": {
                "method": "",
                "params": {},
                "payload": {},
                "time": dates.to_iso(dates.now_ms()),
            },
        }
    )
    head = b"HTTP/1.1 %s\r\ncontent-type: application/json\r\nconnection: close\r\n" % status
    if retry_after is not None:
        head += b"retry-after: %d\r\n" % retry_after
    return head + b"content-length: %d\r\n\r\n%s" % (len(body), body)


class _HeadWithBody:
    """A connection's transport that writes a response's head together with the write after it.

    A write that starts a response (`HTTP/`, as uvicorn's status line does) is held; the next
    write sends both at once, and a callback at the loop's next turn sends it alone if none came.
    Everything else is the transport's own. Bytes go out in the order they were written."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
        elif data.startswith(b"HTTP/"):
            self._held = data
            self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def writelines(self, chunks: Iterable[bytes]) -> None:
        self.write(b"".join(chunks))

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            self._transport.write(held)

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


TRUSTED_BY_DEFAULT = "127.0.0.1,::1"  # uvicorn's trusted proxies without FORWARDED_ALLOW_IPS


def with_head_timeout(
    seconds: float,
    body_seconds: float = 30.0,
    *,
    per_client: int = 0,
    trusted: str | list[str] = TRUSTED_BY_DEFAULT,
    counts: Counts | None = None,
) -> type[HeadTimeoutProtocol]:
    """The protocol class to give uvicorn, closing connections whose head takes over `seconds`,
    or whose body takes over `body_seconds` (plus its allowance for size), and refusing a
    connection beyond `per_client` from one address but a `trusted` proxy's (0: no bound)."""
    attributes = {
        "head_timeout": seconds,
        "body_timeout": body_seconds,
        "max_per_client": per_client,
        "trusted": TrustedHosts(trusted),
        "held_per_client": {},
        "counts": counts,
    }
    return type("HeadTimeoutProtocol", (HeadTimeoutProtocol,), attributes)


def trusted_proxies() -> str:
    """The addresses of the proxies trusted to say who their client is: `FORWARDED_ALLOW_IPS`, as
    uvicorn reads it (comma-separated addresses or networks, `*` for every peer), else loopback."""
    return os.environ.get("FORWARDED_ALLOW_IPS", TRUSTED_BY_DEFAULT)


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


def forwarded_headers(trusted_hosts: list[str] | str) -> ASGIApp:
    """What `App.trust_proxies()` takes: uvicorn's `ProxyHeadersMiddleware` for `trusted_hosts`,
    around an app that does nothing, so that it only rewrites the scope (the scheme and the
    client's address) of a request from a trusted proxy."""
    return cast(ASGIApp, ProxyHeadersMiddleware(cast(Any, _nothing), trusted_hosts=trusted_hosts))


async def _nothing(scope: Scope, receive: Receive, send: Send) -> None:
    """The app inside `forwarded_headers()`: the front goes on by itself."""
