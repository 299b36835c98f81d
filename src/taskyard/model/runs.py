"""The run state machine: every transition of a task's runs, as pure functions.

A transition takes a `TaskRecord` and answers a `Change`: the new record, the events to
publish, and what the claim index and dependency resolver must learn. Storage applies a
change with a conditional update on the record's `version`, so that of two racing
transitions only one commits; the other is recomputed on the fresh record.

    (no runs) --schedule/rerun--> pending --claim--> running --report*--> completed | failed | exception
        |                            |                  |-- claim expired, worker-shutdown,
        |                            |                  |   intermittent-task: exception, and a new
        |                            |                  |   pending run while retries last
        +--cancel/deadline--> exception   <--cancel/deadline--+
    resolved --rerun--> new pending run
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import get_args

from taskyard.model import dates
from taskyard.model.errors import InputError, RequestConflict
from taskyard.model.messages import Message, task_message
from taskyard.model.status import (
    REASON_ALIASES,
    ExceptionReason,
    ReasonCreated,
    ReasonResolved,
    ResolvedState,
    RunStatus,
    TaskState,
    TaskStatus,
)
from taskyard.model.task_definition import Priority, Requires, TaskDefinition
from taskyard.model.types import Millis

RESOLVED: tuple[ResolvedState, ...] = get_args(ResolvedState)
EXCEPTION_REASONS: tuple[ExceptionReason, ...] = get_args(ExceptionReason)
# The first protocol's spellings reportException also takes: `resources-unavailable` for
# resource-unavailable, and `claim-timeout`, a worker giving up a claim it can no longer keep,
# recorded as the queue records an expired claim (claim-expired, retried while retries last).
REPORT_ALIASES = ("resources-unavailable", "claim-timeout")
# Every reason reportException accepts.
REPORTED_REASONS: tuple[str, ...] = (*EXCEPTION_REASONS, *REPORT_ALIASES)
# Exception reasons that give the task another run while it has retries left.
RETRY_REASONS: dict[ReasonResolved, ReasonCreated] = {
    "worker-shutdown": "retry",
    "claim-expired": "retry",
    "intermittent-task": "task-retry",
}
MAX_RUNS = 50


@dataclass
class TaskRecord:
    """A task as stored: its definition, runs and the columns the indexes need."""

    task_id: str
    task_group_id: str
    scheduler_id: str
    project_id: str
    task_queue_id: str
    priority: Priority
    requires: Requires
    retries_left: int
    created: Millis
    deadline: Millis
    expires: Millis
    definition: TaskDefinition
    runs: list[RunStatus] = field(default_factory=list)
    taken_until: Millis | None = None
    claimed_at: Millis | None = None
    ever_resolved: bool = False
    version: int = 0

    @property
    def state(self) -> TaskState:
        return self.runs[-1]["state"] if self.runs else "unscheduled"

    def status(self) -> TaskStatus:
        """The task status structure TaskCluster answers."""
        d = self.definition
        return {
            "taskId": self.task_id,
            "provisionerId": d["provisionerId"],
            "workerType": d["workerType"],
            "taskQueueId": self.task_queue_id,
            "schedulerId": self.scheduler_id,
            "projectId": self.project_id,
            "taskGroupId": self.task_group_id,
            "priority": self.priority,
            "deadline": d["deadline"],
            "expires": d["expires"],
            "retriesLeft": self.retries_left,
            "state": self.state,
            "runs": _copy_runs(self.runs),
        }


@dataclass
class Change:
    """What a transition did: the new record and what must happen with it, in one transaction."""

    record: TaskRecord
    messages: list[Message] = field(default_factory=list)
    changed: bool = True  # False: an idempotent repeat; only the messages are sent again
    enqueue_run: int | None = None  # a run that became pending: add it to the claim index
    dequeue: bool = False  # drop any pending-index row of the task
    resolution: ResolvedState | None = None  # a final resolution the dependency resolver must see
    priority_changed: bool = False  # the claim index must learn the new priority


def _copy_runs(runs: list[RunStatus]) -> list[RunStatus]:
    """A copy of `runs` that the original's changes never reach: a run holds only strings and
    ints, so copying each run's dict is a deep copy."""
    return [run.copy() for run in runs]


def _fork(rec: TaskRecord) -> TaskRecord:
    """A record to change: its runs copied, the definition shared (no transition changes it).

    `dataclasses.replace(rec, runs=...)` without its per-field walk: every field is an init field
    with no check of its own, so a copy of the instance's dict is the same record.
    """
    new = object.__new__(TaskRecord)
    new.__dict__.update(rec.__dict__)
    new.runs = _copy_runs(rec.runs)
    return new


