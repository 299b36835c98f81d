"""Authentication at the edge: 401 AuthenticationFailed with `www-authenticate: hawk`, built-ins unsigned."""

from __future__ import annotations

import base64
import json
import time

import httpx
import taskcluster

from taskyard.api.routing import Route
from taskyard.auth import hawk, static
from taskyard.auth.nonces import SeenRequests
from taskyard.model import slugid
from tests.api.conftest import (
    BASE,
    PREFIX,
    ROOT,
    ROOT_TOKEN,
    Api,
    Credentials,
    assert_error,
    hawk_header,
    route_path,
    routes,
    valid_body,
)


def assert_401(response: httpx.Response, *words: str) -> None:
    assert_error(response, 401, "AuthenticationFailed", names=words)
    assert response.headers["www-authenticate"] == "hawk"


async def test_builtins_answer_unsigned(api: Api) -> None:
    for path, expected in [("/__heartbeat__", {}), ("/__lbheartbeat__", {})]:
        response = await api.call("GET", path, creds=None)
        assert response.status_code == 200 and response.json() == expected
    ping = await api.call("GET", "/ping", creds=None)
    assert ping.status_code == 200
    assert ping.json()["alive"] is True
    assert isinstance(ping.json()["uptime"], int | float)
    version = await api.call("GET", "/__version__", creds=None)
    assert version.status_code == 200 and "version" in version.json()
    # Signed is fine too.
    assert (await api.call("GET", "/ping")).status_code == 200


def checked_before_loading(route: Route) -> bool:
    return not route.loads


async def test_unsigned_requests_to_scoped_routes_are_403(api: Api) -> None:
    """Without credentials a caller is anonymous: `assume:anonymous` and its role (public artifacts only)."""
    failures = []
    scoped = routes(signed=True)
    assert len(scoped) > 30
    for r in scoped:
        body = valid_body(r.name, api.clock())
        path = route_path(r)
        response = await (
            api.call(r.method, path, creds=None)
            if body is None
            else api.call(r.method, path, body, creds=None)
        )
        if response.status_code == 404 and not checked_before_loading(r):
            continue  # its scopes name the task's or group's own fields: an unknown one is 404 first
        if (
            response.status_code != 403
            or response.json().get("code") != "InsufficientScopes"
            or "requires Taskcluster credentials that satisfy" not in response.json()["message"]
            or response.json()["requestInfo"]["method"] != r.name
        ):
            failures.append((r.name, response.status_code, dict(response.headers), response.text[:200]))
    assert not failures, "\n".join(map(str, failures))


async def test_bad_credentials_are_401(api: Api) -> None:
    task_id = slugid.nice()
    path = f"/task/{task_id}"
    body = valid_body("createTask", api.clock())
    wrong_token = Credentials(static.ROOT_CLIENT_ID, ROOT_TOKEN + "x")
    unknown = Credentials("no/such/client", ROOT_TOKEN)
    assert_401(await api.call("PUT", path, body, creds=wrong_token), "mac")
    assert_401(await api.call("GET", path, creds=wrong_token), "mac")
    assert_401(await api.call("PUT", path, body, creds=unknown))
    assert_401(await api.call("GET", "/task-queues", creds=unknown))
    # The queue's own static client is derived from the root token; the wrong derivation fails.
    queue_client = Credentials(
        static.QUEUE_CLIENT_ID, static.derived_token("other-root", static.QUEUE_CLIENT_ID)
    )
    assert_401(await api.call("GET", "/task-queues", creds=queue_client))
    right = Credentials(static.QUEUE_CLIENT_ID, static.derived_token(ROOT_TOKEN, static.QUEUE_CLIENT_ID))
    assert (await api.call("GET", "/task-queues", creds=right)).status_code == 200
    assert not await api.task_exists(task_id)


async def test_timestamps_outside_the_skew_are_401(api: Api) -> None:
    now = int(time.time())
    for skew in (-3600, -16 * 60, 16 * 60, 3600):
        response = await api.call("GET", "/task-queues", timestamp=now + skew)
        assert_401(response, "Stale timestamp")
    assert (await api.call("GET", "/task-queues", timestamp=now - 60)).status_code == 200


async def test_tampered_requests_are_401(api: Api) -> None:
    task_id = slugid.nice()
    url = f"{BASE}{PREFIX}/task/{task_id}"
    signed = b'{"a": 1}'
    header = hawk_header("PUT", url, signed, ROOT)
    json_type = {"content-type": "application/json"}

    # Body changed after signing: the payload hash no longer matches.
    body = valid_body("createTask", api.clock())
    tampered = await api.client.put(
        url, content=taskcluster.utils.dumpJson(body).encode(), headers={"authorization": header, **json_type}
    )
    assert_401(tampered, "payload hash")
    assert not await api.task_exists(task_id)

    # Path, method, host or port changed: the MAC no longer matches.
    other_url = f"{BASE}{PREFIX}/task/{slugid.nice()}"
    response = await api.client.put(other_url, content=signed, headers={"authorization": header, **json_type})
    assert_401(response, "mac")
    get_header = hawk_header("GET", url, b"", ROOT)
    assert_401(await api.client.put(url, headers={"authorization": get_header}), "mac")
    get_header = hawk_header("GET", "http://elsewhere.example" + PREFIX + "/task-queues", b"", ROOT)
    assert_401(await api.client.get(PREFIX + "/task-queues", headers={"authorization": get_header}), "mac")
    get_header = hawk_header("GET", "http://testserver:8080" + PREFIX + "/task-queues", b"", ROOT)
    assert_401(await api.client.get(PREFIX + "/task-queues", headers={"authorization": get_header}), "mac")

    # Query string added after signing.
    get_header = hawk_header("GET", BASE + PREFIX + "/task-queues", b"", ROOT)
    response = await api.client.get(PREFIX + "/task-queues?limit=1", headers={"authorization": get_header})
    assert_401(response, "mac")


