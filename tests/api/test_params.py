"""Path parameters: every route refuses a malformed one with 400 InvalidRequestArguments naming it.

The cases are generated from the route table in `taskyard.api.queue_v1`, so a new route is covered
as soon as it is declared. Requests are signed and carry a valid body, so the parameter is the only
thing wrong with them.
"""

from __future__ import annotations

from typing import Any

from taskyard.api.routing import Route
from tests.api.conftest import (
    GOOD_PARAMS,
    Api,
    assert_error,
    route_params,
    route_path,
    routes,
    valid_body,
)

# Non-empty values (an empty segment would change which route matches) that break each pattern.
BAD_PARAMS: dict[str, list[str]] = {
    "taskId": [
        "not-a-slugid",
        "abc",
        GOOD_PARAMS["taskId"] + "A",  # 23 characters
        GOOD_PARAMS["taskId"][:21],  # 21 characters
        "AAAAAAAAAAAAAAAAAAAAAA",  # 22 characters, but not a v4 uuid
        "fKz7yXv3Q0m2p9Wq1bC4d.",
        "fKz7yXv3Q0m2p9Wq1bC4d\u00e9",
        "fKz7yXv3Q0m2p9Wq1bC4d\x00",
    ],
    "runId": ["abc", "-1", "1.5", "1e3", "0x1", " 1", "\u0661"],  # U+0661 is an Arabic-Indic digit one
    "taskQueueId": [
        "no-slash",
        "api-prov/Upper",
        "api-prov/under_score",
        "api-prov/-dash",
        "api-prov/dash-",
        "x" * 39 + "/wt",
        "api-prov/" + "w" * 39,
        "bad.prov/wt",
        "/wt",
        "api-prov/",
        "a/b/c",
        "api-prov/wt\x00",
    ],
    "provisionerId": ["bad.id", "x" * 39, "with space", "caf\u00e9", "semi;colon", "nul\x00"],
    "workerType": ["bad.type", "x" * 39, "with space", "caf\u00e9", "nul\x00"],
    "workerGroup": ["bad.group", "x" * 39, "with space", "caf\u00e9", "star*", "nul\x00"],
    "workerId": ["bad.id", "x" * 39, "with space", "caf\u00e9", "at@sign", "nul\x00"],
}
BAD_PARAMS["taskGroupId"] = BAD_PARAMS["taskId"]
# Artifact names: printable ASCII, and no `..` segment that could climb out of a path.
BAD_PARAMS["name"] = ["../escape", "private/../../escape", "caf\u00e9.txt", "nul\x00.txt", "tab\there"]
PARAM_ROUTES = routes(with_params=True)


async def call_route(api: Api, r: Route, **params: str) -> Any:
    body = valid_body(r.name, api.clock())
    path = route_path(r, **params)
    if body is None:
        return await api.call(r.method, path)
    return await api.call(r.method, path, body)


def test_every_parameter_has_bad_values() -> None:
    used = {p for r in PARAM_ROUTES for p in route_params(r)}
    assert used <= set(BAD_PARAMS), used - set(BAD_PARAMS)
    assert {r.name for r in PARAM_ROUTES} >= {"task", "claimWork", "getWorker", "declareWorker"}


async def test_good_parameters_are_not_refused(api: Api) -> None:
    """The baseline: with GOOD_PARAMS no route answers 400 InvalidRequestArguments (404 and 409 are fine)."""
    failures = []
    for r in PARAM_ROUTES:
        response = await call_route(api, r)
        if response.status_code >= 500 or (
            response.status_code == 400 and response.json()["code"] == "InvalidRequestArguments"
        ):
            failures.append((r.name, response.status_code, response.text[:300]))
    assert not failures


async def test_bad_path_parameters_are_400_invalid_request_arguments(api: Api) -> None:
    failures = []
    checked = 0
    for r in PARAM_ROUTES:
        for param in route_params(r):
            for bad in BAD_PARAMS[param]:
                response = await call_route(api, r, **{param: bad})
                checked += 1
                body = response.json() if response.status_code < 500 else {}
                problem = None
                if response.status_code != 400 or body.get("code") != "InvalidRequestArguments":
                    problem = "status/code"
                elif param not in body["message"]:
                    problem = "message does not name the parameter"
                elif body["requestInfo"]["method"] != r.name:
                    problem = "requestInfo.method"
                elif not isinstance(body["requestInfo"]["params"], dict):
                    problem = "requestInfo.params"
                if problem:
                    failures.append((problem, r.name, param, bad, response.status_code, response.text[:200]))
    assert checked > 200
    assert not failures, f"{len(failures)} of {checked} failed:\n" + "\n".join(map(str, failures[:40]))
    # None of those calls (createTask, claimWork, declareWorker among them) stored anything.
    queue = GOOD_PARAMS["taskQueueId"].replace("/", "%2F")
    assert (await api.call("GET", f"/task-queues/{queue}/pending")).json()["tasks"] == []
    assert (await api.call("GET", "/task-queues")).json()["taskQueues"] == []


async def test_trailing_newline_is_not_a_valid_parameter(api: Api) -> None:
    """JavaScript's `$` (TaskCluster's patterns) does not match before a final newline; Python's does.

    `PUT /task/<slugid>%0A` must be 400 like any other malformed taskId, not create a task whose id
    ends in a newline; the same for every other parameter.
    """
    failures = []
    for r in PARAM_ROUTES:
        for param in route_params(r):
            response = await call_route(api, r, **{param: GOOD_PARAMS[param] + "\n"})
            body = response.json() if response.status_code < 500 else {}
            if response.status_code != 400 or body.get("code") != "InvalidRequestArguments":
                failures.append((r.name, param, response.status_code, body.get("code")))
    assert not failures, "\n".join(map(str, failures))


async def test_worker_type_parameter_follows_the_reference_pattern(api: Api) -> None:
    """The `workerType` URL parameter is `^[a-zA-Z0-9-_]{1,38}$`, like provisionerId.

    TaskCluster declares `workerType: GENERIC_ID_PATTERN` for its URL parameters; an identifier such as
    `Upper_Case` is therefore not malformed in a URL (an unknown worker type is 404, not 400).
    """
    response = await api.call("GET", "/provisioners/api-prov/worker-types/Upper_Case")
    assert_error(response, 404, "ResourceNotFound")
    response = await api.call("GET", "/provisioners/api-prov/worker-types/Upper_Case/workers/wg/wid")
    assert_error(response, 404, "ResourceNotFound")
