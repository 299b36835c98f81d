"""The poll protocol through the app, as docs/poll.md tells a worker: pollTaskUrls, Get Messages on the
signed poll URL (raw HTTP, XML), claimTask with the message's proof, Delete on the signed delete URL;
and the Azure-queue endpoint's redelivery, peek, update and errors. Both databases."""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as ElementTree
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest

from taskyard.model import azure_queue, dates
from taskyard.model.task_definition import PRIORITIES
from tests.api.conftest import BASE, TASK_QUEUE_ID, Api, Credentials, assert_error
from tests.api.helpers import create_client

PROVISIONER, WORKER_TYPE = TASK_QUEUE_ID.split("/")
WORKER = {"workerGroup": "wg-1", "workerId": "poller-1"}
MESSAGE_KEYS = [
    "MessageId",
    "InsertionTime",
    "ExpirationTime",
    "PopReceipt",
    "TimeNextVisible",
    "DequeueCount",
]


async def poll_urls(api: Api, creds: Credentials | None = None) -> dict[str, Any]:
    kwargs = {} if creds is None else {"creds": creds}
    response = await api.call("GET", f"/poll-task-url/{PROVISIONER}/{WORKER_TYPE}", **kwargs)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def send(api: Api, method: str, url: str, body: bytes = b"") -> httpx.Response:
    assert url.startswith(BASE), url
    return await api.client.request(method, url, content=body)


