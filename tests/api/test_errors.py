"""Error answers at the edge: TaskCluster's body shape, unknown routes and methods, bad JSON, big bodies,
unexpected failures."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from taskyard.api import blobs, livelog_v1
from taskyard.api.app import build_app
from taskyard.model import dates, slugid
from taskyard.storage.port import DatabaseUnavailable
from tests.api.conftest import (
    BASE,
    GOOD_PARAMS,
    PREFIX,
    TASK_QUEUE_ID,
    Api,
    assert_error,
    route_path,
    routes,
    task_definition,
)

ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
BODY_ROUTES = [r for r in routes() if r.method in ("POST", "PUT")]


async def test_error_body_shape(api: Api) -> None:
    task_id = slugid.nice()
    response = await api.call("GET", f"/task/{task_id}")
    body = assert_error(response, 404, "ResourceNotFound", names=[task_id])
    assert set(body) == {"code", "message", "requestInfo"}
    info = body["requestInfo"]
    assert info["method"] == "task"
    assert info["params"] == {"taskId": task_id}
    assert info["payload"] is None
    assert ISO_MS.match(info["time"]), info["time"]
    # The message ends with TaskCluster's footer naming the call.
    assert "method:     task" in body["message"]
    assert "errorCode:  ResourceNotFound" in body["message"]
    assert "statusCode: 404" in body["message"]

    # A body is echoed as sent, the path parameters as strings.
    path = f"/task/{task_id}/runs/0/exception"
    response = await api.call("POST", path, {"reason": "superseded"})
    body = assert_error(response, 400, "InputValidationError", names=["body.reason"])
    assert body["requestInfo"]["method"] == "reportException"
    assert body["requestInfo"]["params"] == {"taskId": task_id, "runId": "0"}
    assert body["requestInfo"]["payload"] == {"reason": "superseded"}


async def test_create_task_error_echoes_definition_with_defaults(api: Api) -> None:
    task_id = slugid.nice()
    sent = task_definition(api.clock, priority="normal")
    response = await api.call("PUT", f"/task/{task_id}", sent)
    body = assert_error(response, 400, "InputValidationError", names=["body.priority"])
    payload = body["requestInfo"]["payload"]
    expected_expires = dates.to_iso(dates.parse_iso(sent["deadline"]) + 365 * dates.DAY)
    assert payload == {
        **sent,
        "schedulerId": "-",
        "projectId": "none",
        "taskGroupId": task_id,
        "dependencies": [],
        "requires": "all-completed",
        "routes": [],
        "retries": 5,
        "scopes": [],
        "tags": {},
        "extra": {},
        "expires": expected_expires,
    }
    assert payload["priority"] == "normal"  # what was sent is kept, not replaced by the default
    assert not await api.task_exists(task_id)

    # The same on a 403.
    task_id = slugid.nice()
    response = await api.call("PUT", f"/task/{task_id}", task_definition(api.clock), creds=None)
    body = assert_error(response, 403, "InsufficientScopes")
    payload = body["requestInfo"]["payload"]
    assert payload["schedulerId"] == "-"
    assert payload["taskGroupId"] == task_id
    assert payload["priority"] == "lowest"
    assert not await api.task_exists(task_id)


async def test_create_task_semantic_errors_store_nothing(api: Api) -> None:
    """InputError after the schema (dates, unknown dependency) leaves no task, group or pending run."""
    now = api.clock()
    cases = {
        "deadline": {"deadline": dates.to_iso(now + 6 * dates.DAY)},
        "created": {"created": dates.to_iso(now - 20 * dates.MINUTE)},
        "expires": {"expires": dates.to_iso(now + 10 * dates.MINUTE)},
        "dependencies": {"dependencies": [slugid.nice()]},
        "taskQueueId": {"taskQueueId": TASK_QUEUE_ID, "provisionerId": "other-prov"},
    }
    for field, overrides in cases.items():
        task_id, group_id = slugid.nice(), slugid.nice()
        sent = task_definition(api.clock, taskGroupId=group_id, **overrides)
        response = await api.call("PUT", f"/task/{task_id}", sent)
        body = assert_error(response, 400, "InputError", names=[field])
        assert body["requestInfo"]["payload"]["taskGroupId"] == group_id
        assert not await api.task_exists(task_id), field
        group = await api.call("GET", f"/task-group/{group_id}")
        assert_error(group, 404, "ResourceNotFound")
    counts = await api.call("GET", f"/task-queues/{TASK_QUEUE_ID.replace('/', '%2F')}/counts")
    assert counts.json()["pendingTasks"] == 0


UNKNOWN_PATHS = [
    "/nothing-here",
    "/task",
    "/task/",
    f"/task/{GOOD_PARAMS['taskId']}/nothing",
    f"/task/{GOOD_PARAMS['taskId']}/runs/0",
    "/task-group",
    "/api/queue/v1/ping",
]


async def test_unknown_route_is_404_json(api: Api) -> None:
    for path in UNKNOWN_PATHS:
        assert_error(await api.call("GET", path), 404, "ResourceNotFound")
        assert_error(await api.call("GET", path, creds=None), 404, "ResourceNotFound")
    for url in ["/index.html", "/api/queue/v2/ping", "/api/nothing/v1/ping", "/ping"]:
        assert_error(await api.client.get(url), 404, "ResourceNotFound")


async def test_wrong_method_is_404_or_405_json(api: Api) -> None:
    """Every route answers a method it does not take with a JSON error (405 or 404), never a 5xx."""
    failures = []
    for r in routes():
        path = route_path(r)
        taken = {x.method for x in routes() if route_path(x) == path}
        for method in ("GET", "POST", "PUT", "DELETE", "PATCH"):
            if method in taken:
                continue
            response = await api.call(method, path)
            body = response.json() if response.headers.get("content-type") == "application/json" else None
            if response.status_code not in (404, 405) or not isinstance(body, dict) or "code" not in body:
                failures.append((method, r.path, response.status_code, response.text[:200]))
            elif body["code"] not in ("ResourceNotFound", "MethodNotAllowed"):
                failures.append((method, r.path, body["code"]))
    assert not failures, "\n".join(map(str, failures))


async def test_malformed_json_is_400(api: Api) -> None:
    bad_bodies = [b"{", b"{not json}", b"[1, 2", b"\xff\xfe\x00", b"{'a': 1}", b"NaN", b"1e400", b'"\\ud800"']
    failures = []
    for r in BODY_ROUTES:
        for raw in bad_bodies:
            response = await api.call(r.method, route_path(r), raw=raw)
            if response.status_code != 400 or response.json().get("code") != "MalformedPayload":
                failures.append((r.name, raw, response.status_code, response.text[:200]))
    assert not failures, "\n".join(map(str, failures))
    response = await api.call("POST", "/claim-work/" + TASK_QUEUE_ID.replace("/", "%2F"), raw=b"{oops")
    body = assert_error(response, 400, "MalformedPayload", names=["JSON"])
    assert body["requestInfo"]["method"] == "claimWork"


async def test_non_object_bodies_are_schema_errors(api: Api) -> None:
    for value in [None, [], "x", 1, True]:
        response = await api.call("POST", "/claim-work/" + TASK_QUEUE_ID.replace("/", "%2F"), value)
        assert_error(response, 400, "InputValidationError", names=["body"])
        response = await api.call("PUT", f"/task/{slugid.nice()}", value)
        assert_error(response, 400, "InputValidationError", names=["body"])


@pytest.fixture
async def small_api(api: Api) -> AsyncIterator[Api]:
    api.services.max_body_bytes = 2048
    yield api


async def test_oversized_bodies_are_413(small_api: Api) -> None:
    api = small_api
    task_id = slugid.nice()
    big = task_definition(api.clock, payload={"blob": "x" * 4096})
    response = await api.call("PUT", f"/task/{task_id}", big)
    assert_error(response, 413, "InputTooLarge", names=["2048"])
    assert not await api.task_exists(task_id)
    # Just under the limit is fine.
    response = await api.call(
        "PUT", f"/task/{task_id}", task_definition(api.clock, payload={"b": "x" * 1000})
    )
    assert response.status_code == 200, response.text

    # Every route with a body.
    failures = []
    for r in BODY_ROUTES:
        response = await small_api.call(r.method, route_path(r), raw=b'{"x": "' + b"y" * 3000 + b'"}')
        if response.status_code != 413 or response.json().get("code") != "InputTooLarge":
            failures.append((r.name, response.status_code, response.text[:200]))
    assert not failures, "\n".join(map(str, failures))

    # A streamed body with no Content-Length is cut off at the limit too.
    task_id = slugid.nice()

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"payload": {"blob": "'
        for _ in range(10):
            yield b"x" * 1024
        yield b'"}}'

    url = f"/api/queue/v1/task/{task_id}"
    response = await api.client.put(url, content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in response.request.headers
    assert_error(response, 413, "InputTooLarge")
    assert not await api.task_exists(task_id)

    # A Content-Length over the limit is refused before reading.
    url = f"/api/queue/v1/task/{slugid.nice()}"
    response = await api.client.put(
        url, content=b"{}", headers={"content-type": "application/json", "content-length": "999999"}
    )
    assert_error(response, 413, "InputTooLarge")


def nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


async def test_deeply_nested_bodies_are_not_a_500(api: Api) -> None:
    """Bodies nested 256-1024 levels deep parse (orjson reads up to 1024) but cannot be written back out
    (orjson writes at most 255): echoing one in an error body, or storing it, must not become a 500."""
    failures = []
    queue = TASK_QUEUE_ID.replace("/", "%2F")
    # A schema error whose echoed payload is deep: the error answer itself must not fail.
    claim = {"workerGroup": "wg", "workerId": "wid", "deep": nested(300)}
    response = await api.call("POST", f"/claim-work/{queue}", claim)
    if response.status_code != 400:
        failures.append(("claimWork", response.status_code, response.text[:100]))
    # A deep payload in an otherwise valid task: refused or stored, but not a 500, and not half-stored.
    for depth in (260, 600):
        task_id = slugid.nice()
        response = await api.call(
            "PUT", f"/task/{task_id}", task_definition(api.clock, payload=nested(depth))
        )
        if response.status_code >= 500:
            failures.append(("createTask", depth, response.status_code, response.text[:100]))
        if response.status_code >= 400:
            assert not await api.task_exists(task_id)
    # A deep body on a route that takes none, answered with an error that echoes it.
    response = await api.call("POST", f"/task/{slugid.nice()}/runs/0/reclaim", nested(300))
    if response.status_code >= 500:
        failures.append(("reclaimTask", response.status_code, response.text[:100]))
    assert not failures, "\n".join(map(str, failures))


async def test_trailing_slash_is_not_a_redirect(api: Api) -> None:
    """An empty last segment gets an answer (a JSON 404, or the route without the slash), not a 307
    to a URL the Hawk signature does not cover."""
    failures = []
    for path in ["/provisioners/api-prov/worker-types/", "/task-queues/", "/provisioners/"]:
        response = await api.call("GET", path)
        if not (200 <= response.status_code < 300 or 400 <= response.status_code < 500):
            failures.append((path, response.status_code, response.headers.get("location")))
    assert not failures, failures


async def test_an_unavailable_database_is_503_with_retry_after(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down() -> None:
        raise DatabaseUnavailable("the database is restarting")

    monkeypatch.setattr(api.queue.storage, "reader", down)
    monkeypatch.setattr(api.queue.storage, "transaction", down)
    task_id = slugid.nice()
    for method, path, body in [
        ("GET", f"/task/{task_id}/status", None),
        ("PUT", f"/task/{task_id}", task_definition(api.clock)),
        ("POST", f"/claim-work/{TASK_QUEUE_ID}", {"workerGroup": "wg", "workerId": "w", "tasks": 1}),
    ]:
        response = await (api.call(method, path) if body is None else api.call(method, path, body))
        assert_error(response, 503, "ServiceUnavailable", names=["restarting"])
        assert response.headers["retry-after"] == "2"


@pytest.mark.parametrize(
    ("path", "method", "params"),
    [
        (f"/task/{GOOD_PARAMS['taskId']}/status", "status", {"taskId": GOOD_PARAMS["taskId"]}),
        ("/_blobs/a/b/c", "blobGet", {}),
        (f"/_livelog/{GOOD_PARAMS['taskId']}/0", "liveLog", {"taskId": GOOD_PARAMS["taskId"], "runId": "0"}),
    ],
)
async def test_an_unexpected_error_is_a_500_with_an_incident_id_logged_once(
    api: Api,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    path: str,
    method: str,
    params: dict[str, str],
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a secret the client must not see")

    monkeypatch.setattr(api.queue.storage, "reader", broken)
    monkeypatch.setattr(blobs, "_store", broken)
    monkeypatch.setattr(livelog_v1, "_get", broken)
    # Nothing may reach the server: it would log the exception a second time.
    transport = httpx.ASGITransport(app=build_app(api.services), raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        response = await client.get(BASE + PREFIX + path)
    body = assert_error(response, 500, "InternalServerError")
    incident = body["requestInfo"]["incidentId"]
    assert slugid.is_valid(incident)
    assert f"the incident id is {incident}" in body["message"]
    assert "secret" not in response.text
    assert body["requestInfo"]["method"] == method
    assert body["requestInfo"]["params"] == params
    assert body["requestInfo"]["payload"] is None
    (logged,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert incident in logged.getMessage() and path in logged.getMessage()
    assert logged.exc_info is not None and isinstance(logged.exc_info[1], RuntimeError)
