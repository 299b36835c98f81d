"""The fuzzer's raw requests: what is sent (`Req`), how it is sent (`send`), and what came back.

Requests go to the ASGI app directly, as uvicorn would hand them over: the request target as
ASCII bytes (`raw_path`, `query_string`), `path` decoded from it as uvicorn decodes it, header
names lowercased and values as bytes (latin-1, as h11 admits them), the body in one or several
messages. An HTTP client would normalize what the fuzzer wants sent as is (`..` segments, two
Content-Length headers, a URL over 64 KiB); this does not.

A `Req` prints as a Python expression: paste it into a test and `await send(app, Req(...))`.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from starlette.types import ASGIApp, Message

HOST = "testserver"
SHOWN_BODY = 600  # bytes of a body shown in full; a longer one is summarized


@dataclass(frozen=True)
class Req:
    """One request as the server receives it. `path` and `query` are the target as sent (ASCII)."""

    method: str
    path: str
    query: str = ""
    headers: tuple[tuple[bytes, bytes], ...] = ()
    body: bytes = b""
    chunks: int = 1  # how many receive() messages carry the body
    hang_up: bool = False  # the client disconnects before the last chunk

    def __repr__(self) -> str:
        shown = repr(self.body) if len(self.body) <= SHOWN_BODY else _summary(self.body)
        extra = (f", chunks={self.chunks}" if self.chunks != 1 else "") + (
            ", hang_up=True" if self.hang_up else ""
        )
        return (
            f"Req(method={self.method!r}, path={self.path!r}, query={self.query!r}, "
            f"headers={self.headers!r}, body={shown}{extra})"
        )


def _summary(body: bytes) -> str:
    head, tail = body[:200], body[-60:]
    return f"{head!r} + b'...{len(body) - 260} more bytes...' + {tail!r}"


@dataclass
class Answer:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    complete: bool = False  # the last body message said more_body=False

    def json_error(self) -> bool:
        """Whether the body is TaskCluster's error: `{code, message, requestInfo}`, as JSON."""
        import orjson

        if not self.headers.get("content-type", "").startswith("application/json"):
            return False
        try:
            body = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return False
        return (
            isinstance(body, dict)
            and isinstance(body.get("code"), str)
            and isinstance(body.get("message"), str)
            and isinstance(body.get("requestInfo"), dict)
        )


class Hang(Exception):
    """The app did not answer within the fuzzer's (generous) time."""


class Crash(Exception):
    """An exception came out of the app: the traceback is the message."""


def scope_of(req: Req) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": req.method,
        "scheme": "http",
        "path": unquote(req.path),  # as uvicorn decodes the target: UTF-8, bad bytes replaced
        "raw_path": req.path.encode("ascii"),
        "root_path": "",
        "query_string": req.query.encode("ascii"),
        "headers": [(name.lower(), value) for name, value in req.headers],
        "client": ("127.0.0.1", 50000),
        "server": (HOST, 80),
    }


def _body_messages(req: Req) -> list[Message]:
    size = max(1, -(-len(req.body) // max(1, req.chunks)))
    parts = [req.body[i : i + size] for i in range(0, len(req.body), size)] or [b""]
    messages: list[Message] = [{"type": "http.request", "body": p, "more_body": True} for p in parts]
    if req.hang_up:
        return [*messages[:-1], {"type": "http.disconnect"}]
    messages[-1]["more_body"] = False
    return messages


async def send(app: ASGIApp, req: Req, *, timeout: float = 60.0) -> Answer:
    """Run `req` through `app`; Hang if it takes longer than `timeout`, Crash if the app raises.

    After the body, the client waits until the answer has begun, then hangs up (so a stream that
    would follow a live log forever ends once its headers are out).
    """
    answer, started = Answer(), asyncio.Event()
    pending = _body_messages(req)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        await started.wait()
        return {"type": "http.disconnect"}

    async def respond(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in message.get("headers", [])}
            started.set()
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")
            answer.complete = not message.get("more_body", False)

    try:
        await asyncio.wait_for(app(scope_of(req), receive, respond), timeout)
    except TimeoutError:
        raise Hang(f"no answer within {timeout} s") from None
    except Exception as exc:
        raise Crash("".join(traceback.format_exception(exc))) from exc
    return answer


class Watchdog:
    """Catches what `send()`'s timeout cannot: a request that blocks the event loop (a runaway
    regular expression, a loop that never awaits), which no coroutine can time out. A thread
    wakes each second; once the request it was told of has run `timeout` seconds, it prints that
    request and every thread's stack to stderr (seen with `pytest -s`, or in the captured output),
    and `blocked` names it for the test to report when the loop comes back, if it does."""

    def __init__(self, timeout: float, *, tick: float = 1.0) -> None:
        self.timeout = timeout
        self.tick = tick
        self.blocked: str | None = None
        self._current: tuple[float, str] | None = None
        self._stop = threading.Event()

    @contextlib.contextmanager
    def watching(self, description: str) -> Iterator[None]:
        self._current = (time.monotonic(), description)
        try:
            yield
        finally:
            self._current = None

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            current = self._current
            if current is not None and self.blocked is None and time.monotonic() - current[0] > self.timeout:
                self.blocked = current[1]
                print(f"\nthe event loop is blocked by: {current[1]}", file=sys.__stderr__, flush=True)
                faulthandler.dump_traceback(file=sys.__stderr__, all_threads=True)

    def __enter__(self) -> Watchdog:
        threading.Thread(target=self._run, name="fuzz-watchdog", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
