"""Authentication: anything not signed by a known client is a 401 with `www-authenticate: hawk`
(docs/protocol.md, Authentication); unsigned calls are anonymous. Clients made through the auth API:
test_auth_service.py.
"""

from __future__ import annotations

from typing import Any

import requests
import taskcluster

from tests.e2e.conftest import ROOT_CLIENT_ID, Server
from tests.e2e.helpers import WORKER, create, definition, refused, signed, slug


def assert_401(reply: requests.Response) -> dict[str, Any]:
    assert reply.status_code == 401, reply.text
    assert reply.headers.get("www-authenticate", "").lower() == "hawk"
    body: dict[str, Any] = reply.json()
    assert body["code"] == "AuthenticationFailed"
    assert set(body) >= {"code", "message", "requestInfo"}
    return body


def test_unsigned_create_task_is_403(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    task_id = slug()
    reply = requests.put(f"{server.api}/task/{task_id}", json=definition(tq), timeout=30)
    assert reply.status_code == 403, reply.text
    body = reply.json()
    assert body["code"] == "InsufficientScopes"
    assert "queue:create-task:project:none" in body["message"]
    assert body["requestInfo"]["method"] == "createTask"
    assert body["requestInfo"]["params"] == {"taskId": task_id}
    # As TaskCluster does, even a 401 echoes the definition with its defaults filled in.
    assert body["requestInfo"]["payload"]["schedulerId"] == "-"
    assert body["requestInfo"]["payload"]["taskGroupId"] == task_id
    with refused(404, "ResourceNotFound"):
        queue.status(task_id)


def test_create_task_with_the_client_and_no_credentials_is_403(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    anonymous = server.client(credentials={})
    task_id = slug()
    with refused(403, "InsufficientScopes"):
        anonymous.createTask(task_id, definition(tq))
    with refused(404, "ResourceNotFound"):
        queue.status(task_id)


def test_wrong_access_token_is_401(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    task_id = slug()
    url = f"{server.api}/task/{task_id}"
    assert_401(
        signed(
            "PUT", url, definition(tq), {"clientId": ROOT_CLIENT_ID, "accessToken": server.access_token + "x"}
        )
    )

    wrong = server.client(credentials={"clientId": ROOT_CLIENT_ID, "accessToken": "not-the-token"})
    with refused(401, "AuthenticationFailed"):
        wrong.createTask(task_id, definition(tq))
    with refused(404, "ResourceNotFound"):
        queue.status(task_id)
    # The same request with the right token goes through.
    good = signed("PUT", url, definition(tq), server.credentials)
    assert good.status_code == 200, good.text
    assert good.json()["status"]["taskId"] == task_id


def test_unknown_client_is_401(server: Server, tq: str) -> None:
    url = f"{server.api}/task/{slug()}"
    assert_401(
        signed("PUT", url, definition(tq), {"clientId": "someone/else", "accessToken": server.access_token})
    )
    stranger = server.client(credentials={"clientId": "someone/else", "accessToken": server.access_token})
    with refused(401, "AuthenticationFailed"):
        stranger.createTask(slug(), definition(tq))


def test_worker_calls_need_credentials(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq)
    for reply in (
        requests.post(f"{server.api}/claim-work/{tq}", json={**WORKER, "tasks": 1}, timeout=30),
        requests.post(f"{server.api}/task/{task_id}/runs/0/completed", timeout=30),
        requests.post(f"{server.api}/task/{task_id}/cancel", timeout=30),
    ):
        assert reply.status_code == 403, reply.text
        assert reply.json()["code"] == "InsufficientScopes"
    # Nothing happened to the task.
    assert queue.status(task_id)["status"]["state"] == "pending"


def test_ping_needs_no_credentials(server: Server) -> None:
    reply = requests.get(f"{server.api}/ping", timeout=30)
    assert reply.status_code == 200
    assert reply.json()["alive"] is True
    for path in ("__heartbeat__", "__lbheartbeat__"):
        assert requests.get(f"{server.api}/{path}", timeout=30).json() == {}
    assert "version" in requests.get(f"{server.api}/__version__", timeout=30).json()


def test_signed_urls_work_for_reads(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq)
    url = queue.buildSignedUrl("status", task_id)
    assert "bewit=" in url
    reply = requests.get(url, timeout=30)
    assert reply.status_code == 200, reply.text
    assert reply.json() == queue.status(task_id)
    forged = url.replace("bewit=", "bewit=x")
    assert requests.get(forged, timeout=30).status_code == 401
