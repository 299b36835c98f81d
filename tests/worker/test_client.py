"""The worker's queue client against a real local HTTP server: retries, refusals, signatures."""

from __future__ import annotations

import gzip
import socket
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from taskyard.model.client_errors import Refused, Unreachable
from taskyard.worker import client as client_module
from taskyard.worker.client import Credentials, QueueClient

CREDS = Credentials("static/taskyard/root", "secret-token")


class FakeQueue:
    """Answers each call with the next (status, body) in `answers`, remembering what it was sent."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, Any]] = []
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.path_qs, dict(request.headers), await request.read()))
        status, body = self.answers.pop(0) if self.answers else (200, {})
        return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeQueue, str]]:
    queue = FakeQueue()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", queue.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield queue, f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "_backoff", lambda attempt: 0.0)


async def test_a_5xx_is_retried_until_the_call_succeeds(fake: tuple[FakeQueue, str]) -> None:
    queue, root = fake
    queue.answers = [(503, {"code": "Unavailable", "message": "busy"}), (500, {}), (200, {"takenUntil": "t"})]
    client = QueueClient(root)
    try:
        assert await client.reclaim("abc", 0, CREDS) == {"takenUntil": "t"}
    finally:
        await client.close()
    assert [s[1] for s in queue.seen] == ["/api/queue/v1/task/abc/runs/0/reclaim"] * 3
    # Each attempt is signed afresh (Hawk nonces are single-use).
    nonces = {s[2]["Authorization"].split('nonce="')[1].split('"')[0] for s in queue.seen}
    assert len(nonces) == 3


async def test_a_4xx_is_refused_at_once_with_the_servers_code_and_message(
    fake: tuple[FakeQueue, str],
) -> None:
    queue, root = fake
    queue.answers = [(409, {"code": "RequestConflict", "message": "run 0 was canceled"})]
    client = QueueClient(root)
    try:
        with pytest.raises(Refused) as refused:
            await client.report("abc", 0, "completed", None, CREDS)
    finally:
        await client.close()
    assert (refused.value.status, refused.value.code, refused.value.message) == (
        409,
        "RequestConflict",
        "run 0 was canceled",
    )
    assert len(queue.seen) == 1


async def test_persistent_5xx_ends_as_the_last_refusal(fake: tuple[FakeQueue, str]) -> None:
    queue, root = fake
    queue.answers = [(502, {"code": "Bad", "message": f"try {n}"}) for n in range(10)]
    client = QueueClient(root, attempts=3)
    try:
        with pytest.raises(Refused) as refused:
            await client.statuses(["abc"], CREDS)
    finally:
        await client.close()
    assert refused.value.message == "try 2"
    assert len(queue.seen) == 3


async def test_no_server_is_unreachable_after_the_retries() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket closes
    client = QueueClient(f"http://127.0.0.1:{port}", attempts=2)
    try:
        with pytest.raises(Unreachable, match="claim-work"):
            await client.claim_work("p/w", "wg", "w1", 1, CREDS)
    finally:
        await client.close()


async def test_an_upload_sends_its_declared_length_and_encoding(fake: tuple[FakeQueue, str]) -> None:
    queue, root = fake

    packed = gzip.compress(b"hello world")

    async def chunks() -> AsyncIterator[bytes]:
        yield packed[:5]
        yield packed[5:]

    client = QueueClient(root)
    try:
        await client.upload(f"{root}/blob?sig=1", chunks(), len(packed), "text/plain", "gzip")
    finally:
        await client.close()
    method, path, headers, body = queue.seen[0]
    assert (method, path, body) == ("PUT", "/blob?sig=1", b"hello world")  # the server un-gzips it
    assert headers["Content-Length"] == str(len(packed)) and headers["Content-Encoding"] == "gzip"
    assert "Authorization" not in headers  # the signed URL is the credential
