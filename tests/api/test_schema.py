"""Bodies that break their schema: 400 InputValidationError, the message naming the field and the rule."""

from __future__ import annotations

from typing import Any

from taskyard.model import dates, slugid
from tests.api.conftest import TASK_QUEUE_ID, Api, assert_error, task_definition

QUEUE = TASK_QUEUE_ID.replace("/", "%2F")
TASK = "fKz7yXv3Q0m2p9Wq1bC4dA"
WORKER = f"/provisioners/{TASK_QUEUE_ID.replace('/', '/worker-types/')}/workers/wg/wid"
CLAIM = {"workerGroup": "wg", "workerId": "wid"}

# (method, path, body, field named in the message, a word of the rule)
CASES: list[tuple[str, str, Any, str, str]] = [
    ("POST", f"/claim-work/{QUEUE}", {**CLAIM, "tasks": 33}, "body.tasks", "32"),
    ("POST", f"/claim-work/{QUEUE}", {**CLAIM, "tasks": 0}, "body.tasks", "1"),
    ("POST", f"/claim-work/{QUEUE}", {**CLAIM, "tasks": 1.5}, "body.tasks", "integer"),
    ("POST", f"/claim-work/{QUEUE}", {**CLAIM, "tasks": "1"}, "body.tasks", "integer"),
    ("POST", f"/claim-work/{QUEUE}", {**CLAIM, "tasks": True}, "body.tasks", "integer"),
    ("POST", f"/claim-work/{QUEUE}", {**CLAIM, "tasks": 1e300}, "body.tasks", "32"),
    ("POST", f"/claim-work/{QUEUE}", {"workerGroup": "wg"}, "body.workerId", "required"),
    ("POST", f"/claim-work/{QUEUE}", {**CLAIM, "workerId": "no.dots"}, "body.workerId", "match"),
    ("POST", f"/claim-work/{QUEUE}", {**CLAIM, "workerId": 7}, "body.workerId", "string"),
    ("POST", f"/claim-work/{QUEUE}", {**CLAIM, "extra": 1}, "body.extra", "not allowed"),
    ("POST", f"/claim-work/{QUEUE}", {**CLAIM, "\u00e9": 1}, 'body["\\u00e9"]', "not allowed"),
    ("POST", f"/task/{TASK}/runs/0/claim", {"workerGroup": "wg"}, "body.workerId", "required"),
    ("POST", f"/task/{TASK}/runs/0/exception", {"reason": "superseded"}, "body.reason", "one of"),
    ("POST", f"/task/{TASK}/runs/0/exception", {"reason": "canceled"}, "body.reason", "one of"),
    ("POST", f"/task/{TASK}/runs/0/exception", {}, "body.reason", "required"),
    ("POST", f"/task/{TASK}/runs/0/exception", {"reason": None}, "body.reason", "one of"),
    (
        "POST",
        f"/task/{TASK}/runs/0/exception",
        {"reason": "worker-shutdown", "x": 1},
        "body.x",
        "not allowed",
    ),
    ("POST", f"/task/{TASK}/priority", {"newPriority": "normal"}, "body.newPriority", "one of"),
    ("POST", f"/task/{TASK}/priority", {}, "body.newPriority", "required"),
    ("POST", f"/task-group/{TASK}/priority", {"newPriority": 3}, "body.newPriority", "one of"),
    ("POST", "/tasks", {"taskIds": "x"}, "body.taskIds", "array"),
    ("POST", "/tasks", {"taskIds": ["not-a-slugid"]}, "body.taskIds[0]", "match"),
    ("POST", "/tasks/status", {}, "body.taskIds", "required"),
    ("POST", "/tasks/status", {"taskIds": [], "more": True}, "body.more", "not allowed"),
    ("POST", "/tasks/status", {"taskIds": [TASK] * 1001}, "body.taskIds", "1000"),
    ("PUT", WORKER, {}, "body.quarantineUntil", "required"),
    ("PUT", WORKER, {"quarantineInfo": "why"}, "body.quarantineUntil", "required"),
    ("PUT", WORKER, {"quarantineUntil": "tomorrow"}, "body.quarantineUntil", "date-time"),
    ("PUT", WORKER, {"quarantineUntil": "2024-01-31T12:00:00"}, "body.quarantineUntil", "date-time"),
    ("PUT", WORKER, {"quarantineUntil": 1700000000000}, "body.quarantineUntil", "string"),
    (
        "PUT",
        WORKER,
        {"quarantineUntil": "2024-01-31T12:00:00.000Z", "quarantineInfo": "x" * 4001},
        "body.quarantineInfo",
        "4000",
    ),
    ("PUT", "/provisioners/api-prov/worker-types/api-wt/wg/wid", {"x": 1}, "body.x", "not allowed"),
    (
        "PUT",
        "/provisioners/api-prov/worker-types/api-wt/wg/wid",
        {"expires": "2024-02-30T00:00:00.000Z"},
        "body.expires",
        "date-time",
    ),
]


