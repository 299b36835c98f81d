"""The task status as TaskCluster answers it: task and run states, reasons, and their shapes.

`TaskRecord.status()` (model/runs.py) builds a `TaskStatus`; createTask, the actions on a task,
the reports and the claims answer it, and every task event carries it.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from taskyard.model.task_definition import Priority

RunState = Literal["pending", "running", "completed", "failed", "exception"]
TaskState = Literal["unscheduled", "pending", "running", "completed", "failed", "exception"]
ResolvedState = Literal["completed", "failed", "exception"]
# Why a run exists: the first one, a retry after claim-expired or worker-shutdown, after
# intermittent-task, a rerun, or the run a cancel or deadline creates for a task that had none.
ReasonCreated = Literal["scheduled", "retry", "task-retry", "rerun", "exception"]
# The reasons a worker may give reportException.
ExceptionReason = Literal[
    "worker-shutdown",
    "malformed-payload",
    "resource-unavailable",
    "internal-error",
    "intermittent-task",
]
ReasonResolved = Literal[
    "completed", "failed", "canceled", "deadline-exceeded", "claim-expired", ExceptionReason
]


class RunStatus(TypedDict):
    """One run. The worker's fields appear once it is claimed; `reasonResolved` once it is resolved."""

    runId: int
    state: RunState
    reasonCreated: ReasonCreated
    scheduled: str
    reasonResolved: NotRequired[ReasonResolved]
    workerGroup: NotRequired[str]
    workerId: NotRequired[str]
    takenUntil: NotRequired[str]
    started: NotRequired[str]
    resolved: NotRequired[str]


class TaskStatus(TypedDict):
    taskId: str
    provisionerId: str
    workerType: str
    taskQueueId: str
    schedulerId: str
    projectId: str
    taskGroupId: str
    priority: Priority
    deadline: str
    expires: str
    retriesLeft: int
    state: TaskState
    runs: list[RunStatus]


class StatusAnswer(TypedDict):
    """What createTask, scheduleTask, rerunTask, cancelTask, the reports and `status` answer."""

    status: TaskStatus
