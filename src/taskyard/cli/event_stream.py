"""Following a deployment's HTTP event stream (`GET /api/events/v1/stream`) from the command line.

`follow()` yields each message as an `Envelope`, reconnecting with the last event id it saw when
the connection is lost or the server ends the stream (it restarted, or dropped us for reading too
slowly), so nothing the server still holds is missed. It gives up with `Unreachable` after
`RECONNECTS` attempts in a row fail, and at once when the server refuses (`Refused`: bad bindings,
missing scopes). Blocking, over the standard library, like the other commands' HTTP.
"""

from __future__ import annotations

import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO
from urllib.parse import urlencode

import orjson

from taskyard.cli import http
from taskyard.events.port import Envelope
from taskyard.model.client_errors import Unreachable

READ_TIMEOUT = 60.0  # seconds without a byte: the server sends a heartbeat every 15
RECONNECTS = 5
BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class Event:
    """One server-sent event: its type (`message` unless told), id (None: none given) and data."""

    type: str
    id: str | None
    data: str


def stream_url(connection: http.Connection, bindings: Sequence[tuple[str, str]]) -> str:
    query = urlencode([("binding", f"{exchange}:{pattern}") for exchange, pattern in bindings])
    return f"{connection.root_url}/api/events/v1/stream?{query}"


def parse(lines: Iterator[bytes]) -> Iterator[Event]:
    """The events of an SSE byte stream. A block without data (the opening, an id alone) comes as
    an event of type `""`: it moves the last event id, and is no message."""
    fields: dict[str, list[str]] = {}
    for raw in lines:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if fields:
                ids = fields.get("id")
                kind = fields.get("event", ["message"])[-1] if "data" in fields else ""
                yield Event(kind, ids[-1] if ids else None, "\n".join(fields.get("data", [])))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value.removeprefix(" "))


def follow(
    connection: http.Connection,
    bindings: Sequence[tuple[str, str]],
    *,
    connected: Callable[[], None] = lambda: None,
    err: IO[str] = sys.stderr,
) -> Iterator[Envelope]:
    """Every message the bindings take, from now on, until the caller stops; see the module."""
    url = stream_url(connection, bindings)
    last_id: str | None = None
    failures = 0
    while True:
        try:
            for event in _events(connection, url, last_id):
                if failures or last_id is None:
                    connected()
                    failures = 0
                last_id = event.id or last_id
                if event.type == "message":
                    yield _envelope(event.data)
                elif event.type == "missed":
                    said = orjson.loads(event.data).get("message", "some events were missed")
                    print(f"taskyard: {said}", file=err, flush=True)
        except Unreachable as exc:
            if last_id is None or failures >= RECONNECTS:
                raise
            print(f"taskyard: {exc}; reconnecting", file=err, flush=True)
        else:
            print("taskyard: the server ended the stream; reconnecting", file=err, flush=True)
        time.sleep(BACKOFF[min(failures, len(BACKOFF) - 1)])
        failures += 1


def _events(connection: http.Connection, url: str, last_id: str | None) -> Iterator[Event]:
    request = urllib.request.Request(url)
    request.add_header("Accept", "text/event-stream")
    request.add_header("Authorization", http.authorization(connection, "GET", url, None))
    if last_id is not None:
        request.add_header("Last-Event-ID", last_id)
    with http.translated(request), urllib.request.urlopen(request, timeout=READ_TIMEOUT) as response:
        yield from parse(iter(response.readline, b""))


def _envelope(data: str) -> Envelope:
    message = orjson.loads(data)
    return Envelope(message["exchange"], message["routingKey"], message["body"], list(message["cc"]))
