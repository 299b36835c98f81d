"""Task definitions, ids and assertions for the end-to-end tests."""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import mohawk
import pytest
import requests
import taskcluster
from taskcluster.exceptions import TaskclusterAuthFailure, TaskclusterRestFailure

from tests.e2e.conftest import Server

T = TypeVar("T")
WORKER = {"workerGroup": "e2e-wg", "workerId": "e2e-worker-1"}
OTHER_WORKER = {"workerGroup": "e2e-wg", "workerId": "e2e-worker-2"}
GRAPH_SCOPES = ["queue:create-task:*", "queue:scheduler-id:task-graph-scheduler"]
META = {
    "name": "e2e graph",
    "description": "end to end",
    "owner": "e2e@example.com",
    "source": "https://example.com/g",
}


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def now() -> datetime:
    return datetime.now(UTC)


def task_queue_id(test_name: str) -> str:
    """`e2e-<random>/<test name>`: a queue no other test (or earlier run) uses."""
    worker_type = re.sub(r"[^a-z0-9-]", "-", test_name.lower().removeprefix("test_"))[:30].strip("-")
    return f"e2e-{uuid.uuid4().hex[:10]}/w{worker_type}"


def slug() -> str:
    return str(taskcluster.slugId())


def definition(task_queue: str, **overrides: Any) -> dict[str, Any]:
    """A minimal valid task definition for `task_queue`, created now, due in an hour."""
    start = now()
    body: dict[str, Any] = {
        "taskQueueId": task_queue,
        "created": iso(start),
        "deadline": iso(start + timedelta(hours=1)),
        "payload": {"command": ["true"]},
        "metadata": {
            "name": "e2e task",
            "description": "created by the end-to-end tests",
            "owner": "e2e@example.com",
            "source": "https://example.com/e2e",
        },
    }
    body.update(overrides)
    return body


def create(queue: taskcluster.Queue, task_queue: str, **overrides: Any) -> str:
    """Create a task; answer its taskId."""
    task_id = slug()
    queue.createTask(task_id, definition(task_queue, **overrides))
    return task_id


def claim_one(queue: taskcluster.Queue, task_queue: str, worker: dict[str, str] = WORKER) -> dict[str, Any]:
    """claimWork for one task, expecting to get exactly one."""
    claims = queue.claimWork(task_queue, {**worker, "tasks": 1})["tasks"]
    assert len(claims) == 1, claims
    return claims[0]


@contextlib.contextmanager
def refused(status: int, code: str | None = None) -> Iterator[pytest.ExceptionInfo[Any]]:
    """Expect the call inside to fail with HTTP `status` and, if given, TaskCluster error `code`."""
    with pytest.raises((TaskclusterRestFailure, TaskclusterAuthFailure)) as info:
        yield info
    error = info.value
    assert error.status_code == status, (error.status_code, error.body)
    if code is not None:
        assert isinstance(error.body, dict), error.body
        assert error.body.get("code") == code, error.body


def wait_for(probe: Callable[[], T | None], *, what: str, timeout: float = 15.0, every: float = 0.1) -> T:
    """Poll `probe` until it answers something truthy; fail after `timeout` seconds."""
    give_up = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last saw {last!r}")
        time.sleep(every)


def wait_for_status(
    queue: taskcluster.Queue,
    task_id: str,
    predicate: Callable[[dict[str, Any]], bool],
    *,
    what: str,
    timeout: float = 15.0,
) -> dict[str, Any]:
    """Poll status(task_id) until `predicate(status)` holds; answer that status."""

    def probe() -> dict[str, Any] | None:
        status: dict[str, Any] = queue.status(task_id)["status"]
        return status if predicate(status) else None

    return wait_for(probe, what=f"{what} (task {task_id})", timeout=timeout)


def state_is(state: str) -> Callable[[dict[str, Any]], bool]:
    return lambda status: status["state"] == state


def signed(
    method: str,
    url: str,
    body: Any,
    credentials: dict[str, str],
    *,
    timeout: float = 30,
    raw: str | None = None,
) -> requests.Response:
    """A request signed with Hawk as TaskCluster's client signs it: for raw status codes and headers.

    `raw` sends that text as the body instead of `body` as JSON.
    """
    payload = raw if raw is not None else (json.dumps(body) if body is not None else "")
    sender = mohawk.Sender(
        credentials={"id": credentials["clientId"], "key": credentials["accessToken"], "algorithm": "sha256"},
        url=url,
        method=method,
        content=payload,
        content_type="application/json" if payload else "",
    )
    headers = {"Authorization": sender.request_header}
    if payload:
        headers["Content-Type"] = "application/json"
    return requests.request(method, url, data=payload or None, headers=headers, timeout=timeout)


def _find(index: taskcluster.Index, path: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = index.findTask(path)
    except taskcluster.exceptions.TaskclusterRestFailure as exc:
        if exc.status_code == 404:
            return None
        raise
    return found


def legacy_options(server: Server, service: str) -> dict[str, Any]:
    return {
        "baseUrl": f"{server.root_url}/api/{service}/v1",
        "credentials": server.credentials,
        "maxRetries": 0,
    }


# The task-graph scheduler's API, through TaskCluster's 1.3.5 client and plain requests.


def options(server: Server, **more: Any) -> dict[str, Any]:
    return {"baseUrl": f"{server.root_url}/api/scheduler/v1", "credentials": server.credentials, **more}


def graph_status(server: Server, graph_id: str) -> dict[str, Any]:
    answer = requests.get(f"{server.root_url}/api/scheduler/v1/task-graph/{graph_id}/status", timeout=10)
    answer.raise_for_status()
    return dict(answer.json()["status"])


def wait_until_not_running(server: Server, graph_id: str, timeout: float = 90) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        state = str(graph_status(server, graph_id)["state"])
        if state != "running":
            return state
        time.sleep(0.2)
    raise AssertionError(f"task graph {graph_id} still running after {timeout} s")


# The hooks service's tests (test_hooks.py, test_hooks_amqp.py).


def unique(prefix: str = "g") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def grant(server: Server, group: str, hook: str, scopes: list[str] | None = None) -> None:
    """The hook's role, `hook-id:<group>/<hook>`: by default, what creating its tasks needs."""
    given = ["queue:create-task:*", "queue:scheduler-id:*"] if scopes is None else scopes
    server.auth_client().createRole(f"hook-id:{group}/{hook}", {"description": "e2e hook", "scopes": given})


TEMPLATE: dict[str, Any] = {
    "taskQueueId": "${taskQueue}",
    "payload": {"fired": {"$eval": "firedBy"}},
    "metadata": {
        "name": "hooked ${firedBy}",
        "description": "made by a hook",
        "owner": "e2e@example.com",
        "source": "https://example.com/hooks",
    },
}


def hook_body(task_queue: str, **more: Any) -> dict[str, Any]:
    task = {"$let": {"taskQueue": task_queue}, "in": TEMPLATE}
    return {
        "metadata": {"name": "e2e hook", "description": "a test's", "owner": "e2e@example.com"},
        "task": task,
        **more,
    }


def worker_pids(*words: str) -> list[int]:
    """The processes on this machine that are `taskyard worker`s whose command line holds each of
    `words` (a pool's id, a worker id). A worker's child between its fork and its exec (a task's
    command starting) has the worker's command line too: it is not counted."""
    found: dict[int, int] = {}  # pid: its parent's
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().split(b"\0")
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if b"worker" in line and all(word.encode() in line for word in words):
                found[int(entry.name)] = parent
    return [pid for pid, parent in found.items() if parent not in found]
