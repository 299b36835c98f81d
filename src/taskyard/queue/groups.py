"""Task groups: one schedulerId per group, sealing, cancelling, listing, and group resolution."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from taskyard.model import dates, paging, runs, slugid
from taskyard.model.errors import InvalidRequestArguments, RequestConflict, ResourceNotFound
from taskyard.model.guard import Guard
from taskyard.model.messages import group_message
from taskyard.model.runs import TaskRecord
from taskyard.model.status import TaskStatus
from taskyard.model.task_definition import Priority, TaskDefinition
from taskyard.queue import service
from taskyard.queue.service import Queue
from taskyard.storage.port import Row, Session, Tx


class TaskGroup(TypedDict):
    """getTaskGroup and sealTaskGroup's answer; `sealed` once the group is sealed."""

    taskGroupId: str
    schedulerId: str
    expires: str
    sealed: NotRequired[str]


class TaskAndStatus(TypedDict):
    """A task as listTaskGroup and listDependentTasks list it."""

    status: TaskStatus
    task: TaskDefinition


class TaskGroupList(TaskGroup, paging.Page):
    tasks: list[TaskAndStatus]


class TaskGroupCancelled(TypedDict):
    taskGroupId: str
    taskGroupSize: int
    cancelledCount: int
    taskIds: list[str]


class TaskGroupPriorityChanged(TypedDict):
    taskGroupId: str
    schedulerId: str
    newPriority: Priority
    tasksAffected: int
    taskIds: list[str]


def check_group_id(task_group_id: str) -> str:
    if not slugid.is_valid(task_group_id):
        raise InvalidRequestArguments(f"taskGroupId {task_group_id!r} is not a valid slugid")
    return task_group_id


def group_body(row: Row) -> TaskGroup:
    body: TaskGroup = {
        "taskGroupId": row["task_group_id"],
        "schedulerId": row["scheduler_id"],
        "expires": dates.to_iso(row["expires"]),
    }
    if row["sealed"] is not None:
        body["sealed"] = dates.to_iso(row["sealed"])
    return body


async def join_group_tx(q: Queue, tx: Tx, rec: TaskRecord) -> bool:
    """Create the task's group or check it may join it: same schedulerId, not sealed. Answer
    whether the task itself exists already (it may have been created since: that is for the
    task's own insert to find out)."""
    row = await tx.fetchrow("join_group", task_id=rec.task_id, **_joining(q, rec))
    assert row is not None
    if row["scheduler_id"] != rec.scheduler_id:
        raise RequestConflict(
            f"task group {rec.task_group_id} belongs to schedulerId {row['scheduler_id']!r}, "
            f"not {rec.scheduler_id!r}"
        )
    if row["sealed"] is not None:
        raise RequestConflict(f"task group {rec.task_group_id} is sealed; no task can be added to it")
    return bool(row["task_exists"])


async def join_group_checked_tx(q: Queue, tx: Tx, rec: TaskRecord) -> None:
    """`join_group_tx` for a task taken to be new, as a deferred write that reads nothing: if the
    group refuses the task, the transaction fails (`RowMoved`), and the caller goes through
    `join_group_tx` to learn why."""
    await tx.defer_checked("join_group_checked", **_joining(q, rec))


def _joining(q: Queue, rec: TaskRecord) -> dict[str, object]:
    # join_group's and join_group_checked's parameters. One statement creates the group, renews
    # an expired one, or extends a live one that would expire within the hour after the task; a
    # refusal rolls it back with the rest of createTask. Extending by two hours rather than one leaves
    # most tasks of a busy group nothing to write: on PostgreSQL they join it under a shared
    # lock, not one after another.
    needed = rec.expires + dates.HOUR
    return {
        "task_group_id": rec.task_group_id,
        "scheduler_id": rec.scheduler_id,
        "expires": needed + dates.HOUR,
        "now": q.clock(),
        "needed": needed,
    }


async def _get(session: Session, task_group_id: str) -> Row:
    row = await session.fetchrow("get_group", check_group_id(task_group_id))
    if row is None:
        raise ResourceNotFound(f"task group {task_group_id} does not exist")
    return row


async def get_task_group(q: Queue, task_group_id: str) -> TaskGroup:
    async with q.storage.reader() as session:
        return group_body(await _get(session, task_group_id))


