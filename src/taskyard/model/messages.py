"""The queue's events: exchange names, routing keys and bodies, as TaskCluster publishes them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from taskyard.model.status import TaskStatus
from taskyard.model.task_definition import TaskDefinition
from taskyard.model.types import LooseJSON

EXCHANGES = (
    "task-defined",
    "task-pending",
    "task-running",
    "artifact-created",
    "task-completed",
    "task-failed",
    "task-exception",
    "task-group-resolved",
    "task-group-sealed",
    "task-priority-changed",
    "task-group-priority-changed",
)


@dataclass(frozen=True)
class Message:
    """One event: `exchange` is the short name (`task-pending`); `cc` the extra routing keys."""

    exchange: str
    routing_key: str
    body: LooseJSON
    cc: list[str] = field(default_factory=list)


def task_routing_key(status: TaskStatus, run_id: int | None, worker: tuple[str, str] | None) -> str:
    """`primary.<taskId>.<runId>.<workerGroup>.<workerId>.<provisionerId>.<workerType>.<schedulerId>.<taskGroupId>._`"""
    worker_group, worker_id = worker if worker else ("_", "_")
    parts = [
        "primary",
        status["taskId"],
        "_" if run_id is None else str(run_id),
        worker_group,
        worker_id,
        status["provisionerId"],
        status["workerType"],
        status["schedulerId"],
        status["taskGroupId"],
        "_",
    ]
    return ".".join(parts)


def group_routing_key(task_group_id: str, scheduler_id: str) -> str:
    return f"primary.{task_group_id}.{scheduler_id}._"


def task_message(
    exchange: str,
    status: TaskStatus,
    definition: TaskDefinition,
    *,
    run_id: int | None = None,
    worker: tuple[str, str] | None = None,
    extra: Mapping[str, object] | None = None,
) -> Message:
    """A task event; CC'd to `route.<r>` for each of the task's routes."""
    body: LooseJSON = {"status": status}
    if run_id is not None:
        body["runId"] = run_id
    if worker is not None:
        body["workerGroup"], body["workerId"] = worker
    body.update(extra or {})
    body["task"] = {"tags": definition.get("tags", {})}
    body["version"] = 1
    key = task_routing_key(status, run_id, worker)
    return Message(exchange, key, body, [f"route.{r}" for r in definition.get("routes", [])])


def group_message(
    exchange: str, task_group_id: str, scheduler_id: str, body: Mapping[str, object]
) -> Message:
    full = {"taskGroupId": task_group_id, "schedulerId": scheduler_id, **body, "version": 1}
    return Message(exchange, group_routing_key(task_group_id, scheduler_id), full)


# The hooks service's exchanges (short names): a hook created, updated or deleted; the body is
# `{hookGroupId, hookId}` and the routing key has only TaskCluster's reserved part (bind `#`).
HOOK_EXCHANGES = ("hook-created", "hook-updated", "hook-deleted")


# The worker-manager's exchanges (short names): pools created and updated (deleted is an update
# to the null provider), workers requested, running, stopped and removed, and pool errors.
WORKER_MANAGER_EXCHANGES = (
    "worker-pool-created",
    "worker-pool-updated",
    "worker-pool-error",
    "worker-requested",
    "worker-running",
    "worker-stopped",
    "worker-removed",
)


# The scheduler's exchanges (short names); the seed profile has no `task-graph-extended`.
SCHEDULER_EXCHANGES = (
    "task-graph-running",
    "task-graph-extended",
    "task-graph-blocked",
    "task-graph-finished",
)


def graph_message(
    exchange: str, status: Mapping[str, object], routes: list[str], *, task_id: str | None = None
) -> Message:
    """A task graph's event: `primary._._._._._._.<schedulerId>.<taskGraphId>._`, CC'd to its routes.

    Positions 2 to 7 are `_` so that one binding pattern fits both the queue's and these keys.
    """
    key = f"primary._._._._._._.{status['schedulerId']}.{status['taskGraphId']}._"
    body: LooseJSON = {"version": 1, "status": dict(status)}
    if task_id is not None:
        body["taskId"] = task_id
    return Message(exchange, key, body, [f"route.{r}" for r in routes])