def create_cases(now: int) -> list[tuple[dict[str, Any], str, str]]:
    """(overrides of a valid definition, field named, a word of the rule); `None` deletes the key."""
    return [
        ({"priority": "normal"}, "body.priority", "one of"),
        ({"priority": None}, "body.priority", "one of"),
        ({"retries": "5"}, "body.retries", "integer"),
        ({"retries": 50}, "body.retries", "49"),
        ({"retries": -1}, "body.retries", "0"),
        ({"retries": 2.5}, "body.retries", "integer"),
        ({"payload": []}, "body.payload", "object"),
        ({"metadata": []}, "body.metadata", "object"),
        ({"metadata": {"name": "n"}}, "body.metadata.description", "required"),
        ({"tags": {"a": 1}}, "body.tags.a", "string"),
        ({"routes": ["a", "a"]}, "body.routes", "duplicates"),
        ({"routes": [""]}, "body.routes[0]", "1"),
        ({"scopes": ["caf\u00e9"]}, "body.scopes[0]", "match"),
        ({"dependencies": ["nope"]}, "body.dependencies[0]", "match"),
        ({"requires": "some"}, "body.requires", "one of"),
        ({"taskGroupId": "nope"}, "body.taskGroupId", "match"),
        ({"taskQueueId": "no-slash"}, "body.taskQueueId", "match"),
        ({"schedulerId": ""}, "body.schedulerId", "1"),
        ({"deadline": "tomorrow"}, "body.deadline", "date-time"),
        ({"created": dates.to_iso(now)[:-1]}, "body.created", "date-time"),
        ({"expires": 12}, "body.expires", "string"),
        ({"unknownField": 1}, "body.unknownField", "not allowed"),
        ({"payload": None}, "body.payload", "object"),
    ]


async def test_schema_errors_name_the_field(api: Api) -> None:
    failures = []
    for method, path, body, field, rule in CASES:
        response = await api.call(method, path, body)
        problem = None
        if response.status_code != 400 or response.json().get("code") != "InputValidationError":
            problem = (response.status_code, response.text[:200])
        else:
            message = response.json()["message"]
            if field not in message or rule not in message:
                problem = message.split("\n")[0]
            elif response.json()["requestInfo"]["payload"] != body:
                problem = "requestInfo.payload is not the body sent"
        if problem:
            failures.append((method, path, field, problem))
    assert not failures, "\n".join(map(str, failures))


async def test_create_task_schema_errors_name_the_field_and_store_nothing(api: Api) -> None:
    failures = []
    for overrides, field, rule in create_cases(api.clock()):
        task_id = slugid.nice()
        body = task_definition(api.clock, **overrides)
        response = await api.call("PUT", f"/task/{task_id}", body)
        if response.status_code != 400 or response.json().get("code") != "InputValidationError":
            failures.append((overrides, response.status_code, response.text[:200]))
            continue
        message = response.json()["message"]
        if field not in message or rule not in message:
            failures.append((overrides, message.split("\n")[0]))
        if await api.task_exists(task_id):
            failures.append((overrides, "a task was stored"))
    # Missing required properties.
    for key in ("created", "deadline", "payload", "metadata"):
        task_id = slugid.nice()
        body = task_definition(api.clock)
        del body[key]
        response = await api.call("PUT", f"/task/{task_id}", body)
        assert_error(response, 400, "InputValidationError", names=[f"body.{key}", "required"])
        assert not await api.task_exists(task_id)
    assert not failures, "\n".join(map(str, failures))


async def test_create_task_reports_every_invalid_field_at_once(api: Api) -> None:
    body = task_definition(api.clock, priority="urgent", retries=-1, tags={"a": 1})
    del body["metadata"]["name"]
    body["unknown"] = True
    response = await api.call("PUT", f"/task/{slugid.nice()}", body)
    fields = ["body.priority", "body.retries", "body.tags.a", "body.metadata.name", "body.unknown"]
    assert_error(response, 400, "InputValidationError", names=["body has 5 problems", *fields])


async def test_claim_work_33_leaves_the_queue_alone(api: Api) -> None:
    task_id, _ = await api.create_task()
    response = await api.call("POST", f"/claim-work/{QUEUE}", {**CLAIM, "tasks": 33})
    assert_error(response, 400, "InputValidationError", names=["body.tasks"])
    status = await api.call("GET", f"/task/{task_id}/status")
    assert status.json()["status"]["state"] == "pending"


async def test_edge_dates_come_back_in_taskcluster_format(api: Api) -> None:
    """Edge dates that the schema accepts come back out in TaskCluster's `YYYY-MM-DDTHH:MM:SS.mmmZ`."""
    worker = "/provisioners/api-prov/worker-types/api-wt/workers/wg/wid"
    await api.create_task()
    claim = await api.call("POST", "/claim-work/api-prov%2Fapi-wt", {"workerGroup": "wg", "workerId": "wid"})
    assert claim.status_code == 200 and claim.json()["tasks"]
    failures = []
    edges = {
        "1970-01-01T00:00:00.000Z": "1970-01-01T00:00:00.000Z",
        "1970-01-01T01:00:00+01:00": "1970-01-01T00:00:00.000Z",
        "9998-12-31T23:59:59.999Z": "9998-12-31T23:59:59.999Z",
    }
    for until, expected in edges.items():
        response = await api.call("PUT", worker, {"quarantineUntil": until})
        assert response.status_code == 200, response.text
        shown = response.json()["quarantineUntil"]
        if shown != expected:
            failures.append((until, shown))
    assert not failures, failures
