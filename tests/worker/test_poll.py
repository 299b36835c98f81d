"""The poll worker's rules (docs/poll.md) against a local HTTP server playing the queue and its poll
queues: which messages are deleted, which kept, what is logged. The real server's side of the same
conversation is in tests/api/test_azure_queue.py and tests/e2e/test_poll_worker.py."""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from aiohttp import web

from taskyard.config import WorkerConfig
from taskyard.worker import client as client_module
from taskyard.worker.client import Credentials, QueueClient
from taskyard.worker.poll import Poller, decode_text, parse_messages

CREDS = Credentials("static/taskyard/root", "secret-token")
TASK_ID = "fKz7yXv3Q0m2p9Wq1bC4dA"
RECEIPT = "AgAA+/x=="


def text(body: object) -> str:
    return base64.b64encode(orjson.dumps(body)).decode()


GOOD = text({"taskId": TASK_ID, "runId": 0, "signature": "c2ln"})


@dataclass
class FakeDeployment:
    """pollTaskUrls with two queues, their Get Messages and Delete Message, and claimTask."""

    messages: list[tuple[str, int, str]] = field(default_factory=list)  # (id, dequeue count, text)
    claim_status: int = 200
    claim_body: Any = None
    delete_status: int = 204
    deleted: list[tuple[str, str]] = field(default_factory=list)
    claims: list[Any] = field(default_factory=list)
    polled: list[str] = field(default_factory=list)
    root: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path
        if path.startswith("/api/queue/v1/poll-task-url/"):
            queues = [
                {
                    "signedPollUrl": f"{self.root}/q/{name}/messages?visibilitytimeout=300&sig=s",
                    "signedDeleteUrl": f"{self.root}/q/{name}/messages/"
                    + "{{messageId}}?popreceipt={{popReceipt}}&sig=s",
                }
                for name in ("high", "low")
            ]
            return web.json_response({"expires": "2999-01-01T00:00:00.000Z", "queues": queues})
        if path.endswith("/claim"):
            self.claims.append(await request.json())
            body = (
                self.claim_body
                if self.claim_body is not None
                else {"status": {"taskId": TASK_ID}, "runId": 0}
            )
            return web.json_response(body, status=self.claim_status)
        if request.method == "DELETE":
            self.deleted.append((path.rsplit("/", 1)[1], request.query["popreceipt"]))
            return web.Response(
                status=self.delete_status, body=b"<Error><Code>MessageNotFound</Code></Error>"
            )
        self.polled.append(f"{path}?{request.query_string}")
        found = self.messages if "/low/" in path else []
        xml = "".join(
            f"<QueueMessage><MessageId>{i}</MessageId><PopReceipt>{RECEIPT}</PopReceipt>"
            f"<DequeueCount>{n}</DequeueCount><MessageText>{t}</MessageText></QueueMessage>"
            for i, n, t in found
        )
        return web.Response(body=f"<QueueMessagesList>{xml}</QueueMessagesList>".encode())


@pytest.fixture
async def deployment() -> AsyncIterator[FakeDeployment]:
    fake = FakeDeployment()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.root = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    yield fake
    await runner.cleanup()


@pytest.fixture
async def poller(deployment: FakeDeployment, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Poller]:
    monkeypatch.setattr(client_module, "_backoff", lambda attempt: 0.0)
    config = WorkerConfig(
        deployment.root, CREDS.client_id, CREDS.access_token, task_queue_id="p/wt", protocol="poll"
    )
    client = QueueClient(deployment.root)
    yield Poller(config, client, CREDS)
    await client.close()


async def test_a_claimed_message_is_deleted_with_its_receipt_encoded(
    deployment: FakeDeployment, poller: Poller
) -> None:
    deployment.messages = [("m1", 1, GOOD)]
    claims = await poller.claim(3)
    assert len(claims) == 1
    assert deployment.polled[0].endswith("numofmessages=3") and "/high/" in deployment.polled[0]
    assert "/low/" in deployment.polled[1]  # in order: the empty high queue first
    assert deployment.claims == [
        {
            "workerGroup": "local",
            "workerId": "worker",
            "messageId": "m1",
            "receipt": RECEIPT,
            "signature": "c2ln",
        }
    ]
    assert deployment.deleted == [("m1", RECEIPT)]  # `+`, `/`, `=` arrived intact


