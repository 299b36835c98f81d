"""The fuzzer's task graphs: valid createTaskGraph and extendTaskGraph bodies in both of the
scheduler's forms (the final one, tasks a list with taskIds; the label one, tasks keyed by label),
and which body suits which graph, so that mutations of them reach the scheduler's validation.

A graph in the final form names its tasks' taskIds, so a body sent under a fresh graph id gets
fresh taskIds too (the old ones are another graph's tasks in the queue); a label-form graph's
taskIds derive from the graph id. A graph arrange() made is sent its own bodies: its create body
again (create-or-compare), extend bodies whose requirements name its tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from taskyard.model import dates
from tests.api.conftest import TASK_QUEUE_ID

META = {"name": "fuzz graph", "description": "d", "owner": "fuzz@example.com", "source": "https://x.example"}
SCOPES = ["queue:create-task:*", "queue:scheduler-id:task-graph-scheduler", "queue:get-task:*"]
NAMES = ("createTaskGraph", "extendTaskGraph")


class Fresh(Protocol):
    def fresh_slug(self) -> str: ...


def task(now: int, **more: Any) -> dict[str, Any]:
    """A createTask body for a graph's task (every field a graph task may carry)."""
    return {
        "taskQueueId": TASK_QUEUE_ID,
        "created": dates.to_iso(now),
        "deadline": dates.to_iso(now + dates.HOUR),
        "expires": dates.to_iso(now + dates.DAY),
        "priority": "lowest",
        "retries": 1,
        "payload": {"x": [1]},
        "metadata": META,
        "scopes": ["queue:get-task:*"],
        "tags": {"k": "v"},
        "extra": {"e": 1},
        **more,
    }


def final_form(now: int, first: str, second: str) -> dict[str, Any]:
    return {
        "scopes": SCOPES,
        "routes": ["fuzz.graph"],
        "metadata": META,
        "tags": {"k": "v"},
        "tasks": [
            {"taskId": first, "requires": [], "reruns": 0, "task": task(now)},
            {"taskId": second, "requires": [first], "reruns": 2, "task": task(now)},
        ],
    }


def label_form(now: int) -> dict[str, Any]:
    subs = {"env": {"BUILD": {"$subs": "taskId:build"}}}
    return {
        "routing": "fuzz",
        "scopes": SCOPES,
        "metadata": META,
        "tasks": {
            "build": {"task": task(now, routing="b")},
            "test": {"requires": ["build"], "reruns": 1, "task": task(now, payload=subs)},
        },
    }


def extend_final(now: int, required: str, new: str) -> dict[str, Any]:
    return {"tasks": [{"taskId": new, "requires": [required], "reruns": 1, "task": task(now)}]}


def extend_label(now: int) -> dict[str, Any]:
    """An extension of label_form()'s graph: its new task requires an earlier task by label."""
    return {"tasks": {"lint": {"requires": ["build"], "reruns": 1, "task": task(now, routing="l")}}}


@dataclass
class Graph:
    """A graph arrange() made: its create body, and an extend body that fits it."""

    create: dict[str, Any]
    extend: dict[str, Any]
    task_ids: list[str]


def body(fresh: Fresh, chance: Any, name: str, graph: Graph | None, now: int) -> dict[str, Any]:
    """A valid body of `name` for the graph the request aims at (`graph`, or None for a fresh id)."""
    if graph is not None:
        if name == "extendTaskGraph" and isinstance(graph.create["tasks"], list) and chance(0.3):
            new = fresh.fresh_slug()  # a task the graph does not hold yet
            return extend_final(now, graph.task_ids[0], new)
        return graph.create if name == "createTaskGraph" else graph.extend
    if name == "extendTaskGraph":  # a graph no one made: a 404 once the body passes
        return extend_final(now, fresh.fresh_slug(), fresh.fresh_slug())
    return final_form(now, fresh.fresh_slug(), fresh.fresh_slug()) if chance(0.6) else label_form(now)
