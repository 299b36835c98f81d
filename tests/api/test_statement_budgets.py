"""Each hot call's statement budget, on SQLite and PostgreSQL: the SQL statements and round trips
one request makes through the real app, counted with `taskyard.storage.counting` (never timed).

The budgets are exact (`==`): a call that makes one statement more fails here, and so does one
that makes one fewer, so that the table in bench/README.md ("Statement budgets") stays true:
change both together. What counts as a statement and as a round trip: `storage/counting.py`.

Each request is counted after a warm-up (the auth caches filled, the worker already recorded as
seen, which claimWork does at most once a minute per worker). No background loop runs in these
tests, and one would not be counted anyway: only the request's own context is.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ElementTree
from collections.abc import Awaitable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from taskyard.artifacts.local import LocalStore
from taskyard.model import dates, slugid
from taskyard.storage.counting import Tally, counting
from tests.api.conftest import BASE, TASK_QUEUE_ID, Api, Credentials, call_cost, task_definition
from tests.conftest import SECRET_KEY, FakeClock

QUEUE = TASK_QUEUE_ID.replace("/", "%2F")
WORKER = {"workerGroup": "wg", "workerId": "w1"}
POLL_PROVISIONER, POLL_WORKER_TYPE = "budget-prov", "poll-wt"

# call: (statements, round trips) on SQLite, and on PostgreSQL. bench/README.md explains each. A
# Hawk-signed call that writes records its MAC in its first transaction (storage/port.py, Replays):
# one statement more, which on PostgreSQL rides in a message sent anyway.
BUDGETS: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "createTask": ((9, 8), (8, 1)),
    "createTask, a dependency": ((8, 8), (8, 4)),
    "createTask, again": ((6, 6), (6, 4)),
    "claimWork": ((7, 7), (7, 3)),
    "claimWork, two tasks": ((9, 9), (9, 3)),
    "reclaimTask": ((4, 4), (2, 1)),
    "reportCompleted": ((6, 6), (4, 1)),
    "reportFailed": ((6, 6), (4, 1)),
    "reportException": ((6, 6), (4, 1)),
    "status": ((1, 1), (1, 1)),
    "createArtifact, s3": ((5, 5), (5, 4)),
    "createArtifact, reference": ((6, 6), (6, 4)),
    "upload (PUT to putUrl)": ((5, 5), (5, 5)),
    "finishArtifact": ((1, 1), (1, 1)),
    "getArtifact": ((1, 1), (1, 1)),
    "getLatestArtifact": ((1, 1), (1, 1)),
    "Get Messages, empty queue": ((1, 1), (1, 1)),
    "Get Messages, one message": ((5, 5), (5, 5)),
    "claimTask, quoting the message": ((10, 10), (10, 5)),
    "Delete Message": ((1, 1), (1, 1)),
}

# What each call spent, as counted: {call: {column: (statements, round trips)}}, the column as in
# BUDGETS. bench/budgets.py runs this file and prints it beside the budgets (bench/aims.py, aim 2).
SPENT: dict[str, dict[int, tuple[int, int]]] = {}


@pytest.fixture
def blobs(tmp_path: Path, clock: FakeClock) -> LocalStore:
    """s3 artifacts in a local store that the app serves, as `taskyard up` keeps them."""
    return LocalStore(str(tmp_path / "blobs"), BASE, SECRET_KEY, max_bytes=10_000, clock=clock)


def backend(api: Api) -> int:
    """BUDGETS' column for the api's database: 0 SQLite, 1 PostgreSQL."""
    return 0 if api.queue.storage.url_for_humans.startswith("sqlite") else 1


async def within_budget(
    api: Api, call: str, request: Awaitable[httpx.Response], status: int = 200
) -> httpx.Response:
    """Send `request`, counting its statements; fail unless it answers `status` within the budget."""
    with counting() as tally:
        response = await request
    assert response.status_code == status, response.text
    assert_budget(api, call, tally)
    return response


def assert_budget(api: Api, call: str, tally: Tally) -> None:
    budget = BUDGETS[call][backend(api)]
    spent = call_cost(tally)
    SPENT.setdefault(call, {})[backend(api)] = spent
    assert spent == budget, f"{call}: {spent} (statements, round trips), not {budget}: {tally.trips}"


async def warm(api: Api) -> None:
    """One whole lifecycle, so that what follows meets filled caches and a worker already seen."""
    task_id, creds = await running(api)
    report = await api.call("POST", f"/task/{task_id}/runs/0/completed", creds=creds)
    assert report.status_code == 200, report.text


async def running(api: Api) -> tuple[str, Credentials]:
    """A new task claimed through claimWork, and its run's credentials."""
    task_id, _ = await api.create_task()
    response = await api.call("POST", f"/claim-work/{QUEUE}", WORKER)
    assert response.status_code == 200, response.text
    (claim,) = response.json()["tasks"]
    assert claim["status"]["taskId"] == task_id
    return task_id, Credentials.from_response(claim["credentials"])


def artifact_path(task_id: str, name: str, run: int | None = 0) -> str:
    where = f"/task/{task_id}" if run is None else f"/task/{task_id}/runs/{run}"
    return f"{where}/artifacts/{quote(name, safe='')}"