def parse_messages(response: httpx.Response) -> list[dict[str, str]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/xml")
    assert response.headers["x-ms-request-id"]
    root = ElementTree.fromstring(response.content)
    assert root.tag == "QueueMessagesList"
    return [{child.tag: child.text or "" for child in message} for message in root]


def decoded(message: dict[str, str]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(base64.b64decode(message["MessageText"]))
    return body


def delete_url(entry: dict[str, str], message: dict[str, str]) -> str:
    url = entry["signedDeleteUrl"].replace("{{messageId}}", message["MessageId"])
    return url.replace("{{popReceipt}}", quote(message["PopReceipt"], safe=""))


def azure_error(response: httpx.Response, status: int, code: str) -> ElementTree.Element:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["x-ms-error-code"] == code
    root = ElementTree.fromstring(response.content)
    assert root.tag == "Error" and root.findtext("Code") == code
    assert "RequestId:" in (root.findtext("Message") or "")
    return root


async def test_seed_001_round_trip(api: Api) -> None:
    task_id, _ = await api.create_task(priority="high")
    urls = await poll_urls(api)
    assert len(urls["queues"]) == len(PRIORITIES)
    assert dates.parse_iso(urls["expires"]) > api.clock()
    high = urls["queues"][PRIORITIES.index("high")]
    for entry in urls["queues"]:
        assert "{{messageId}}" in entry["signedDeleteUrl"] and "{{popReceipt}}" in entry["signedDeleteUrl"]
        assert "sig=" in entry["signedPollUrl"] and "sp=rp" in entry["signedPollUrl"]
    # A worker polls the queues in order; every queue before `high` is empty.
    for entry in urls["queues"][: PRIORITIES.index("high")]:
        assert parse_messages(await send(api, "GET", entry["signedPollUrl"])) == []
    (message,) = parse_messages(await send(api, "GET", high["signedPollUrl"] + "&numofmessages=4"))
    assert list(message) == [*MESSAGE_KEYS, "MessageText"]
    assert message["DequeueCount"] == "1"
    body = decoded(message)
    assert (body["taskId"], body["runId"]) == (task_id, 0)
    assert body["signature"] == api.queue.poll_keys.signatures.sign(task_id, 0)  # type: ignore[union-attr]

    proof = {
        "messageId": message["MessageId"],
        "receipt": message["PopReceipt"],
        "signature": body["signature"],
    }
    claimed = await api.call("POST", f"/task/{task_id}/runs/0/claim", {**WORKER, **proof})
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["status"]["state"] == "running"
    deleted = await send(api, "DELETE", delete_url(high, message))
    assert deleted.status_code == 204, deleted.text
    assert parse_messages(await send(api, "GET", high["signedPollUrl"])) == []
    gone = await send(api, "DELETE", delete_url(high, message))
    azure_error(gone, 404, "MessageNotFound")


async def test_priorities_come_out_highest_first(api: Api) -> None:
    made = {p: (await api.create_task(priority=p))[0] for p in ("lowest", "very-high", "medium")}
    urls = await poll_urls(api)
    order = []
    for entry in urls["queues"]:
        for message in parse_messages(await send(api, "GET", entry["signedPollUrl"] + "&numofmessages=32")):
            order.append(decoded(message)["taskId"])
    assert order == [made["very-high"], made["medium"], made["lowest"]]


async def test_redelivery_counts_and_changes_the_receipt(api: Api) -> None:
    task_id, _ = await api.create_task()
    entry = (await poll_urls(api))["queues"][-1]  # lowest
    poll = entry["signedPollUrl"].replace("visibilitytimeout=300", "visibilitytimeout=5")
    (first,) = parse_messages(await send(api, "GET", poll))
    assert parse_messages(await send(api, "GET", poll)) == []  # invisible meanwhile
    api.clock.advance(6)
    (second,) = parse_messages(await send(api, "GET", poll))
    assert second["MessageId"] == first["MessageId"]
    assert (first["DequeueCount"], second["DequeueCount"]) == ("1", "2")
    assert second["PopReceipt"] != first["PopReceipt"]
    stale = await send(api, "DELETE", delete_url(entry, first))
    azure_error(stale, 400, "PopReceiptMismatch")
    forged = {
        "messageId": first["MessageId"],
        "receipt": first["PopReceipt"],
        "signature": decoded(first)["signature"],
    }
    refused = await api.call("POST", f"/task/{task_id}/runs/0/claim", {**WORKER, **forged})
    assert_error(refused, 403, "InsufficientScopes", names=["receipt"])
    assert (await api.call("GET", f"/task/{task_id}/status")).json()["status"]["state"] == "pending"
    assert (await send(api, "DELETE", delete_url(entry, second))).status_code == 204


async def test_peek_changes_nothing(api: Api) -> None:
    await api.create_task()
    entry = (await poll_urls(api))["queues"][-1]
    peek_url = entry["signedPollUrl"] + "&peekonly=true"
    for _ in range(2):
        (peeked,) = parse_messages(await send(api, "GET", peek_url))
        assert "PopReceipt" not in peeked and peeked["DequeueCount"] == "0"
    (got,) = parse_messages(await send(api, "GET", entry["signedPollUrl"]))
    assert got["MessageId"] == peeked["MessageId"] and got["DequeueCount"] == "1"


async def test_update_hides_the_message_with_a_new_receipt(api: Api) -> None:
    await api.create_task()
    entry = (await poll_urls(api))["queues"][-1]
    (message,) = parse_messages(await send(api, "GET", entry["signedPollUrl"]))
    base = delete_url(entry, message)
    updated = await send(api, "PUT", base + "&visibilitytimeout=0")
    assert updated.status_code == 204, updated.text
    receipt = updated.headers["x-ms-popreceipt"]
    assert receipt != message["PopReceipt"] and updated.headers["x-ms-time-next-visible"]
    (again,) = parse_messages(await send(api, "GET", entry["signedPollUrl"]))  # visible at once
    assert again["DequeueCount"] == "2"
    text = f"<QueueMessage><MessageText>{again['MessageText']}</MessageText></QueueMessage>".encode()
    same = await send(api, "PUT", delete_url(entry, again) + "&visibilitytimeout=10", text)
    assert same.status_code == 204, same.text
    other = text.replace(b"<MessageText>", b"<MessageText>AA")
    again_receipt = {**again, "PopReceipt": same.headers["x-ms-popreceipt"]}
    changed = await send(api, "PUT", delete_url(entry, again_receipt) + "&visibilitytimeout=10", other)
    azure_error(changed, 403, "AuthorizationPermissionMismatch")


async def test_claims_without_a_message_still_work_and_the_message_is_dropped(api: Api) -> None:
    task_id, _ = await api.create_task()
    claimed = await api.call("POST", f"/task/{task_id}/runs/0/claim", WORKER)
    assert claimed.status_code == 200, claimed.text
    entry = (await poll_urls(api))["queues"][-1]
    assert parse_messages(await send(api, "GET", entry["signedPollUrl"])) == []  # stale: not handed out


async def test_a_retried_run_gets_a_message_of_its_own(api: Api) -> None:
    task_id, _ = await api.create_task(retries=1)
    claim = await api.call("POST", f"/task/{task_id}/runs/0/claim", WORKER)
    assert claim.status_code == 200
    creds = Credentials.from_response(claim.json()["credentials"])
    shutdown = await api.call(
        "POST", f"/task/{task_id}/runs/0/exception", {"reason": "worker-shutdown"}, creds=creds
    )
    assert shutdown.status_code == 200, shutdown.text
    entry = (await poll_urls(api))["queues"][-1]
    (message,) = parse_messages(await send(api, "GET", entry["signedPollUrl"]))
    assert decoded(message)["runId"] == 1


async def test_claim_task_refuses_forged_or_mismatched_proof(api: Api) -> None:
    first, _ = await api.create_task()
    second, _ = await api.create_task()
    entry = (await poll_urls(api))["queues"][-1]
    messages = parse_messages(await send(api, "GET", entry["signedPollUrl"] + "&numofmessages=2"))
    by_task = {decoded(m)["taskId"]: m for m in messages}
    of_first, of_second = by_task[first], by_task[second]
    cases = [
        {"signature": decoded(of_second)["signature"]},  # another run's signature
        {"signature": base64.b64encode(b"x" * 32).decode()},  # forged
        {"messageId": of_second["MessageId"], "receipt": of_second["PopReceipt"]},  # another task's message
        {"messageId": "00000000-0000-0000-0000-000000000000", "receipt": of_first["PopReceipt"]},
    ]
    for proof in cases:
        refused = await api.call("POST", f"/task/{first}/runs/0/claim", {**WORKER, **proof})
        assert_error(refused, 403, "InsufficientScopes")
    half = await api.call(
        "POST", f"/task/{first}/runs/0/claim", {**WORKER, "messageId": of_first["MessageId"]}
    )
    assert_error(half, 400, "InputError", names=["receipt"])
    wrong_run = await api.call(
        "POST", f"/task/{first}/runs/1/claim", {**WORKER, "signature": decoded(of_first)["signature"]}
    )
    assert wrong_run.status_code == 404  # no run 1: the run is checked first
    assert (await api.call("GET", f"/task/{first}/status")).json()["status"]["state"] == "pending"


async def test_poll_task_urls_scopes(api: Api) -> None:
    exact = await create_client(api, "poller-exact", f"queue:poll-task-urls:{TASK_QUEUE_ID}")
    assumed = await create_client(
        api, "poller-assumed", "queue:poll-task-urls", f"assume:worker-type:{TASK_QUEUE_ID}"
    )
    half = await create_client(api, "poller-half", "queue:poll-task-urls")
    for creds in (exact, assumed):
        assert len((await poll_urls(api, creds))["queues"]) == len(PRIORITIES)
    for creds in (half, None):
        refused = await api.call("GET", f"/poll-task-url/{PROVISIONER}/{WORKER_TYPE}", creds=creds)
        assert_error(refused, 403, "InsufficientScopes", names=["queue:poll-task-urls"])
    seen = await api.call("GET", f"/task-queues/{TASK_QUEUE_ID.replace('/', '%2F')}")
    assert seen.status_code == 200, seen.text  # recorded as seen, as claimWork does


@pytest.mark.parametrize(
    ("query", "code", "status"),
    [
        ("&numofmessages=0", "OutOfRangeQueryParameterValue", 400),
        ("&numofmessages=33", "OutOfRangeQueryParameterValue", 400),
        ("&numofmessages=many", "InvalidQueryParameterValue", 400),
        ("&numofmessages=%C2%B2", "InvalidQueryParameterValue", 400),
    ],
)
async def test_get_messages_bad_input(api: Api, query: str, code: str, status: int) -> None:
    await api.create_task()
    entry = (await poll_urls(api))["queues"][-1]
    azure_error(await send(api, "GET", entry["signedPollUrl"] + query), status, code)
    (message,) = parse_messages(await send(api, "GET", entry["signedPollUrl"]))
    assert message["DequeueCount"] == "1"  # nothing changed


async def test_bad_visibility_timeouts(api: Api) -> None:
    entry = (await poll_urls(api))["queues"][-1]
    poll = entry["signedPollUrl"]
    for value in ("0", str(7 * 24 * 3600 + 1), "-1"):
        bad = poll.replace("visibilitytimeout=300", f"visibilitytimeout={value}")
        root = azure_error(
            await send(api, "GET", bad),
            400,
            "OutOfRangeQueryParameterValue" if value != "-1" else "InvalidQueryParameterValue",
        )
        assert root.findtext("QueryParameterName") == "visibilitytimeout"


async def test_signatures_are_checked(api: Api) -> None:
    urls = await poll_urls(api)
    poll, other = urls["queues"][-1]["signedPollUrl"], urls["queues"][0]["signedPollUrl"]
    sig = dict(part.split("=", 1) for part in urlsplit(poll).query.split("&"))["sig"]
    tampered = poll.replace(f"sig={sig}", "sig=" + quote(base64.b64encode(b"y" * 32).decode(), safe=""))
    azure_error(await send(api, "GET", tampered), 403, "AuthenticationFailed")
    azure_error(await send(api, "GET", poll.replace(f"&sig={sig}", "")), 403, "AuthenticationFailed")
    other_queue = urlsplit(other).path.split("/")[-2]
    this_queue = urlsplit(poll).path.split("/")[-2]
    azure_error(await send(api, "GET", poll.replace(this_queue, other_queue)), 403, "AuthenticationFailed")
    widened = poll.replace("sp=rp", "sp=raup")
    azure_error(await send(api, "GET", widened), 403, "AuthenticationFailed")
    api.clock.advance(azure_queue.URLS_VALID_MS / 1000 + 1)
    expired = azure_error(await send(api, "GET", poll), 403, "AuthenticationFailed")
    assert "time frame" in (expired.findtext("AuthenticationErrorDetail") or "")


async def test_putting_and_clearing_messages_is_refused(api: Api) -> None:
    entry = (await poll_urls(api))["queues"][-1]
    put = await send(
        api, "POST", entry["signedPollUrl"], b"<QueueMessage><MessageText>eA==</MessageText></QueueMessage>"
    )
    azure_error(put, 403, "AuthorizationPermissionMismatch")
    azure_error(await send(api, "DELETE", entry["signedPollUrl"]), 403, "AuthorizationPermissionMismatch")
    azure_error(await send(api, "PATCH", entry["signedPollUrl"]), 405, "UnsupportedHttpVerb")
    await api.create_task()
    assert (await send(api, "HEAD", entry["signedPollUrl"])).status_code == 405
    (message,) = parse_messages(await send(api, "GET", entry["signedPollUrl"]))
    assert message["DequeueCount"] == "1"  # the HEAD received nothing


async def test_bad_pop_receipts_and_message_ids(api: Api) -> None:
    await api.create_task()
    entry = (await poll_urls(api))["queues"][-1]
    (message,) = parse_messages(await send(api, "GET", entry["signedPollUrl"]))
    garbage = delete_url(entry, {**message, "PopReceipt": "not a receipt"})
    azure_error(await send(api, "DELETE", garbage), 400, "InvalidQueryParameterValue")
    missing = delete_url(entry, message).replace(
        "popreceipt=" + quote(message["PopReceipt"], safe=""), "popreceipt="
    )
    azure_error(await send(api, "DELETE", missing), 400, "MissingRequiredQueryParameter")
    unknown = delete_url(entry, {**message, "MessageId": "x" * 300})
    azure_error(await send(api, "DELETE", unknown), 404, "MessageNotFound")
    bad_xml = await send(api, "PUT", delete_url(entry, message) + "&visibilitytimeout=1", b"<QueueMessage>")
    azure_error(bad_xml, 400, "InvalidXmlDocument")
    no_timeout = await send(api, "PUT", delete_url(entry, message))
    azure_error(no_timeout, 400, "MissingRequiredQueryParameter")
    bad_name = await send(api, "GET", BASE + "/api/queue/v1/_azure/Bad--Name/messages")
    azure_error(bad_name, 400, "InvalidResourceName")
    assert (await send(api, "DELETE", delete_url(entry, message))).status_code == 204


async def test_a_changed_priority_moves_the_message(api: Api) -> None:
    task_id, _ = await api.create_task(priority="low")
    moved = await api.call("POST", f"/task/{task_id}/priority", {"newPriority": "very-high"})
    assert moved.status_code == 200, moved.text
    urls = (await poll_urls(api))["queues"]
    assert parse_messages(await send(api, "GET", urls[PRIORITIES.index("low")]["signedPollUrl"])) == []
    (message,) = parse_messages(await send(api, "GET", urls[PRIORITIES.index("very-high")]["signedPollUrl"]))
    assert decoded(message)["taskId"] == task_id


async def test_garbage_gets_azure_errors_never_a_500(api: Api) -> None:
    await api.create_task()
    entry = (await poll_urls(api))["queues"][-1]
    poll = entry["signedPollUrl"]
    queue_path = urlsplit(poll).path.removesuffix("/messages")
    sas = urlsplit(poll).query
    paths = [
        f"{queue_path}/messages",
        f"{queue_path}/messages/x",
        f"{queue_path}/messages/%00",
        f"{queue_path}/messages/a/b",
        queue_path,
        "/api/queue/v1/_azure",
        "/api/queue/v1/_azure/q%0A/messages",
        "/api/queue/v1/_azure/" + "a" * 70 + "/messages",
    ]
    queries = [
        "",
        sas,
        sas + "&numofmessages=%FF",
        sas + "&visibilitytimeout=" + "9" * 5000,
        sas + "&popreceipt=%00&visibilitytimeout=1",
        sas.replace("se=", "se=x"),
        sas.replace("st=", "st=9999-99-99T"),
        sas + "&peekonly=true&numofmessages=-0",
        "sig=" + "A" * 5000 + "&sv=2019-07-07&se=x&sp=rp",
    ]
    bodies = [
        b"",
        b"<QueueMessage><MessageText>x</MessageText></QueueMessage>",
        b"\xff" * 10,
        b"<!DOCTYPE x [<!ENTITY a 'b'>]><QueueMessage/>",
    ]
    for method in ("GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"):
        for path in paths:
            for query in queries:
                for body in bodies if method in ("PUT", "POST") else [b""]:
                    response = await send(api, method, f"{BASE}{path}?{query}", body)
                    assert 200 <= response.status_code < 500, (method, path, query, body, response.text)
                    if response.status_code >= 400 and method != "HEAD":
                        assert response.headers["x-ms-error-code"], (method, path, query)
                        assert ElementTree.fromstring(response.content).tag == "Error"


async def test_a_run_of_stale_messages_does_not_hide_a_fresh_one(api: Api) -> None:
    stale = [(await api.create_task())[0] for _ in range(40)]
    fresh, _ = await api.create_task()
    for task_id in stale:  # claimed through claimWork's way: their messages are stale
        claimed = await api.call("POST", f"/task/{task_id}/runs/0/claim", WORKER)
        assert claimed.status_code == 200, claimed.text
    entry = (await poll_urls(api))["queues"][-1]
    (message,) = parse_messages(await send(api, "GET", entry["signedPollUrl"]))
    assert decoded(message)["taskId"] == fresh
    assert parse_messages(await send(api, "GET", entry["signedPollUrl"] + "&peekonly=true")) == []


async def test_a_queue_found_empty_shows_a_message_put_on_it_afterwards(api: Api) -> None:
    entry = (await poll_urls(api))["queues"][-1]
    assert parse_messages(await send(api, "GET", entry["signedPollUrl"])) == []  # now known empty
    task_id, _ = await api.create_task()
    (message,) = parse_messages(await send(api, "GET", entry["signedPollUrl"]))
    assert decoded(message)["taskId"] == task_id
    assert parse_messages(await send(api, "GET", entry["signedPollUrl"])) == []  # invisible
    updated = await send(api, "PUT", delete_url(entry, message) + "&visibilitytimeout=0")
    assert updated.status_code == 204
    (again,) = parse_messages(await send(api, "GET", entry["signedPollUrl"]))  # the update told
    assert again["MessageId"] == message["MessageId"]


async def test_a_message_id_that_could_not_be_ours_is_not_found(api: Api) -> None:
    # Found by the fuzzer: a NUL in the message id reached PostgreSQL, which refuses it (a 500).
    await api.create_task()
    entry = (await poll_urls(api))["queues"][-1]
    (message,) = parse_messages(await send(api, "GET", entry["signedPollUrl"]))
    for bad_id in ("\x00*", message["MessageId"] + "\x00", message["MessageId"].upper(), "x" * 300):
        url = delete_url(entry, {**message, "MessageId": quote(bad_id, safe="")})
        azure_error(await send(api, "PUT", url + "&visibilitytimeout=30"), 404, "MessageNotFound")
        azure_error(await send(api, "DELETE", url), 404, "MessageNotFound")
    proof = {"messageId": "\x00" + message["MessageId"], "receipt": message["PopReceipt"]}
    refused = await api.call("POST", f"/task/{decoded(message)['taskId']}/runs/0/claim", {**WORKER, **proof})
    assert 400 <= refused.status_code < 500, refused.text
    assert (await send(api, "DELETE", delete_url(entry, message))).status_code == 204
