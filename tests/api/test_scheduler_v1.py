"""The scheduler's routes in-process: bad input of every kind is a JSON 4xx naming the problem."""

from __future__ import annotations

import json
import random
from typing import Any

import httpx

from taskyard.model import dates, slugid
from tests.api.conftest import BASE, ROOT, Api, hawk_header, is_json_error
from tests.api.fuzz_values import Values

PREFIX = "/api/scheduler/v1"
META = {"name": "g", "description": "d", "owner": "dev@example.com", "source": "https://example.com/g"}
SCOPES = ["queue:create-task:*", "queue:scheduler-id:task-graph-scheduler"]


async def call(
    api: Api, method: str, path: str, body: Any = None, *, raw: bytes | None = None
) -> httpx.Response:
    url = BASE + PREFIX + path
    content = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    headers = {"content-type": "application/json", "authorization": hawk_header(method, url, content, ROOT)}
    return await api.client.request(method, url, content=content, headers=headers)


def task(api: Api, **more: Any) -> dict[str, Any]:
    now = api.clock()
    return {
        "taskQueueId": "p/w",
        "created": dates.to_iso(now),
        "deadline": dates.to_iso(now + dates.HOUR),
        "payload": {},
        "metadata": META,
        **more,
    }


def graph(api: Api, *nodes: dict[str, Any]) -> dict[str, Any]:
    return {"scopes": SCOPES, "metadata": META, "tasks": list(nodes)}


async def test_a_graph_is_created_and_read_through_every_route(api: Api) -> None:
    gid, a = slugid.nice(), slugid.nice()
    created = await call(api, "PUT", f"/task-graph/{gid}", graph(api, {"taskId": a, "task": task(api)}))
    assert created.status_code == 200, created.text
    for route in ("status", "info", "inspect", f"inspect/{a}"):
        answer = await call(api, "GET", f"/task-graph/{gid}/{route}")
        assert answer.status_code == 200, (route, answer.text)
    assert (await call(api, "GET", "/ping")).json()["alive"] is True
    index = await api.client.get(BASE + PREFIX + "/")
    assert "createTaskGraph" in {r["name"] for r in index.json()["routes"]}


async def test_bad_input_is_a_clear_4xx(api: Api) -> None:
    gid, a = slugid.nice(), slugid.nice()
    many = [{"taskId": slugid.nice(), "task": {}} for _ in range(10_001)]
    cases: list[tuple[str, str, Any, int, str]] = [
        ("GET", f"/task-graph/{gid}/status", None, 404, "task-graph not found"),
        ("GET", "/task-graph/not-a-slugid/status", None, 400, "taskGraphId"),
        ("PUT", "/task-graph/not-a-slugid", graph(api), 400, "taskGraphId"),
        ("PUT", f"/task-graph/{gid}", graph(api), 400, "at least one task"),
        ("PUT", f"/task-graph/{gid}", {**graph(api), "tasks": many}, 400, "body.tasks"),
        (
            "PUT",
            f"/task-graph/{gid}",
            graph(api, {"taskId": a, "requires": [a], "task": task(api)}),
            400,
            "itself",
        ),
        (
            "PUT",
            f"/task-graph/{gid}",
            {**graph(api, {"taskId": a, "task": task(api)}), "scopes": "x"},
            400,
            "scopes",
        ),
        (
            "PUT",
            f"/task-graph/{gid}",
            {**graph(api, {"taskId": a, "task": task(api)}), "scopes": [1]},
            400,
            "scopes",
        ),
        (
            "PUT",
            f"/task-graph/{gid}",
            graph(api, {"taskId": a, "task": task(api)}, {"taskId": a, "task": task(api)}),
            400,
            "more than once",
        ),
        ("PUT", f"/task-graph/{gid}", graph(api, {"taskId": a, "task": {"nonsense": 1}}), 400, f"task {a}"),
        (
            "POST",
            f"/task-graph/{gid}/extend",
            {"tasks": [{"taskId": a, "task": task(api)}]},
            404,
            "not found",
        ),
    ]
    for method, path, body, status, words in cases:
        answer = await call(api, method, path, body)
        assert answer.status_code == status, (path, answer.text[:300])
        assert is_json_error(answer) and words in answer.json()["message"], (path, answer.text[:300])
    assert (await call(api, "GET", f"/task-graph/{gid}/status")).status_code == 404


async def test_garbage_never_gets_a_500(api: Api) -> None:
    g = Values(random.Random(20261123), body_limit=256 * 1024)
    gid, a = slugid.nice(), slugid.nice()
    valid = graph(api, {"taskId": a, "task": task(api)})
    failures = []
    for round_ in range(60):
        body = g.value() if round_ % 2 else g.mutate(valid)
        for method, path in (("PUT", f"/task-graph/{gid}"), ("POST", f"/task-graph/{gid}/extend")):
            raw = g.broken_json(json.dumps(valid).encode()) if round_ % 7 == 0 else None
            answer = await call(api, method, path, body, raw=raw)
            if answer.status_code >= 500 or (answer.status_code >= 400 and not is_json_error(answer)):
                failures.append((method, repr(body)[:160], answer.status_code, answer.text[:200]))
    assert not failures, failures[:10]


async def test_an_empty_extend_is_answered_with_the_status(api: Api) -> None:
    gid, a = slugid.nice(), slugid.nice()
    created = await call(api, "PUT", f"/task-graph/{gid}", graph(api, {"taskId": a, "task": task(api)}))
    assert created.status_code == 200, created.text
    for tasks in ([], {}):
        answer = await call(api, "POST", f"/task-graph/{gid}/extend", {"tasks": tasks})
        assert answer.status_code == 200, answer.text
        assert answer.json() == created.json()
    missing = await call(api, "POST", f"/task-graph/{slugid.nice()}/extend", {"tasks": []})
    assert missing.status_code == 404, missing.text
    assert (await call(api, "POST", f"/task-graph/{gid}/extend", {"tasks": [], "x": 1})).status_code == 400