def _message(rec: TaskRecord, exchange: str, run: RunStatus | None, **extra: object) -> Message:
    worker = (run["workerGroup"], run["workerId"]) if run is not None and "workerGroup" in run else None
    run_id = None if run is None else run["runId"]
    return task_message(exchange, rec.status(), rec.definition, run_id=run_id, worker=worker, extra=extra)


def _latest(rec: TaskRecord, run_id: int) -> RunStatus:
    if run_id >= len(rec.runs):
        raise RequestConflict(f"run {run_id} of task {rec.task_id} does not exist")
    if run_id != len(rec.runs) - 1:
        raise RequestConflict(
            f"run {run_id} of task {rec.task_id} is not its latest run (the latest is {len(rec.runs) - 1})"
        )
    return rec.runs[run_id]


def _add_pending_run(rec: TaskRecord, reason: ReasonCreated, now: Millis) -> Change:
    run: RunStatus = {
        "runId": len(rec.runs),
        "state": "pending",
        "reasonCreated": reason,
        "scheduled": dates.to_iso(now),
    }
    rec.runs.append(run)
    rec.taken_until = rec.claimed_at = None
    rec.version += 1
    return Change(rec, [_message(rec, "task-pending", run)], enqueue_run=run["runId"])


def pending_message(rec: TaskRecord) -> Message:
    """task-pending for the task's latest run, which is pending."""
    return _message(rec, "task-pending", rec.runs[-1])


def schedule(rec: TaskRecord, now: Millis, reason: ReasonCreated = "scheduled") -> Change:
    """Give a task with no runs its first, pending run. A task with runs is left as it is."""
    if rec.runs:
        return Change(rec, changed=False)
    return _add_pending_run(_fork(rec), reason, now)


def claim(rec: TaskRecord, run_id: int, worker: tuple[str, str], now: Millis, taken_until: Millis) -> Change:
    """pending -> running for `worker`. The same worker claiming again gets its claim back."""
    run = _latest(rec, run_id)
    if run["state"] == "running" and (run.get("workerGroup"), run.get("workerId")) == worker:
        return Change(rec, changed=False)
    if run["state"] != "pending":
        raise RequestConflict(f"run {run_id} of task {rec.task_id} is {run['state']}, not pending")
    new = _fork(rec)
    run = new.runs[run_id]
    run["state"] = "running"
    run["workerGroup"], run["workerId"] = worker
    run["takenUntil"], run["started"] = dates.to_iso(taken_until), dates.to_iso(now)
    new.taken_until, new.claimed_at = taken_until, now
    new.version += 1
    message = _message(new, "task-running", run, takenUntil=run["takenUntil"])
    return Change(new, [message], dequeue=True)


def reclaim(rec: TaskRecord, run_id: int, taken_until: Millis) -> Change:
    """Extend the claim of the latest, running run. Conflict once the run is resolved."""
    run = _latest(rec, run_id)
    if run["state"] != "running":
        raise RequestConflict(
            f"run {run_id} of task {rec.task_id} is {run['state']}: the claim is over, stop working on it"
        )
    new = _fork(rec)
    new.runs[run_id]["takenUntil"] = dates.to_iso(taken_until)
    new.taken_until = taken_until
    new.version += 1
    return Change(new)


def resolve(
    rec: TaskRecord, run_id: int, state: ResolvedState, reason: ReasonResolved, now: Millis
) -> Change:
    """Resolve a running run completed, failed or exception(reason); retry when the reason allows.

    Repeating the same resolution is accepted and re-sends its messages; a different one conflicts.
    """
    if run_id >= len(rec.runs):
        raise RequestConflict(f"run {run_id} of task {rec.task_id} does not exist")
    run = rec.runs[run_id]
    if run["state"] == state and run.get("reasonResolved") == reason and _repeatable(rec, run_id):
        return _repeat_resolution(rec, run_id)
    run = _latest(rec, run_id)
    if run["state"] != "running":
        raise RequestConflict(_not_running(rec, run_id, state, reason))
    new = _fork(rec)
    run = new.runs[run_id]
    run["state"], run["reasonResolved"], run["resolved"] = state, reason, dates.to_iso(now)
    new.taken_until = new.claimed_at = None
    return _after_resolution(new, run, state, now, retry_reason=RETRY_REASONS.get(reason))