async def test_malformed_authorization_headers_are_401(api: Api) -> None:
    for header in [
        "Bearer abc",
        "Hawk",
        "Hawk ",
        'Hawk id="x"',
        'Hawk id="static/taskyard/root", ts="1", nonce="n", mac="m", bogus="1"',
        'Hawk id="static/taskyard/root", ts="x", nonce="n", mac="AAAA"',
        "Hawk " + "x" * 5000,
        "\u00e9",
    ]:
        sent = {"authorization": header.encode()}  # bytes: httpx would refuse non-ASCII text
        response = await api.client.get(PREFIX + "/task-queues", headers=sent)
        assert_401(response)


async def test_taskcluster_client_signed_url_works(api: Api) -> None:
    """A bewit from `taskcluster.Queue.buildSignedUrl` (a GET with no header) authenticates."""
    task_id, _ = await api.create_task()
    client = taskcluster.Queue(
        {"rootUrl": BASE, "credentials": {"clientId": ROOT.client_id, "accessToken": ROOT_TOKEN}}
    )
    url = client.buildSignedUrl("task", task_id)
    assert "bewit=" in url
    response = await api.client.get(url)
    assert response.status_code == 200, response.text
    assert response.json()["taskQueueId"] == "api-prov/api-wt"
    wrong = taskcluster.Queue(
        {"rootUrl": BASE, "credentials": {"clientId": ROOT.client_id, "accessToken": "not-the-token"}}
    )
    assert_401(await api.client.get(wrong.buildSignedUrl("task", task_id)), "mac")


async def test_a_replayed_request_is_refused(api: Api) -> None:
    """TaskCluster accepts a signed request again within its 15-minute skew; taskyard once only."""
    url = f"{BASE}{PREFIX}/task/{slugid.nice()}/status"
    header = hawk_header("GET", url, b"", ROOT)
    first = await api.client.get(url, headers={"authorization": header})
    assert first.status_code == 404  # accepted: no such task
    again = await api.client.get(url, headers={"authorization": header})
    assert_401(again, "Replayed request", "sign each request anew")
    fresh = await api.call("GET", url.removeprefix(BASE + PREFIX))  # signed anew: a new nonce
    assert fresh.status_code == 404


async def test_a_replayed_write_is_refused_by_a_process_that_never_saw_it(api: Api) -> None:
    """As after a restart, or at another process: what refuses it is the database, not memory.
    A replayed read changes nothing and is left to each process's memory."""
    task_id, _ = await api.create_task()
    assert (await api.call("POST", f"/task/{task_id}/cancel")).status_code == 200
    url = f"{BASE}{PREFIX}/task/{task_id}/rerun"
    rerun = hawk_header("POST", url, b"", ROOT)
    status_url = f"{BASE}{PREFIX}/task/{task_id}/status"
    status = hawk_header("GET", status_url, b"", ROOT)
    assert (await api.client.post(url, headers={"authorization": rerun})).status_code == 200
    assert (await api.client.get(status_url, headers={"authorization": status})).status_code == 200
    assert (await api.call("POST", f"/task/{task_id}/cancel")).status_code == 200
    api.services.auth.seen_requests = SeenRequests(hawk.TIMESTAMP_SKEW_MS)  # a process that never saw it
    assert_401(await api.client.post(url, headers={"authorization": rerun}), "Replayed request")
    assert (await api.client.get(status_url, headers={"authorization": status})).status_code == 200
    runs = (await api.call("GET", f"/task/{task_id}/status")).json()["status"]["runs"]
    assert [run["state"] for run in runs] == ["exception", "exception"]


async def test_a_client_id_no_client_can_have_is_a_401_without_a_query(api: Api) -> None:
    """A certificate's issuer or a bewit's id with a NUL was a 500 on PostgreSQL, whose text refuses it."""
    now = int(time.time() * 1000)
    certificate = {
        "version": 1,
        "scopes": [],
        "start": now,
        "expiry": now + 60_000,
        "seed": "s" * 44,
        "signature": "x",
        "issuer": "\x00",
    }
    temporary = Credentials("temp/client", ROOT_TOKEN, json.dumps(certificate))
    assert_401(await api.call("GET", "/task-queues", creds=temporary), "not found")

    bewit = base64.urlsafe_b64encode(b"a\x00b\\9999999999\\mac\\").decode().rstrip("=")
    assert_401(await api.call("GET", "/task-queues", creds=None, query={"bewit": bewit}), "not found")
