"""The task status as TaskCluster answers it: task and run states, reasons, and their shapes.

`TaskRecord.status()` (model/runs.py) builds a `TaskStatus`; createTask, the actions on a task,
the reports and the claims answer it, and every task event carries it.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from taskyard.model import schema
from taskyard.model.task_definition import PRIORITIES, Priority

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
# The first protocol's spellings of two reasons, accepted on input as today's (docs/protocol.md,
# Where taskyard differs from the design documents); answers always use today's.
REASON_ALIASES: dict[str, ReasonResolved] = {
    "resources-unavailable": "resource-unavailable",
    "claim-timeout": "claim-expired",
}


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


# The same shapes as JSON schemas, for the API's document and the tests that check real answers.
_WHEN = schema.date_time()
RUN_STATUS = schema.obj(
    {
        "runId": schema.integer(minimum=0),
        "state": schema.enum("pending", "running", "completed", "failed", "exception"),
        "reasonCreated": schema.enum("scheduled", "retry", "task-retry", "rerun", "exception"),
        "reasonResolved": schema.enum(
            "completed",
            "failed",
            "canceled",
            "deadline-exceeded",
            "claim-expired",
            "worker-shutdown",
            "malformed-payload",
            "resource-unavailable",
            "internal-error",
            "intermittent-task",
        ),
        "workerGroup": schema.string(),
        "workerId": schema.string(),
        "takenUntil": _WHEN,
        "scheduled": _WHEN,
        "started": _WHEN,
        "resolved": _WHEN,
    },
    required=["runId", "state", "reasonCreated", "scheduled"],
    additional=False,
)
TASK_STATUS = schema.obj(
    {
        "taskId": schema.string(),
        "provisionerId": schema.string(),
        "workerType": schema.string(),
        "taskQueueId": schema.string(),
        "schedulerId": schema.string(),
        "projectId": schema.string(),
        "taskGroupId": schema.string(),
        "priority": schema.enum(*PRIORITIES),
        "deadline": _WHEN,
        "expires": _WHEN,
        "retriesLeft": schema.integer(minimum=0),
        "state": schema.enum("unscheduled", "pending", "running", "completed", "failed", "exception"),
        "runs": schema.array(RUN_STATUS),
    },
    required=list(TaskStatus.__annotations__),
    additional=False,
)
STATUS_ANSWER = schema.obj({"status": TASK_STATUS}, required=["status"], additional=False)
"""`StatusAnswer` as a JSON schema."""
