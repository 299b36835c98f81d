"""The scheduler's test scenarios, step by step, through TaskCluster's 1.3.5 client against a real
server on SQLite and PostgreSQL. Tasks are claimed and resolved by hand (TaskCluster's current
client, as a worker would), so every intermediate state can be looked at."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Server
from tests.e2e.helpers import GRAPH_SCOPES, META, claim_one, definition, graph_status, options, refused, slug
from tests.legacy_client import legacy_python, run_legacy

__all__ = ["legacy_python"]

# The client's answer to each call: the body, or the refusal's status code and message.
CALLS = """
scheduler = taskcluster.Scheduler(options)
result = []
for method, args in options["calls"]:
    try:
        result.append({"ok": getattr(scheduler, method)(*args)})
    except taskcluster.exceptions.TaskclusterRestFailure as error:
        result.append({"status": error.status_code, "message": str(error)})
"""


def calls(server: Server, python: Path, *steps: tuple[str, list[Any]]) -> list[dict[str, Any]]:
    answers: list[dict[str, Any]] = run_legacy(python, CALLS, options=options(server, calls=list(steps)))
    return answers


def node(tq: str, task_id: str, requires: list[str] | None = None, **task: Any) -> dict[str, Any]:
    return {"taskId": task_id, "requires": requires or [], "reruns": 0, "task": definition(tq, **task)}


def graph(*nodes: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "scopes": GRAPH_SCOPES,
        "metadata": META,
        "tags": {"scenario": "yes"},
        "tasks": list(nodes),
        **more,
    }


def complete(server: Server, tq: str, task_id: str) -> None:
    queue = server.client()
    claim = claim_one(queue, tq)
    assert claim["status"]["taskId"] == task_id
    server.client(claim["credentials"]).reportCompleted(task_id, claim["runId"])


def state_of(server: Server, task_id: str) -> str:
    return str(server.client().status(task_id)["status"]["state"])


def until(condition: Any, what: str) -> None:
    end = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_dependents_run_in_order_and_inspect_follows(server: Server, legacy_python: Path, tq: str) -> None:
    """Scenarios 1 and 6: A <- B; B pending only after A completed; finished after B; inspect."""
    graph_id, a, b = slug(), slug(), slug()
    (created, first) = calls(
        server,
        legacy_python,
        ("createTaskGraph", [graph_id, graph(node(tq, a), node(tq, b, [a]))]),
        ("inspect", [graph_id]),
    )
    assert created["ok"]["status"]["state"] == "running"
    inspected = first["ok"]
    assert [(t["taskId"], t["state"]) for t in inspected["tasks"]] == [(a, "scheduled"), (b, "unscheduled")]
    assert inspected["scopes"] == GRAPH_SCOPES and inspected["tags"] == {"scenario": "yes"}
    assert state_of(server, b) == "unscheduled"

    complete(server, tq, a)
    until(lambda: state_of(server, b) == "pending", "B pending")
    (second,) = calls(server, legacy_python, ("inspect", [graph_id]))
    assert [(t["taskId"], t["state"]) for t in second["ok"]["tasks"]] == [(a, "completed"), (b, "scheduled")]
    assert graph_status(server, graph_id)["state"] == "running"

    complete(server, tq, b)
    until(lambda: graph_status(server, graph_id)["state"] == "finished", "the graph finished")


def test_bad_scopes_scheduler_or_group_are_400(server: Server, legacy_python: Path, tq: str) -> None:
    """Scenario 2: graph scopes too narrow, a wrong schedulerId, a wrong taskGroupId."""
    a = slug()
    narrow = graph(node(tq, a), scopes=["queue:scheduler-id:task-graph-scheduler"])
    wrong_scheduler = graph(node(tq, a, schedulerId="someone-else"))
    wrong_group = graph(node(tq, a, taskGroupId=slug()))
    answers = calls(
        server,
        legacy_python,
        ("createTaskGraph", [slug(), narrow]),
        ("createTaskGraph", [slug(), wrong_scheduler]),
        ("createTaskGraph", [slug(), wrong_group]),
    )
    assert [answer.get("status") for answer in answers] == [400, 400, 400]
    assert "do not allow creating it" in answers[0]["message"]
    assert "schedulerId must be 'task-graph-scheduler'" in answers[1]["message"]
    assert "taskGroupId must be the graph id" in answers[2]["message"]
    with refused(404):
        server.client().status(a)  # a refused graph leaves no task behind


def test_create_twice_and_extend_twice(server: Server, legacy_python: Path, tq: str) -> None:
    """Scenarios 4 and 5: the same create twice, a changed one 409; extend with B twice; B after A."""
    graph_id, a, b = slug(), slug(), slug()
    body = graph(node(tq, a))
    extension = {"tasks": [node(tq, b, [a])]}
    answers = calls(
        server,
        legacy_python,
        ("createTaskGraph", [graph_id, body]),
        ("createTaskGraph", [graph_id, body]),
        ("createTaskGraph", [graph_id, {**body, "tags": {"changed": "yes"}}]),
        ("inspect", [graph_id]),
        ("extendTaskGraph", [graph_id, extension]),
        ("extendTaskGraph", [graph_id, extension]),
        ("inspect", [graph_id]),
    )
    assert answers[0] == answers[1] and "ok" in answers[0]
    assert answers[2]["status"] == 409
    assert len(answers[3]["ok"]["tasks"]) == 1
    assert "ok" in answers[4] and "ok" in answers[5]
    assert [t["taskId"] for t in answers[6]["ok"]["tasks"]] == [a, b]
    assert state_of(server, b) == "unscheduled"
    complete(server, tq, a)
    until(lambda: state_of(server, b) == "pending", "B pending")
    complete(server, tq, b)
    until(lambda: graph_status(server, graph_id)["state"] == "finished", "the graph finished")
