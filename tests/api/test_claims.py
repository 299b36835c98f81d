"""The worker protocol through the app: claimWork's answer, and task credentials that authenticate."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from taskyard.auth import static
from taskyard.model import dates
from tests.api.conftest import TASK_QUEUE_ID, Api, Credentials, assert_error

QUEUE = TASK_QUEUE_ID.replace("/", "%2F")
WORKER = {"workerGroup": "wg-1", "workerId": "worker-1"}
ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


async def claim_one(api: Api, task_id: str) -> dict[str, Any]:
    response = await api.call("POST", f"/claim-work/{QUEUE}", {**WORKER, "tasks": 2})
    assert response.status_code == 200, response.text
    claims = response.json()["tasks"]
    assert [c["status"]["taskId"] for c in claims] == [task_id]
    claim: dict[str, Any] = claims[0]
    return claim


async def test_claim_work_answer(api: Api) -> None:
    task_id, _ = await api.create_task(scopes=["secrets:get:project/x"], routes=["index.a"])
    definition = (await api.call("GET", f"/task/{task_id}")).json()
    started = time.monotonic()
    claim = await claim_one(api, task_id)
    assert time.monotonic() - started < api.queue.config.claim_work_timeout  # answered at once

    assert set(claim) == {"status", "runId", "workerGroup", "workerId", "takenUntil", "task", "credentials"}
    assert claim["runId"] == 0
    assert claim["workerGroup"] == "wg-1" and claim["workerId"] == "worker-1"
    assert claim["task"] == definition
    assert ISO_MS.match(claim["takenUntil"])
    taken_until = dates.parse_iso(claim["takenUntil"])
    assert taken_until == api.clock() + api.queue.config.claim_timeout * 1000

    status = claim["status"]
    assert status["taskId"] == task_id and status["state"] == "running"
    run = status["runs"][0]
    assert run["state"] == "running" and run["workerGroup"] == "wg-1" and run["workerId"] == "worker-1"
    assert run["takenUntil"] == claim["takenUntil"]

    creds = claim["credentials"]
    assert set(creds) == {"clientId", "accessToken", "certificate"}
    assert re.fullmatch(rf"task-client/{task_id}/0/on/wg-1/worker-1/until/\d+(\.\d+)?", creds["clientId"])
    assert float(creds["clientId"].rsplit("/", 1)[1]) * 1000 == taken_until
    assert isinstance(creds["accessToken"], str) and len(creds["accessToken"]) >= 40
    cert = json.loads(creds["certificate"])
    assert cert["version"] == 1
    assert cert["issuer"] == static.QUEUE_CLIENT_ID
    assert cert["expiry"] == taken_until
    assert cert["start"] <= api.clock()
    assert cert["scopes"] == [
        f"queue:reclaim-task:{task_id}/0",
        f"queue:resolve-task:{task_id}/0",
        f"queue:create-artifact:{task_id}/0",
        "secrets:get:project/x",
    ]
    assert {"seed", "signature"} <= set(cert)


async def test_claim_work_on_an_empty_queue_answers_no_tasks(api: Api) -> None:
    started = time.monotonic()
    response = await api.call("POST", f"/claim-work/{QUEUE}", WORKER)
    assert response.status_code == 200
    assert response.json() == {"tasks": []}
    assert time.monotonic() - started >= api.queue.config.claim_work_timeout * 0.9


async def test_task_credentials_authenticate_the_worker_protocol(api: Api) -> None:
    task_id, _ = await api.create_task()
    claim = await claim_one(api, task_id)
    creds = Credentials.from_response(claim["credentials"])

    reclaim = await api.call("POST", f"/task/{task_id}/runs/0/reclaim", creds=creds)
    assert reclaim.status_code == 200, reclaim.text
    body = reclaim.json()
    assert set(body) == {"status", "runId", "workerGroup", "workerId", "takenUntil", "credentials"}
    assert body["runId"] == 0 and body["workerGroup"] == "wg-1" and body["workerId"] == "worker-1"
    assert body["status"]["state"] == "running"
    fresh = Credentials.from_response(body["credentials"])
    assert fresh.client_id.startswith(f"task-client/{task_id}/0/on/wg-1/worker-1/until/")

    # The fresh credentials work as well; so do the first ones until they expire.
    done = await api.call("POST", f"/task/{task_id}/runs/0/completed", creds=fresh)
    assert done.status_code == 200, done.text
    assert done.json()["status"]["state"] == "completed"
    again = await api.call("POST", f"/task/{task_id}/runs/0/completed", creds=creds)
    assert again.status_code == 200, again.text
    # A different resolution of the same run is a conflict, not an authentication problem.
    failed = await api.call("POST", f"/task/{task_id}/runs/0/failed", creds=fresh)
    assert_error(failed, 409, "RequestConflict")


async def test_task_credentials_report_exception_with_a_body(api: Api) -> None:
    task_id, _ = await api.create_task()
    creds = Credentials.from_response((await claim_one(api, task_id))["credentials"])
    response = await api.call(
        "POST", f"/task/{task_id}/runs/0/exception", {"reason": "worker-shutdown"}, creds=creds
    )
    assert response.status_code == 200, response.text
    runs = response.json()["status"]["runs"]
    assert [r["state"] for r in runs] == ["exception", "pending"]
    assert runs[0]["reasonResolved"] == "worker-shutdown"


async def test_tampered_task_credentials_are_401(api: Api) -> None:
    task_id, _ = await api.create_task()
    claim = await claim_one(api, task_id)
    creds = claim["credentials"]
    path = f"/task/{task_id}/runs/0/reclaim"

    cert = json.loads(creds["certificate"])
    cert["scopes"] = [*cert["scopes"], "*"]
    widened = Credentials(creds["clientId"], creds["accessToken"], json.dumps(cert))
    response = await api.call("POST", path, creds=widened)
    assert_error(response, 401, "AuthenticationFailed")
    assert response.headers["www-authenticate"] == "hawk"

    renamed = Credentials(
        creds["clientId"].replace("worker-1", "worker-2"), creds["accessToken"], creds["certificate"]
    )
    assert_error(await api.call("POST", path, creds=renamed), 401, "AuthenticationFailed")

    no_cert = Credentials(creds["clientId"], creds["accessToken"])
    assert_error(await api.call("POST", path, creds=no_cert), 401, "AuthenticationFailed")

    wrong_token = Credentials(creds["clientId"], creds["accessToken"][:-2] + "AA", creds["certificate"])
    assert_error(await api.call("POST", path, creds=wrong_token), 401, "AuthenticationFailed")

    # Nothing of that changed the run.
    status = (await api.call("GET", f"/task/{task_id}/status")).json()["status"]
    assert status["runs"][0]["takenUntil"] == claim["takenUntil"]
