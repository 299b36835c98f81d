"""Garbage at every route: whatever the body, path or query, the answer is a 2xx or a JSON 4xx, never a 5xx.

Deterministic (fixed seed). Bodies are random JSON values (nulls, nested lists, huge numbers, long and
non-ASCII strings, NUL characters), mutations of a valid body, or bytes that are not JSON; path
parameters are sometimes replaced by random segments; queries carry random paging arguments. After the
run, no createTask call that failed has left its task or its task group behind.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import random
from typing import Any
from urllib.parse import quote

import httpx

from taskyard.api.routing import Route
from taskyard.model import slugid
from tests.api.conftest import (
    BASE,
    GOOD_PARAMS,
    PREFIX,
    ROOT,
    Api,
    hawk_header,
    is_json_error,
    route_params,
    route_path,
    routes,
    task_definition,
    valid_body,
)

SEED = 20261122
ROUNDS_PER_ROUTE = 14

TEXTS = [
    "",
    " ",
    "x",
    "\x00",
    "a\x00b",
    "\n",
    "line\nbreak",
    "\t\r",
    "caf\u00e9",
    "\u6f22\u5b57",
    "\U0001f600",
    "\u202e",
    "\ufeff",
    "null",
    "true",
    "0",
    "-1",
    "1e999",
    "NaN",
    "../..",
    "%2F",
    "%00",
    "a/b",
    "a%2Fb",
    "<script>",
    "' OR 1=1 --",
    "${jndi}",
    "\\",
    '"',
    "highest",
    "worker-shutdown",
    "2024-01-31T12:00:00.000Z",
    "0001-01-01T00:00:00.000Z",
    "9999-12-31T23:59:59.999Z",
    "10000-01-01T00:00:00.000Z",
    "2024-02-30T00:00:00.000Z",
    GOOD_PARAMS["taskId"],
    GOOD_PARAMS["taskQueueId"],
]
NUMBERS: list[Any] = [
    0,
    -0.0,
    1,
    -1,
    32,
    33,
    49,
    50,
    1.5,
    2**31,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**30,
    1e308,
    -1e308,
    5e-324,
]


class Garbage:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def text(self) -> str:
        rng = self.rng
        kind = rng.random()
        if kind < 0.5:
            return rng.choice(TEXTS)
        if kind < 0.65:
            return rng.choice("xé\x00漢/") * rng.choice([38, 39, 255, 256, 4001, 40000])
        if kind < 0.85:
            return "".join(
                chr(rng.choice([rng.randint(0, 0x7F), rng.randint(0x80, 0xD7FF)])) for _ in range(8)
            )
        return rng.choice(TEXTS) + rng.choice(TEXTS)

    def value(self, depth: int = 0) -> Any:
        rng = self.rng
        kind = rng.randint(0, 9 if depth < 4 else 5)
        if kind == 0:
            return None
        if kind == 1:
            return rng.choice([True, False])
        if kind == 2:
            return rng.choice(NUMBERS)
        if kind in (3, 4, 5):
            return self.text()
        if kind in (6, 7):
            return [self.value(depth + 1) for _ in range(rng.randint(0, 4))]
        if kind == 8:
            return {self.text(): self.value(depth + 1) for _ in range(rng.randint(0, 4))}
        return self.nested(rng.choice([10, 100, 300, 900]))

    def nested(self, depth: int) -> Any:
        value: Any = self.rng.choice([[], {}, "x", None])
        for _ in range(depth):
            value = [value] if self.rng.random() < 0.5 else {"a": value}
        return value

    def mutate(self, valid: Any) -> Any:
        """A valid body with one part replaced, removed or added (recursing into nested objects)."""
        rng = self.rng
        if not isinstance(valid, dict) or not valid or rng.random() < 0.1:
            return self.value()
        body = dict(valid)
        key = rng.choice(sorted(body))
        action = rng.random()
        if action < 0.5:
            body[key] = self.mutate(body[key]) if isinstance(body[key], dict) else self.value()
        elif action < 0.7:
            del body[key]
        else:
            body[self.text()] = self.value()
        return body

    def raw(self) -> bytes:
        rng = self.rng
        return rng.choice(
            [
                b"",
                b"{",
                b"[1,",
                b"\xff\xfe\x00\x01",
                b"\x00",
                b"{'single': 'quotes'}",
                b'{"a": NaN}',
                b'{"a": Infinity}',
                b'{"a": 1e400}',
                b'"\\ud800"',
                b'{"a": "\\u0000"}',
                b"[" * 5000 + b"]" * 5000,
                b'{"a": 1, "a": 2}',
                b"\xef\xbb\xbf{}",
                bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))),
            ]
        )

    def token(self) -> str:
        rng = self.rng
        kind = rng.random()
        if kind < 0.6:
            return self.text()
        if kind < 0.8:
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 24)))
        else:
            raw = json.dumps(self.value()).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def query(self) -> str:
        rng = self.rng
        pairs = []
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(["limit", "continuationToken", "limit", "continuationToken", "quarantined"])
            name = name if rng.random() < 0.9 else rng.choice(["bewit", self.text() or "q"])
            value = self.token() if name == "continuationToken" else self.text()
            pairs.append(f"{quote(name[:100], safe='')}={quote(value[:2000], safe='')}")
        return "&".join(pairs)


# Routes that answer a 303 to the artifact's content.
REDIRECTS = {"getArtifact", "getLatestArtifact"}


async def send(api: Api, g: Garbage, r: Route) -> tuple[str, Any, httpx.Response]:
    """One garbage request to `r`: answers the path and JSON body sent, and the response."""
    rng = g.rng
    overrides: dict[str, str] = {}
    fresh_task_id = slugid.nice()
    if r.name == "createTask":
        overrides["taskId"] = fresh_task_id
    if route_params(r) and rng.random() < 0.3:
        overrides[rng.choice(route_params(r))] = g.text()[:2000]  # httpx refuses URLs over 64 KiB
    path = route_path(r, **overrides)
    query = g.query() if rng.random() < 0.3 else ""
    url = BASE + PREFIX + path + ("?" + query if query else "")

    body: Any = None
    choice = rng.random()
    if r.method == "GET":
        raw = g.raw() if choice < 0.1 else b""
    elif choice < 0.12:
        raw = g.raw()
    elif choice < 0.2:
        raw = b""
    else:
        valid = valid_body(r.name, api.clock())
        if r.name == "createTask":
            valid = task_definition(api.clock, taskGroupId=slugid.nice())
        if choice < 0.45:
            body = g.value()
        elif choice < 0.55 and valid is not None:
            body = valid  # some valid calls, so that later garbage meets claimed and resolved runs
        else:
            body = g.mutate(valid if valid is not None else {})
        raw = json.dumps(body, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")

    headers = {"content-type": "application/json"} if raw or rng.random() < 0.05 else {}
    if rng.random() < 0.9:
        headers["authorization"] = hawk_header(r.method, url, raw, ROOT)
    response = await api.client.request(r.method, url, content=raw, headers=headers)
    return path, body, response


async def test_garbage_never_gets_a_500(api: Api) -> None:
    api.queue.config = dataclasses.replace(api.queue.config, claim_work_timeout=0.02)
    # A real task behind GOOD_PARAMS, so that run and task routes reach their state checks.
    await api.create_task(GOOD_PARAMS["taskId"])
    g = Garbage(SEED)
    failures = []
    created: list[tuple[str, Any, int]] = []
    calls = 0
    for _ in range(ROUNDS_PER_ROUTE):
        for r in routes():
            path, body, response = await send(api, g, r)
            calls += 1
            status = response.status_code
            if status >= 500:
                failures.append((r.name, path[:120], repr(body)[:160], status, response.text[:200]))
            elif status >= 400 and not is_json_error(response):
                failures.append((r.name, path[:120], "not a JSON error body", status, response.text[:200]))
            elif (status >= 300 and status < 400 and r.name not in REDIRECTS) or status < 200:
                failures.append((r.name, path[:120], "unexpected status", status, response.text[:200]))
            if r.name == "createTask":
                created.append((path, body, status))
    assert calls > 400

    # No createTask that failed left a task or a task group behind.
    leftovers = []
    refused = 0
    for path, body, status in created:
        task_id = path.rsplit("/", 1)[1]
        if status < 300 or not slugid.is_valid(task_id) or task_id == GOOD_PARAMS["taskId"]:
            continue  # created, garbage, or the task that exists from the start
        refused += 1
        if await api.task_exists(task_id):
            leftovers.append(("task left behind", task_id, status))
        group_id = body.get("taskGroupId") if isinstance(body, dict) else None
        if slugid.is_valid(group_id) and group_id != GOOD_PARAMS["taskGroupId"]:
            group = await api.call("GET", f"/task-group/{group_id}")
            if group.status_code != 404:
                leftovers.append(("task group left behind", group_id, status, group.status_code))
    assert refused >= ROUNDS_PER_ROUTE // 4  # enough refused createTasks to mean something

    failures += leftovers
    assert not failures, f"{len(failures)} of {calls} calls failed:\n" + "\n".join(map(str, failures[:40]))


def test_garbage_is_deterministic() -> None:
    first, second = Garbage(SEED), Garbage(SEED)
    assert [first.value() for _ in range(50)] == [second.value() for _ in range(50)]