@pytest.mark.parametrize("status", [404, 409])
async def test_a_claim_refused_for_good_deletes_the_message(
    deployment: FakeDeployment, poller: Poller, status: int
) -> None:
    """404 (the task or run is gone) and 409 (no longer pending, past its deadline): no one can claim it."""
    deployment.messages = [("m1", 1, GOOD)]
    deployment.claim_status, deployment.claim_body = status, {"code": "RequestConflict", "message": "no"}
    assert await poller.claim(1) == []
    assert deployment.deleted == [("m1", RECEIPT)]


@pytest.mark.parametrize("status", [400, 401, 403, 429, 500, 503])
async def test_any_other_refusal_keeps_the_message(
    deployment: FakeDeployment, poller: Poller, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker's own credentials or scopes (401, 403), a busy queue (429, 5xx): another worker, or
    this one later, may still claim the run, and the message is the only way a poll-only worker
    learns of it. It comes back after its visibility timeout."""
    deployment.messages = [("m1", 1, GOOD)]
    deployment.claim_status, deployment.claim_body = status, {"code": "Refused", "message": "no"}
    with caplog.at_level(logging.WARNING):
        assert await poller.claim(1) == []
    assert deployment.deleted == []
    assert "keeping its message" in caplog.text


async def test_a_quarantined_workers_empty_claim_keeps_the_message(
    deployment: FakeDeployment, poller: Poller
) -> None:
    deployment.messages = [("m1", 1, GOOD)]
    deployment.claim_body = {}
    assert await poller.claim(1) == []
    assert deployment.deleted == []


async def test_texts_the_queue_never_wrote_are_deleted_unclaimed(
    deployment: FakeDeployment, poller: Poller, caplog: pytest.LogCaptureFixture
) -> None:
    deployment.messages = [("bad", 1, "not base64!"), ("json", 1, text([1]))]
    with caplog.at_level(logging.WARNING):
        assert await poller.claim(3) == []
    assert deployment.claims == []
    assert [m for m, _ in deployment.deleted] == ["bad", "json"]
    assert "message bad on low: the message text is not base64 JSON" in caplog.text


async def test_a_much_dequeued_message_is_reported_once_and_still_claimed(
    deployment: FakeDeployment, poller: Poller, caplog: pytest.LogCaptureFixture
) -> None:
    """Past MAX_DEQUEUES the operator hears of it (ERROR, naming the queue, the task and run, and
    what to check), and the run is claimed as any other: never deleted unclaimed, stranding it."""
    deployment.messages = [("old", 11, GOOD)]
    deployment.claim_status, deployment.claim_body = 403, {"code": "InsufficientScopes", "message": "no"}
    with caplog.at_level(logging.WARNING):
        assert await poller.claim(1) == []
    assert len(deployment.claims) == 1 and deployment.deleted == []  # refused: kept for another try
    (alert,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    said = alert.getMessage()
    assert "message old on poll queue low" in said and f"task {TASK_ID}, run 0" in said
    assert "dequeued 11 times" in said and "queue:claim-task:p/wt" in said

    caplog.clear()
    deployment.messages = [("old", 12, GOOD)]
    deployment.claim_status, deployment.claim_body = 200, None
    with caplog.at_level(logging.WARNING):
        assert len(await poller.claim(1)) == 1
    assert deployment.deleted == [("old", RECEIPT)]  # settled now: claimed, then deleted
    assert not [r for r in caplog.records if r.levelno == logging.ERROR]  # once per message


async def test_a_failed_delete_is_logged(
    deployment: FakeDeployment, poller: Poller, caplog: pytest.LogCaptureFixture
) -> None:
    deployment.messages = [("m1", 1, GOOD)]
    deployment.delete_status = 404
    with caplog.at_level(logging.WARNING):
        assert len(await poller.claim(1)) == 1
    assert "could not delete message m1: 404" in caplog.text


def test_decode_text() -> None:
    assert decode_text(GOOD) == (TASK_ID, 0, "c2ln")
    assert decode_text(text({"taskId": TASK_ID, "runId": 2})) == (TASK_ID, 2, None)
    for bad in [
        "",
        "%%%",
        text({"taskId": TASK_ID}),
        text({"taskId": 1, "runId": 0}),
        text({"taskId": TASK_ID, "runId": True}),
    ]:
        with pytest.raises(ValueError):
            decode_text(bad)


def test_parse_messages_refuses_what_is_not_a_message_list() -> None:
    assert parse_messages(b"<QueueMessagesList/>") == []
    for bad in (b"<Error/>", b"not xml"):
        with pytest.raises(ValueError):
            parse_messages(bad)
