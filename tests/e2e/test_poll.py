"""The poll protocol against a real server: Microsoft's `azure-storage-queue` SDK on the queue URLs
pollTaskUrls hands out, and TaskCluster's 1.x client's `pollTaskUrls` with a claim and a delete as
docs/poll.md describes them. Both databases."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import requests
import taskcluster
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.queue import QueueClient

from taskyard.config import WorkerConfig
from taskyard.worker import client as worker_client
from taskyard.worker.poll import MAX_DEQUEUES, Poller
from tests.e2e.conftest import Server, start_server
from tests.e2e.helpers import create, definition, legacy_options, signed, slug, wait_for_status
from tests.legacy_client import legacy_python, run_legacy

__all__ = ["legacy_python"]
WORKER = {"workerGroup": "poll-wg", "workerId": "poll-worker"}


def poll_task_urls(server: Server, tq: str) -> dict[str, Any]:
    reply = signed("GET", f"{server.api}/poll-task-url/{tq}", None, server.credentials)
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


def queue_url(poll_url: str) -> str:
    """The queue's URL with its SAS, as `QueueClient.from_queue_url` takes it: no `/messages`,
    no `visibilitytimeout`."""
    parts = urlsplit(poll_url)
    query = "&".join(p for p in parts.query.split("&") if not p.startswith("visibilitytimeout="))
    return urlunsplit(parts._replace(path=parts.path.removesuffix("/messages"), query=query))


def body_of(text: str) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(base64.b64decode(text))
    return decoded


def test_the_azure_sdk_receives_peeks_updates_and_deletes(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create(queue, tq, priority="very-low")
    urls = poll_task_urls(server, tq)
    client = QueueClient.from_queue_url(queue_url(urls["queues"][5]["signedPollUrl"]))

    (peeked,) = client.peek_messages(max_messages=5)
    assert peeked.dequeue_count == 0 and body_of(peeked.content)["taskId"] == task_id

    (message,) = client.receive_messages(max_messages=5, visibility_timeout=60)
    assert message.id == peeked.id and message.dequeue_count == 1 and message.pop_receipt
    body = body_of(message.content)
    assert (body["taskId"], body["runId"]) == (task_id, 0)
    assert list(client.receive_messages(visibility_timeout=60)) == []  # invisible now

    updated = client.update_message(message, visibility_timeout=0)  # visible again at once
    assert updated.pop_receipt != message.pop_receipt
    (again,) = client.receive_messages(visibility_timeout=60)
    assert again.id == message.id and again.dequeue_count == 2

    with pytest.raises(HttpResponseError) as stale:
        client.delete_message(again.id, message.pop_receipt)
    assert stale.value.status_code == 400 and stale.value.error_code == "PopReceiptMismatch"

    claim = {**WORKER, "messageId": again.id, "receipt": again.pop_receipt, "signature": body["signature"]}
    assert queue.claimTask(task_id, 0, claim)["status"]["state"] == "running"
    client.delete_message(again)
    with pytest.raises(ResourceNotFoundError):
        client.delete_message(again)
    assert list(client.peek_messages()) == []


def test_the_azure_sdk_is_refused_with_a_tampered_sas(server: Server, tq: str) -> None:
    url = queue_url(poll_task_urls(server, tq)["queues"][0]["signedPollUrl"])
    tampered = url.replace("sp=rp", "sp=rap")
    with pytest.raises(HttpResponseError) as refused:
        list(QueueClient.from_queue_url(tampered).receive_messages())
    assert refused.value.status_code == 403 and refused.value.error_code == "AuthenticationFailed"
    with pytest.raises(HttpResponseError) as put:
        QueueClient.from_queue_url(url).send_message("x")
    assert put.value.status_code == 403 and put.value.error_code == "AuthorizationPermissionMismatch"


def test_the_legacy_client_polls_claims_and_deletes(
    server: Server, queue: taskcluster.Queue, legacy_python: Path, tq: str
) -> None:
    provisioner_id, worker_type = tq.split("/")
    task_id = slug()
    body = definition(tq, priority="high")
    del body["taskQueueId"]
    body.update(provisionerId=provisioner_id, workerType=worker_type)
    answer = run_legacy(
        legacy_python,
        """
        import requests, xml.etree.ElementTree as ET
        from urllib.parse import quote
        queue = taskcluster.Queue(options)
        queue.createTask(options["taskId"], options["task"])
        urls = queue.pollTaskUrls(options["provisionerId"], options["workerType"])
        found = None
        for entry in urls["queues"]:  # in the order given
            reply = requests.get(entry["signedPollUrl"] + "&numofmessages=4")
            reply.raise_for_status()
            messages = ET.fromstring(reply.content).findall("QueueMessage")
            if messages:
                found = (entry, messages[0])
                break
        entry, message = found
        text = json.loads(base64.b64decode(message.findtext("MessageText")))
        claim = queue.claimTask(text["taskId"], text["runId"], {
            "workerGroup": "legacy-wg", "workerId": "legacy-worker",
            "messageId": message.findtext("MessageId"),
            "receipt": message.findtext("PopReceipt"),
            "signature": text["signature"],
        })
        delete = entry["signedDeleteUrl"].replace("{{messageId}}", message.findtext("MessageId"))
        delete = delete.replace("{{popReceipt}}", quote(message.findtext("PopReceipt"), safe=""))
        deleted = requests.delete(delete)
        result = {
            "urls": urls,
            "queue": urls["queues"].index(entry),
            "text": text,
            "dequeueCount": message.findtext("DequeueCount"),
            "claimed": claim["status"]["state"],
            "deleted": deleted.status_code,
        }
        """,
        options={
            **legacy_options(server, "queue"),
            "taskId": task_id,
            "task": body,
            "provisionerId": provisioner_id,
            "workerType": worker_type,
        },
    )
    assert len(answer["urls"]["queues"]) == 7 and answer["urls"]["expires"]
    assert answer["queue"] == 2  # highest, very-high, then high
    assert (answer["text"]["taskId"], answer["text"]["runId"]) == (task_id, 0)
    assert answer["dequeueCount"] == "1"
    assert (answer["claimed"], answer["deleted"]) == ("running", 204)
    status = wait_for_status(queue, task_id, lambda s: s["state"] == "running", what="the claim")
    assert status["runs"][0]["workerId"] == "legacy-worker"


def test_a_message_for_another_run_is_refused(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    first, second = create(queue, tq), create(queue, tq)
    entry = poll_task_urls(server, tq)["queues"][-1]
    reply = requests.get(entry["signedPollUrl"] + "&numofmessages=2", timeout=30)
    assert reply.status_code == 200, reply.text
    client = QueueClient.from_queue_url(queue_url(entry["signedPollUrl"]))
    assert len(list(client.peek_messages(max_messages=2))) == 0  # both received: invisible
    texts = [body_of(t) for t in reply.text.split("<MessageText>")[1:] for t in [t.split("<")[0]]]
    other = next(t for t in texts if t["taskId"] == second)
    claim = signed(
        "POST",
        f"{server.api}/task/{first}/runs/0/claim",
        {**WORKER, "signature": other["signature"]},
        server.credentials,
    )
    assert claim.status_code == 403, claim.text
    assert queue.status(first)["status"]["state"] == "pending"


async def test_a_much_dequeued_message_is_claimed_and_its_run_never_stranded(
    server: Server, queue: taskcluster.Queue, tq: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A message received more than ten times and never deleted (here: by the Azure SDK, giving each
    receipt up at once) is reported to the operator, and `taskyard worker --protocol poll` still
    claims its run, then deletes it. Deleting it unclaimed left the run pending with no message:
    poll-only workers never saw it again before its deadline."""
    task_id = create(queue, tq, priority="very-low")
    sdk = QueueClient.from_queue_url(queue_url(poll_task_urls(server, tq)["queues"][5]["signedPollUrl"]))
    for count in range(1, MAX_DEQUEUES + 2):
        (message,) = sdk.receive_messages(visibility_timeout=60)
        assert message.dequeue_count == count
        sdk.update_message(message, visibility_timeout=0)  # given up: visible again at once

    creds = worker_client.Credentials(server.credentials["clientId"], server.credentials["accessToken"])
    config = WorkerConfig(
        server.root_url, creds.client_id, creds.access_token, task_queue_id=tq, protocol="poll"
    )
    http = worker_client.QueueClient(server.root_url)
    try:
        with caplog.at_level(logging.WARNING, logger="taskyard.worker.poll"):
            claims = await Poller(config, http, creds).claim(1)
    finally:
        await http.close()

    assert [c["status"]["taskId"] for c in claims] == [task_id]
    assert queue.status(task_id)["status"]["runs"][0]["state"] == "running"
    assert list(sdk.peek_messages()) == []  # settled: claimed, then deleted
    (alert,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert f"task {task_id}, run 0" in alert and f"dequeued {MAX_DEQUEUES + 2} times" in alert


def test_claim_messages_required_makes_claimtask_quote_its_message(
    db_url: str, tmp_path: Path, tq: str
) -> None:
    """The first queue draft: "In the future `queue.claimTask` will require options `messageId`,
    `receipt`, and `signature`. However, these will initially be optional, and then ... they will
    become mandatory." `--claim-messages required` is that future; optional stays the default."""
    own = start_server(db_url, tmp_path / "server", extra_args=["--claim-messages", "required"])
    try:
        queue = own.client()
        task_id = create(queue, tq)
        entry = poll_task_urls(own, tq)["queues"][-1]
        client = QueueClient.from_queue_url(queue_url(entry["signedPollUrl"]))
        (message,) = client.receive_messages(visibility_timeout=60)
        signature = body_of(message.content)["signature"]
        for given, missing in (
            ({}, "body.messageId, body.receipt, body.signature are required"),
            ({"signature": signature}, "body.messageId, body.receipt are required"),
            ({"messageId": message.id, "receipt": message.pop_receipt}, "body.signature is required"),
        ):
            with pytest.raises(taskcluster.exceptions.TaskclusterRestFailure) as refused:
                queue.claimTask(task_id, 0, {**WORKER, **given})
            assert refused.value.status_code == 400
            assert refused.value.body["code"] == "InputValidationError"
            assert missing in refused.value.body["message"]
        assert queue.status(task_id)["status"]["state"] == "pending"
        claim = {**WORKER, "messageId": message.id, "receipt": message.pop_receipt, "signature": signature}
        assert queue.claimTask(task_id, 0, claim)["status"]["state"] == "running"
    finally:
        own.stop()