async def test_create_task(api: Api) -> None:
    await warm(api)
    first, second = slugid.nice(), slugid.nice()
    await within_budget(api, "createTask", api.call("PUT", f"/task/{first}", task_definition(api.clock)))
    body = task_definition(api.clock, taskGroupId=first, dependencies=[first])
    await within_budget(api, "createTask, a dependency", api.call("PUT", f"/task/{second}", body))
    await within_budget(api, "createTask, again", api.call("PUT", f"/task/{second}", body))


async def test_claim_work(api: Api) -> None:
    await warm(api)
    task_id, _ = await api.create_task()
    response = await within_budget(api, "claimWork", api.call("POST", f"/claim-work/{QUEUE}", WORKER))
    assert [claim["status"]["taskId"] for claim in response.json()["tasks"]] == [task_id]
    low, _ = await api.create_task(priority="low")
    high, _ = await api.create_task(priority="high")
    two = api.call("POST", f"/claim-work/{QUEUE}", {**WORKER, "tasks": 2})
    response = await within_budget(api, "claimWork, two tasks", two)
    assert [claim["status"]["taskId"] for claim in response.json()["tasks"]] == [high, low]


async def test_reclaim_task_and_the_reports(api: Api) -> None:
    await warm(api)
    task_id, creds = await running(api)
    await within_budget(api, "reclaimTask", api.call("POST", f"/task/{task_id}/runs/0/reclaim", creds=creds))
    await within_budget(
        api, "reportCompleted", api.call("POST", f"/task/{task_id}/runs/0/completed", creds=creds)
    )
    task_id, creds = await running(api)
    await within_budget(api, "reportFailed", api.call("POST", f"/task/{task_id}/runs/0/failed", creds=creds))
    task_id, creds = await running(api)
    body = {"reason": "malformed-payload"}
    report = api.call("POST", f"/task/{task_id}/runs/0/exception", body, creds=creds)
    await within_budget(api, "reportException", report)
    status = await within_budget(api, "status", api.call("GET", f"/task/{task_id}/status"))
    assert status.json()["status"]["state"] == "exception"


async def test_the_artifact_calls_of_a_worker_and_a_downloader(api: Api) -> None:
    await warm(api)
    task_id, creds = await running(api)
    expires = dates.to_iso(api.clock() + dates.HOUR)
    s3 = {"storageType": "s3", "contentType": "text/plain", "expires": expires}
    create = api.call("POST", artifact_path(task_id, "public/log.txt"), s3, creds=creds)
    put_url = (await within_budget(api, "createArtifact, s3", create)).json()["putUrl"]
    upload = api.client.put(put_url, content=b"hello", headers={"content-type": "text/plain"})
    await within_budget(api, "upload (PUT to putUrl)", upload)
    reference = {**s3, "storageType": "reference", "url": "https://example.com/x"}
    create = api.call("POST", artifact_path(task_id, "public/ref"), reference, creds=creds)
    await within_budget(api, "createArtifact, reference", create)
    finish = api.call("PUT", artifact_path(task_id, "public/log.txt"), {"uploadId": task_id}, creds=creds)
    await within_budget(api, "finishArtifact", finish, 400)  # no object artifacts: TaskCluster's 400
    got = await within_budget(
        api, "getArtifact", api.call("GET", artifact_path(task_id, "public/log.txt")), 303
    )
    latest = api.call("GET", artifact_path(task_id, "public/log.txt", None))
    assert (await within_budget(api, "getLatestArtifact", latest, 303)).json() == got.json()
    assert (await api.client.get(got.headers["location"])).content == b"hello"


async def test_the_poll_protocol(api: Api) -> None:
    await warm(api)
    task_id, _ = await api.create_task(taskQueueId=f"{POLL_PROVISIONER}/{POLL_WORKER_TYPE}")
    # In a task of its own, as the server runs each request: in this one, the signed request it
    # remembers (and, its task queue being known since createTask, never writes) would be counted
    # as the next request's.
    urls = await asyncio.create_task(api.call("GET", f"/poll-task-url/{POLL_PROVISIONER}/{POLL_WORKER_TYPE}"))
    highest, lowest = urls.json()["queues"][0], urls.json()["queues"][-1]
    await within_budget(api, "Get Messages, empty queue", api.client.get(highest["signedPollUrl"]))
    got = await within_budget(api, "Get Messages, one message", api.client.get(lowest["signedPollUrl"]))
    (message,) = [{field.tag: field.text or "" for field in m} for m in ElementTree.fromstring(got.content)]
    proof: dict[str, Any] = {**WORKER, "messageId": message["MessageId"], "receipt": message["PopReceipt"]}
    claim = api.call("POST", f"/task/{task_id}/runs/0/claim", proof)
    await within_budget(api, "claimTask, quoting the message", claim)
    url = lowest["signedDeleteUrl"].replace("{{messageId}}", message["MessageId"])
    url = url.replace("{{popReceipt}}", quote(message["PopReceipt"], safe=""))
    await within_budget(api, "Delete Message", api.client.delete(url), 204)


async def test_a_count_holds_only_its_own_context(api: Api) -> None:
    """What a task started before the count runs (a background loop) is not counted."""
    await warm(api)
    go = asyncio.Event()

    async def background() -> None:
        await go.wait()
        async with api.queue.storage.reader() as session:
            await session.fetchval("any_poll_message")

    loop = asyncio.create_task(background())
    with counting() as tally:
        go.set()
        await loop
        await api.call("GET", f"/task/{slugid.nice()}/status")
    assert (tally.statements, tally.round_trips, tally.trips) == (1, 1, ["get_task"])
