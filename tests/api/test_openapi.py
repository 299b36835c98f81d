"""Each service's OpenAPI document: built from its route table, its schemas the API's own, and the
answers it documents matching what the API really answers."""

from __future__ import annotations

from typing import Any

import pytest

from taskyard.api import artifacts_v1, openapi, queue_v1
from taskyard.api.routing import PARAM_PATTERNS, Route
from taskyard.model import schema, task_definition
from tests.api.conftest import AUTH_PREFIX, TASK_QUEUE_ID, Api, route

TABLES = {"queue": [*queue_v1.ROUTES, *artifacts_v1.ROUTES]}
QUEUE = TASK_QUEUE_ID.replace("/", "%2F")
WORKER = {"workerGroup": "wg", "workerId": "wid"}


async def fetch_document(api: Api, service: str) -> dict[str, Any]:
    response = await api.client.get(f"/api/{service}/v1/openapi.json")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    doc: dict[str, Any] = response.json()
    return doc


@pytest.mark.parametrize("service", ["queue", "auth"])
async def test_every_route_is_an_operation(api: Api, service: str) -> None:
    doc = await fetch_document(api, service)
    assert doc["openapi"] == "3.1.0"
    assert doc["servers"] == [{"url": f"/api/{service}/v1"}]
    index = (await api.client.get(f"/api/{service}/v1/")).json()
    operations = {
        op["operationId"]: (method, path, op)
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
    }
    assert sorted(operations) == sorted(r["name"] for r in index["routes"])
    for listed in index["routes"]:
        method, path, op = operations[listed["name"]]
        assert method == listed["method"].lower()
        assert ":path" not in path
        assert set(op["responses"]) == {"200", "4XX", "5XX"}
    assert index["openapi"] == f"/api/{service}/v1/openapi.json"
    assert index["reference"] == f"/api/{service}/v1/reference"


async def test_scopes_security_and_schemas_come_from_the_route() -> None:
    doc = openapi.document("queue", TABLES["queue"])
    create = doc["paths"]["/task/{taskId}"]["put"]
    assert create["requestBody"]["content"]["application/json"]["schema"] == task_definition.REQUEST.json()
    assert create["security"] == [{"hawk": []}]
    assert create["x-taskcluster-scopes"] == route("createTask").scopes
    ping = doc["paths"]["/ping"]["get"]
    assert ping["security"] == [] and "x-taskcluster-scopes" not in ping
    claim = doc["paths"]["/claim-work/{taskQueueId}"]["post"]
    assert claim["parameters"][0]["schema"]["pattern"] == PARAM_PATTERNS["taskQueueId"]
    assert claim["requestBody"]["content"]["application/json"]["schema"] == queue_v1.CLAIM_WORK.json()
    assert doc["paths"]["/pending/{taskQueueId}"]["get"]["deprecated"] is True


def test_schema_rules_as_json_schema() -> None:
    rule = schema.obj(
        {
            "a": schema.string(pattern="^x$", max_length=3),
            "b": schema.array(schema.integer(minimum=1), max_items=2, unique=True),
            "c": schema.enum("p", "q"),
            "d": schema.any_of(schema.date_time(), schema.null()),
        },
        required=["a"],
        additional=False,
    )
    assert rule.json() == {
        "type": "object",
        "properties": {
            "a": {"type": "string", "pattern": "^x$", "maxLength": 3},
            "b": {
                "type": "array",
                "items": {"type": "integer", "minimum": 1},
                "maxItems": 2,
                "uniqueItems": True,
            },
            "c": {"enum": ["p", "q"]},
            "d": {"anyOf": [{"type": "string", "format": "date-time"}, {"enum": [None]}]},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
    assert schema.obj(additional=schema.string()).json() == {
        "type": "object",
        "additionalProperties": {"type": "string", "pattern": r"^[^\u0000]*$"},  # no NUL, the default
    }


def check_answer(r: Route, body: object) -> None:
    assert r.output is not None, r.name
    schema.validate(r.output, body, where=r.name)


async def test_real_answers_match_their_documented_schemas(api: Api) -> None:
    """Each route with a documented answer, called for real through a task's whole life."""
    check_answer(route("ping"), (await api.call("GET", "/ping")).json())
    task_id, created = await api.create_task()
    check_answer(route("createTask"), created)
    check_answer(route("status"), (await api.call("GET", f"/task/{task_id}/status")).json())
    claimed = (await api.call("POST", f"/claim-work/{QUEUE}", {**WORKER, "tasks": 1})).json()
    assert claimed["tasks"][0]["status"]["taskId"] == task_id
    for name, action in [("reportFailed", "failed"), ("rerunTask", None), ("cancelTask", None)]:
        path = f"/task/{task_id}/runs/0/{action}" if action else f"/task/{task_id}/{name[:-4]}"
        response = await api.call("POST", path)
        assert response.status_code == 200, (name, response.text)
        check_answer(route(name), response.json())
    other, _ = await api.create_task()
    claimed = (await api.call("POST", f"/claim-work/{QUEUE}", {**WORKER, "tasks": 1})).json()
    completed = await api.call("POST", f"/task/{other}/runs/0/completed")
    check_answer(route("reportCompleted"), completed.json())
    blocker, _ = await api.create_task()
    third, _ = await api.create_task(dependencies=[blocker])
    check_answer(route("scheduleTask"), (await api.call("POST", f"/task/{third}/schedule")).json())
    claimed = (await api.call("POST", f"/claim-work/{QUEUE}", {**WORKER, "tasks": 1})).json()
    last = claimed["tasks"][0]["status"]["taskId"]  # the blocker
    excepted = await api.call("POST", f"/task/{last}/runs/0/exception", {"reason": "worker-shutdown"})
    check_answer(route("reportException"), excepted.json())


async def test_error_answers_match_the_error_schema(api: Api) -> None:
    for response in [
        await api.call("GET", "/task/nosuchtaskZZZZZZZZZZZZ/status"),
        await api.call("PUT", "/task/fKz7yXv3Q0m2p9Wq1bC4dA", {"nonsense": True}),
        await api.call("GET", "/clients/nobody", prefix=AUTH_PREFIX),
        await api.client.get("/api/queue/v1/no-such-route"),
    ]:
        schema.validate(openapi.ERROR, response.json())


async def test_the_reference_page(api: Api) -> None:
    response = await api.client.get("/api/queue/v1/reference")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert '<section id="createTask">' in page and 'href="openapi.json"' in page
    assert "queue:create-task:" in page  # the scopes, shown
    assert "<script" not in page
    root = (await api.client.get("/api")).text
    assert 'href="/api/queue/v1/reference"' in root and 'href="/metrics"' in root


def test_the_page_escapes_what_it_shows() -> None:
    doc = openapi.document("queue", [Route("GET", "/x", "<b>name</b>", queue_v1.ping, "scope:<img>")])
    page = openapi.reference_page("queue", doc)
    assert "<b>name</b>" not in page and "&lt;b&gt;name&lt;/b&gt;" in page
    assert "<img>" not in page
