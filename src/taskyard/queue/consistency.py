"""Is the queue's state consistent? The rules every committed state keeps, checked from storage.

`problems(storage)` reads the tasks, the claim index, the resolution queue and the outbox, and
answers one line for each rule broken ([] when none is). The rules:

- a task's `state` column is its last run's state (`unscheduled` without runs); run ids count
  up from 0; only the last run may be pending or running;
- `taken_until` and `claimed_at` are set while, and only while, the task is running, and
  `taken_until` is the last run's `takenUntil`; `ever_resolved` holds while the last run is
  resolved;
- a pending task has its claim-index row (`pending_runs`) for its last run, on its task queue,
  and every claim-index row is such a row. (A pending task past its deadline may have lost its
  row to the expiry sweep: that is allowed.);
- every event in the outbox, and every resolution waiting for the dependency resolver, is about
  a task (or task group) that exists, and events are well formed.

Everything is read in one transaction. On SQLite that is a snapshot even while a server writes;
on PostgreSQL (read committed) each query sees its own moment, so check a database at rest:
a stopped server's, a restored backup.

Used by the tests of backups and upgrades, and meant for anything that wants to know whether a
database survived what was done to it.
"""

from __future__ import annotations

import orjson

from taskyard.model import dates
from taskyard.model.messages import EXCHANGES
from taskyard.model.runs import RESOLVED
from taskyard.model.types import LooseJSON, Millis
from taskyard.storage.port import Row, Session, Storage

GROUP_EXCHANGES = ("task-group-resolved", "task-group-sealed", "task-group-priority-changed")


async def problems(storage: Storage, *, now: Millis | None = None) -> list[str]:
    """Every broken rule, one line each; [] for a consistent queue. `now`: the queue's clock."""
    now = dates.now_ms() if now is None else now
    async with storage.transaction() as tx:
        tasks = {row["task_id"]: row for row in await tx.fetch("consistency_tasks")}
        pending = await tx.fetch("consistency_pending_runs")
        found = [*_claim_index(tasks, pending, now), *await _queued(tx, tasks)]
    for task_id, row in tasks.items():
        found += _task(task_id, row)
    return found


def _runs(row: Row) -> list[LooseJSON]:
    runs = orjson.loads(row["runs"])
    return runs if isinstance(runs, list) else []


def _state(runs: list[LooseJSON]) -> str:
    """What the runs say the task's state is: the truth the columns must agree with."""
    return str(runs[-1].get("state")) if runs else "unscheduled"


def _task(task_id: str, row: Row) -> list[str]:
    runs = _runs(row)
    last = runs[-1] if runs else None
    state = _state(runs)
    found = []
    if row["state"] != state:
        found.append(f"task {task_id}: state column {row['state']!r}, but its last run is {state!r}")
    if [run.get("runId") for run in runs] != list(range(len(runs))):
        found.append(f"task {task_id}: run ids {[run.get('runId') for run in runs]} do not count from 0")
    for run in runs[:-1]:
        if run.get("state") not in RESOLVED:
            found.append(f"task {task_id}: run {run.get('runId')} is {run.get('state')!r} but not the last")
    if state == "running":
        assert last is not None
        try:
            taken_until: Millis | None = dates.parse_iso(str(last["takenUntil"]))
        except (KeyError, ValueError):
            taken_until = None
        if row["taken_until"] != taken_until or row["claimed_at"] is None:
            found.append(
                f"task {task_id}: running, but taken_until {row['taken_until']} and claimed_at "
                f"{row['claimed_at']} do not match its run's takenUntil {last.get('takenUntil')}"
            )
    elif row["taken_until"] is not None or row["claimed_at"] is not None:
        found.append(f"task {task_id}: {state}, but it still has taken_until or claimed_at")
    if bool(row["ever_resolved"]) != (state in RESOLVED):
        found.append(f"task {task_id}: {state}, but ever_resolved is {bool(row['ever_resolved'])}")
    return found


def _claim_index(tasks: dict[str, Row], pending: list[Row], now: Millis) -> list[str]:
    found = []
    indexed: dict[str, list[int]] = {}
    for row in pending:
        indexed.setdefault(row["task_id"], []).append(row["run_id"])
        task = tasks.get(row["task_id"])
        if task is None:
            found.append(f"claim index: run {row['run_id']} of task {row['task_id']}, which does not exist")
            continue
        runs = _runs(task)
        if _state(runs) != "pending" or row["run_id"] != len(runs) - 1:
            found.append(
                f"claim index: run {row['run_id']} of task {row['task_id']}, which is {_state(runs)} "
                f"with {len(runs)} runs"
            )
        elif row["task_queue_id"] != task["task_queue_id"]:
            found.append(
                f"claim index: task {row['task_id']} is on {row['task_queue_id']}, but the task's "
                f"queue is {task['task_queue_id']}"
            )
    for task_id, task in tasks.items():
        pending_now = _state(_runs(task)) == "pending"
        if pending_now and not indexed.get(task_id) and task["deadline"] > now:
            found.append(f"task {task_id}: pending, but not in the claim index")
        if len(indexed.get(task_id, ())) > 1:
            found.append(f"task {task_id}: {len(indexed[task_id])} rows in the claim index")
    return found


async def _queued(session: Session, tasks: dict[str, Row]) -> list[str]:
    """The outbox and the resolution queue: each row about something that exists."""
    found = []
    groups = {row["task_group_id"] for row in await session.fetch("consistency_groups")}
    for row in await session.fetch("consistency_resolutions"):
        if row["task_id"] not in tasks:
            found.append(f"resolution {row['id']}: task {row['task_id']}, which does not exist")
    for row in await session.fetch("consistency_outbox"):
        if row["exchange"] == "notification":
            continue  # the notify service's pulse messages: about no task
        where = f"outbox event {row['id']} ({row['exchange']})"
        try:
            body, cc = orjson.loads(row["body"]), orjson.loads(row["cc"])
        except orjson.JSONDecodeError:
            found.append(f"{where}: its body or CC list is not JSON")
            continue
        if row["exchange"] not in EXCHANGES or not isinstance(body, dict) or not isinstance(cc, list):
            found.append(f"{where}: not an event the queue publishes")
        elif row["exchange"] in GROUP_EXCHANGES:
            if body.get("taskGroupId") not in groups:
                found.append(f"{where}: task group {body.get('taskGroupId')}, which does not exist")
        elif (body.get("status") or {}).get("taskId") not in tasks:
            found.append(f"{where}: task {(body.get('status') or {}).get('taskId')}, which does not exist")
    return found