def _not_running(rec: TaskRecord, run_id: int, state: ResolvedState, reason: ReasonResolved) -> str:
    run = rec.runs[run_id]
    if run["state"] in RESOLVED:
        how = run["state"] + (f" ({run.get('reasonResolved')})" if run["state"] == "exception" else "")
        asked = state + (f" ({reason})" if state == "exception" else "")
        return f"run {run_id} of task {rec.task_id} is already resolved {how}; cannot resolve it {asked}"
    return f"run {run_id} of task {rec.task_id} is {run['state']}, not running: it cannot be resolved"


def _repeatable(rec: TaskRecord, run_id: int) -> bool:
    if run_id == len(rec.runs) - 1:
        return True
    following = rec.runs[run_id + 1]
    return run_id + 2 == len(rec.runs) and following["reasonCreated"] in ("retry", "task-retry")


def _repeat_resolution(rec: TaskRecord, run_id: int) -> Change:
    run = rec.runs[run_id]
    exchange = "task-exception" if run["state"] == "exception" else f"task-{run['state']}"
    messages = [_message(rec, exchange, run)]
    if run_id + 1 < len(rec.runs) and rec.runs[-1]["state"] == "pending":
        messages.append(pending_message(rec))
    return Change(rec, messages, changed=False)


def _after_resolution(
    rec: TaskRecord, run: RunStatus, state: ResolvedState, now: Millis, *, retry_reason: ReasonCreated | None
) -> Change:
    """The run was just resolved `state`: announce it, and add a retry run if the reason gives one."""
    exchange = f"task-{state}"
    rec.version += 1
    if retry_reason is not None and rec.retries_left > 0 and len(rec.runs) < MAX_RUNS:
        resolved_message = _message(rec, exchange, run)
        rec.retries_left -= 1
        change = _add_pending_run(rec, retry_reason, now)
        change.messages.insert(0, resolved_message)
        return change
    rec.ever_resolved = True
    return Change(rec, [_message(rec, exchange, run)], resolution=state)


def cancel(rec: TaskRecord, now: Millis, reason: ReasonResolved = "canceled") -> Change:
    """Resolve the task exception(`reason`: canceled or deadline-exceeded). Never retries.

    A task with no runs gets a run 0 created `exception`. A resolved task is left alone; if its
    last run was itself canceled, the cancellation's message is sent again.
    """
    new = _fork(rec)
    if not new.runs:
        at = dates.to_iso(now)
        first: RunStatus = {
            "runId": 0,
            "state": "exception",
            "reasonCreated": "exception",
            "reasonResolved": reason,
            "scheduled": at,
            "resolved": at,
        }
        new.runs.append(first)
        return _after_resolution(new, first, "exception", now, retry_reason=None)
    run = new.runs[-1]
    if run["state"] in RESOLVED:
        if run["state"] == "exception" and run.get("reasonResolved") == reason:
            return Change(rec, [_message(rec, "task-exception", rec.runs[-1])], changed=False)
        return Change(rec, changed=False)
    was_pending = run["state"] == "pending"
    run["state"], run["reasonResolved"], run["resolved"] = "exception", reason, dates.to_iso(now)
    new.taken_until = new.claimed_at = None
    change = _after_resolution(new, run, "exception", now, retry_reason=None)
    change.dequeue = was_pending
    return change


def rerun(rec: TaskRecord, now: Millis) -> Change:
    """Give an unscheduled or resolved task a new pending run; a pending or running task is left alone."""
    if not rec.runs:
        return schedule(rec, now, reason="rerun")
    state = rec.runs[-1]["state"]
    if state == "pending":
        return Change(rec, [pending_message(rec)], changed=False)
    if state == "running":
        return Change(rec, changed=False)
    if len(rec.runs) >= MAX_RUNS:
        raise RequestConflict(f"task {rec.task_id} already has {MAX_RUNS} runs, the most a task may have")
    new = _fork(rec)
    new.retries_left = min(new.definition["retries"], MAX_RUNS - 2 - (len(new.runs) - 1))
    new.ever_resolved = False
    return _add_pending_run(new, "rerun", now)


def check_exception_reason(reason: object) -> ReasonResolved:
    """The reason reportException records for `reason`: one of EXCEPTION_REASONS, or an alias of
    REPORT_ALIASES in today's spelling; InputError for anything else."""
    if isinstance(reason, str) and reason in REPORT_ALIASES:
        return REASON_ALIASES[reason]
    for known in EXCEPTION_REASONS:
        if reason == known:
            return known
    raise InputError(f"reason must be one of: {', '.join(REPORTED_REASONS)} (got {reason!r})")