async def list_task_group(q: Queue, task_group_id: str, query: paging.Query) -> TaskGroupList:
    async with q.storage.reader() as session:
        body = group_body(await _get(session, task_group_id))
        (after,) = paging.after(query, 1, [""])  # keyset: a deep page costs what the first does
        rows = await session.fetch("list_group_tasks", task_group_id, after, query.limit + 1)
    tasks = tasks_and_statuses(rows)
    last: list[object] | None = [rows[query.limit - 1]["task_id"]] if len(rows) > query.limit else None
    return {
        **body,
        "tasks": tasks[: query.limit],
        **paging.more(paging.keyset_token(tasks, last, query.limit)),
    }


def tasks_and_statuses(rows: list[Row]) -> list[TaskAndStatus]:
    return [
        {"status": r.status(), "task": service.definition_of(r)} for r in map(service.record_from_row, rows)
    ]


def _guard_group(guard: Guard, row: Row) -> None:
    guard(schedulerId=row["scheduler_id"])


async def seal_task_group(q: Queue, task_group_id: str, *, guard: Guard) -> TaskGroup:
    """Seal the group so no task joins it; idempotent, and announces itself every time.

    `guard` sees the group's schedulerId once it is loaded (404 first), as for cancel and
    changeTaskGroupPriority.
    """
    async with q.storage.transaction() as tx:
        _guard_group(guard, await _get(tx, task_group_id))
        await tx.execute("seal_group", task_group_id, q.clock())
        body = group_body(await _get(tx, task_group_id))
        message = group_message("task-group-sealed", task_group_id, body["schedulerId"], _rest(body))
        await service.publish_tx(q, tx, [message])
    return body


def _rest(body: TaskGroup) -> dict[str, object]:
    return {k: v for k, v in body.items() if k not in ("taskGroupId", "schedulerId")}


async def cancel_task_group(q: Queue, task_group_id: str, *, guard: Guard) -> TaskGroupCancelled:
    """Cancel every unresolved task of a sealed group; answers what this call cancelled."""
    async with q.storage.reader() as session:
        row = await _get(session, task_group_id)
        _guard_group(guard, row)
        size = await session.fetchval("group_size", task_group_id)
        open_ids = [
            r["task_id"] for r in await session.fetch("group_open_task_ids", task_group_id, q.clock())
        ]
    if row["sealed"] is None:
        raise RequestConflict(f"task group {task_group_id} must be sealed before it can be cancelled")
    cancelled = []
    for task_id in open_ids:
        change = await service.transition(q, task_id, lambda rec: runs.cancel(rec, q.clock()))
        if change.changed:
            cancelled.append(task_id)
    return {
        "taskGroupId": task_group_id,
        "taskGroupSize": int(size),
        "cancelledCount": len(cancelled),
        "taskIds": cancelled,
    }


async def announce_resolved_tx(q: Queue, tx: Tx, task_group_ids: list[str]) -> None:
    """Publish task-group-resolved for each of these groups with no task waiting for a final resolution."""
    messages = []
    for row in await tx.fetch("resolved_groups", task_group_ids):
        body = group_body(row)
        messages.append(
            group_message("task-group-resolved", body["taskGroupId"], body["schedulerId"], _rest(body))
        )
    await service.publish_tx(q, tx, messages)


async def change_task_group_priority(
    q: Queue, task_group_id: str, new_priority: Priority, *, guard: Guard
) -> TaskGroupPriorityChanged:
    """Give every unresolved task of the group a new priority."""
    from taskyard.queue import tasks  # tasks imports groups

    async with q.storage.reader() as session:
        row = await _get(session, task_group_id)
        _guard_group(guard, row)
        open_ids = [
            r["task_id"] for r in await session.fetch("group_open_task_ids", task_group_id, q.clock())
        ]
    affected = []
    for task_id in open_ids:

        def step(rec: TaskRecord) -> runs.Change:
            if rec.ever_resolved or rec.priority == new_priority:
                return runs.Change(rec, changed=False)
            return tasks.reprioritise(rec, new_priority)

        change = await service.transition(q, task_id, step)
        if change.changed:
            affected.append(task_id)
    body = {"newPriority": new_priority, "tasksAffected": len(affected)}
    async with q.storage.transaction() as tx:
        message = group_message("task-group-priority-changed", task_group_id, row["scheduler_id"], body)
        await service.publish_tx(q, tx, [message])
    return {
        "taskGroupId": task_group_id,
        "schedulerId": row["scheduler_id"],
        "newPriority": new_priority,
        "tasksAffected": len(affected),
        "taskIds": affected,
    }
