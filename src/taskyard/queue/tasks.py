"""Defining tasks and acting on them as a user: create, read, schedule, rerun, cancel, reprioritise."""

from __future__ import annotations

from taskyard.model import dates, runs, slugid, task_definition
from taskyard.model.errors import InputError, InvalidRequestArguments, RequestConflict
from taskyard.model.guard import Guard
from taskyard.model.messages import Message, task_message
from taskyard.model.runs import Change, TaskRecord
from taskyard.model.status import StatusAnswer
from taskyard.model.task_definition import Priority, TaskDefinition
from taskyard.queue import groups, service, workers
from taskyard.queue.service import Queue
from taskyard.storage.port import RowMoved, Tx, UniqueViolation

MAX_BULK_IDS = 1000
# createTask's scope template; `guard_definition()` gives it its values.
CREATE_TASK_SCOPES = {
    "AllOf": [
        {"for": "scope", "in": "scopes", "each": "<scope>"},
        {"for": "route", "in": "routes", "each": "queue:route:<route>"},
        "queue:create-task:project:<projectId>",
        "queue:scheduler-id:<schedulerId>",
        {
            "AnyOf": [
                {"for": "priority", "in": "priorities", "each": "queue:create-task:<priority>:<taskQueueId>"}
            ]
        },
    ]
}


def check_task_id(task_id: str, name: str = "taskId") -> str:
    if not slugid.is_valid(task_id):
        raise InvalidRequestArguments(
            f"{name} {task_id!r} is not a valid slugid (22 URL-safe base64 characters)"
        )
    return task_id


def new_record(task_id: str, definition: TaskDefinition, retries: int) -> TaskRecord:
    return TaskRecord(
        task_id=task_id,
        task_group_id=definition["taskGroupId"],
        scheduler_id=definition["schedulerId"],
        project_id=definition["projectId"],
        task_queue_id=definition["taskQueueId"],
        priority=definition["priority"],
        requires=definition["requires"],
        retries_left=retries,
        created=dates.parse_iso(definition["created"]),
        deadline=dates.parse_iso(definition["deadline"]),
        expires=dates.parse_iso(definition["expires"]),
        definition=definition,
    )


def define(q: Queue, task_id: str, body: object) -> TaskDefinition:
    """The task definition `body` validated, with its defaults filled in; 400 if it is not valid."""
    check_task_id(task_id)
    return task_definition.validate(
        task_id, body, now=q.clock(), max_deadline_days=q.config.max_task_deadline_days
    )


async def create_task(q: Queue, task_id: str, body: object, *, guard: Guard) -> StatusAnswer:
    """Define a task. Idempotent: the same definition again answers the current status; another, 409.

    `guard` checks the definition's scopes, routes, projectId, schedulerId, taskQueueId, and the
    priorities at or above the task's (a scope for any of them will do), once the definition is
    known to be valid (400 first).
    """
    definition = define(q, task_id, body)
    guard_definition(guard, definition)
    if not definition["dependencies"]:
        try:
            # Writes alone, which on PostgreSQL go in one message: for a new task, in a group
            # that takes it, the usual case.
            async with q.storage.transaction() as tx:
                return await _create_new_tx(q, tx, task_id, definition)
        except (UniqueViolation, RowMoved):
            pass  # the task exists, or its group refused it: the way below reads which, and answers
    for attempt in range(3):
        try:
            return await _create_tx(q, task_id, definition)
        except UniqueViolation:
            # A racing createTask inserted the same task or group first: look again, and
            # answer as for a repeat (or a conflict) now that its row is there.
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


async def _create_tx(q: Queue, task_id: str, definition: TaskDefinition) -> StatusAnswer:
    async with q.storage.transaction() as tx:
        return await create_task_tx(q, tx, task_id, definition)


async def _create_new_tx(q: Queue, tx: Tx, task_id: str, definition: TaskDefinition) -> StatusAnswer:
    """createTask for a task without dependencies, taken to be new, in writes that read nothing:
    a taskId taken is the task insert's UniqueViolation, a group that refuses the task its
    checked join's RowMoved."""
    rec = new_record(task_id, definition, definition["retries"])
    await groups.join_group_checked_tx(q, tx, rec)
    return await _insert_new_tx(q, tx, rec, blocked=False)


def guard_definition(guard: Guard, definition: TaskDefinition) -> None:
    """Check createTask's scopes (`CREATE_TASK_SCOPES`) with the values of `definition`."""
    priority = definition["priority"]
    guard(
        scopes=definition["scopes"],
        routes=definition["routes"],
        projectId=definition["projectId"],
        schedulerId=definition["schedulerId"],
        taskQueueId=definition["taskQueueId"],
        priorities=task_definition.PRIORITIES[: task_definition.PRIORITIES.index(priority) + 1],
    )


async def create_task_tx(q: Queue, tx: Tx, task_id: str, definition: TaskDefinition) -> StatusAnswer:
    """createTask inside `tx`, for a definition `define()` checked and whose scopes were checked.

    The task's dependencies must exist, in `tx` or before it (400 otherwise); the same definition
    again answers the task's status, another is a 409.
    """
    rec = new_record(task_id, definition, definition["retries"])
    if await groups.join_group_tx(q, tx, rec):
        # A repeat. (A task created meanwhile by another transaction makes the insert below a
        # UniqueViolation instead, and create_task() tries again, finding it here.)
        again = await service.load_for_update_tx(tx, rec.task_id)
        return await _repeat_create_tx(q, tx, again, definition)
    blocked = await _add_dependencies_tx(tx, rec)
    return await _insert_new_tx(q, tx, rec, blocked=blocked)


async def _insert_new_tx(q: Queue, tx: Tx, rec: TaskRecord, *, blocked: bool) -> StatusAnswer:
    """Insert a new task's row, scheduled unless `blocked`, with its events."""
    defined = task_message("task-defined", rec.status(), rec.definition)
    change = Change(rec, changed=False) if blocked else runs.schedule(rec, q.clock())
    change.messages.insert(0, defined)
    # The row goes in already scheduled: one insert instead of an insert and an update. Deferred:
    # a taskId taken meanwhile fails the transaction, and create_task() tries again (as above).
    await service.insert_record_tx(tx, change.record, deferred=True)
    # listTaskQueues lists a queue once a task is created in it, as TaskCluster's does (at most
    # one write a minute per queue and process), not only once a worker has polled it.
    await workers.task_queue_seen_tx(q, tx, rec.task_queue_id, q.clock())
    change.changed = False
    await service.apply_tx(q, tx, change, old_version=rec.version)
    return service.status_of(change)


async def create_tasks_tx(q: Queue, tx: Tx, items: list[tuple[str, TaskDefinition]]) -> None:
    """createTask for many new tasks inside `tx`, in a bounded number of statements per task.

    Each definition was checked by `define()` and its scopes by the caller. Every task must be
    new (a taskId that exists is a UniqueViolation) and listed after the tasks of `items` it
    depends on; dependencies outside `items` must exist (400 naming the task otherwise).
    """
    records = [new_record(task_id, definition, definition["retries"]) for task_id, definition in items]
    for rec in _one_per_group(records):
        await groups.join_group_tx(q, tx, rec)
    states = await _outside_dependencies_tx(tx, records)
    edges: list[tuple[str, str, str, bool, int]] = []
    messages: list[Message] = []
    for rec in records:
        blocked = False
        for dep in rec.definition["dependencies"]:
            state = states.get(dep, "unscheduled") if dep != rec.task_id else "unscheduled"
            satisfied = state == "completed" or (
                rec.requires == "all-resolved" and state in ("failed", "exception")
            )
            blocked = blocked or not satisfied
            edges.append((dep, rec.task_id, rec.requires, satisfied, rec.expires))
        change = Change(rec, changed=False) if blocked else runs.schedule(rec, q.clock())
        states[rec.task_id] = change.record.state
        await service.insert_record_tx(tx, change.record)
        if change.enqueue_run is not None:
            await service.enqueue_tx(q, tx, change.record, change.enqueue_run)
        messages.append(task_message("task-defined", rec.status(), rec.definition))
        messages += change.messages
    if edges:
        await tx.executemany("insert_dependency", edges)
    for task_queue_id in sorted({rec.task_queue_id for rec in records}):
        await workers.task_queue_seen_tx(q, tx, task_queue_id, q.clock())
    await service.publish_tx(q, tx, messages)


def _one_per_group(records: list[TaskRecord]) -> list[TaskRecord]:
    """For each task group, the record that keeps it longest: joining with it joins them all."""
    latest: dict[str, TaskRecord] = {}
    for rec in records:
        if rec.task_group_id not in latest or rec.expires > latest[rec.task_group_id].expires:
            latest[rec.task_group_id] = rec
    return list(latest.values())


async def _outside_dependencies_tx(tx: Tx, records: list[TaskRecord]) -> dict[str, str]:
    """The states of the dependencies that are not among `records`; 400 for missing or expiring ones."""
    inside = {r.task_id for r in records}
    outside = sorted({d for r in records for d in r.definition["dependencies"] if d not in inside})
    found = {r["task_id"]: r for r in await tx.fetch("lock_required_tasks", outside)} if outside else {}
    for rec in records:
        deps = [d for d in rec.definition["dependencies"] if d not in inside]
        missing = [d for d in deps if d not in found]
        if missing:
            raise InputError(
                f"task {rec.task_id}: dependencies: task(s) {', '.join(missing[:10])} do not exist"
            )
        short = [d for d in deps if found[d]["expires"] < rec.deadline]
        if short:
            raise InputError(
                f"task {rec.task_id}: dependencies: task(s) {', '.join(short[:10])} "
                "expire before its deadline"
            )
    return {task_id: row["state"] for task_id, row in found.items()}


async def _repeat_create_tx(q: Queue, tx: Tx, rec: TaskRecord, definition: TaskDefinition) -> StatusAnswer:
    """createTask again: the same definition re-announces the task; any difference conflicts."""
    if rec.definition != definition:
        changed = sorted(k for k, v in definition.items() if v != rec.definition.get(k))
        raise RequestConflict(
            f"task {rec.task_id} already exists with a different definition "
            f"(differs in: {', '.join(changed)})"
        )
    messages = [task_message("task-defined", rec.status(), rec.definition)]
    if len(rec.runs) == 1 and rec.state == "pending":
        messages.append(runs.pending_message(rec))
    await service.publish_tx(q, tx, messages)
    return {"status": rec.status()}


async def _add_dependencies_tx(tx: Tx, rec: TaskRecord) -> bool:
    """Record the task's dependency edges; True if any is still open (the task waits)."""
    wanted = list(rec.definition["dependencies"])
    if not wanted:
        return False
    others = [d for d in wanted if d != rec.task_id]
    found = {r["task_id"]: r for r in await tx.fetch("lock_required_tasks", others)} if others else {}
    missing = [d for d in others if d not in found]
    if missing:
        raise InputError(f"dependencies: task(s) {', '.join(missing[:10])} do not exist")
    short = [d for d in others if found[d]["expires"] < rec.deadline]
    if short:
        raise InputError(f"dependencies: task(s) {', '.join(short[:10])} expire before this task's deadline")
    edges = []
    for dep in wanted:
        state = found[dep]["state"] if dep in found else "unscheduled"
        satisfied = state == "completed" or (
            rec.requires == "all-resolved" and state in ("failed", "exception")
        )
        edges.append((dep, rec.task_id, rec.requires, satisfied, rec.expires))
    await tx.defer_many("insert_dependency", edges)
    return not all(edge[3] for edge in edges)


async def task(q: Queue, task_id: str) -> TaskDefinition:
    return service.definition_of(await service.load(q, check_task_id(task_id)))


async def status(q: Queue, task_id: str) -> StatusAnswer:
    return {"status": (await service.load(q, check_task_id(task_id))).status()}


async def records(q: Queue, task_ids: list[str]) -> list[TaskRecord]:
    """The tasks that exist among `task_ids`; unknown ids are left out."""
    if len(task_ids) > MAX_BULK_IDS:
        raise InputError(f"taskIds may hold at most {MAX_BULK_IDS} ids")
    async with q.storage.reader() as session:
        rows = await session.fetch("get_tasks", list(dict.fromkeys(task_ids)))
    return [service.record_from_row(r) for r in rows]


def _open_before_deadline(q: Queue, rec: TaskRecord, action: str) -> None:
    if rec.deadline <= q.clock():
        raise RequestConflict(f"task {rec.task_id} is past its deadline; it cannot be {action}")


async def schedule_task(q: Queue, task_id: str, *, guard: Guard) -> StatusAnswer:
    """Give an unscheduled task its first run, whatever its dependencies say.

    `guard` sees the task's fields (`service.guard_task`) once it is loaded, so a missing task is
    a 404 before it can be a 403; the same goes for rerun, cancel and changeTaskPriority.
    """

    def step(rec: TaskRecord) -> Change:
        service.guard_task(guard, rec)
        _open_before_deadline(q, rec, "scheduled")
        return runs.schedule(rec, q.clock())

    return service.status_of(await service.transition(q, check_task_id(task_id), step))


async def rerun_task(q: Queue, task_id: str, *, guard: Guard) -> StatusAnswer:
    def step(rec: TaskRecord) -> Change:
        service.guard_task(guard, rec)
        _open_before_deadline(q, rec, "rerun")
        return runs.rerun(rec, q.clock())

    return service.status_of(await service.transition(q, check_task_id(task_id), step))


async def cancel_task(q: Queue, task_id: str, *, guard: Guard) -> StatusAnswer:
    def step(rec: TaskRecord) -> Change:
        service.guard_task(guard, rec)
        _open_before_deadline(q, rec, "canceled")
        return runs.cancel(rec, q.clock())

    return service.status_of(await service.transition(q, check_task_id(task_id), step))


def check_priority(value: object) -> Priority:
    for known in task_definition.PRIORITIES:
        if value == known:
            return known
    raise InputError(f"newPriority must be one of: {', '.join(task_definition.PRIORITIES)}")


def reprioritise(rec: TaskRecord, new_priority: Priority) -> Change:
    """The task with a new priority, and its task-priority-changed event."""
    new = runs._fork(rec)
    new.priority = new_priority
    new.version += 1
    extra = {"oldPriority": rec.priority, "newPriority": new_priority}
    message = task_message("task-priority-changed", new.status(), new.definition, extra=extra)
    message.body.pop("task", None)
    return Change(new, [message], priority_changed=True)


async def change_task_priority(q: Queue, task_id: str, new_priority: str, *, guard: Guard) -> StatusAnswer:
    checked = check_priority(new_priority)

    def step(rec: TaskRecord) -> Change:
        service.guard_task(guard, rec)
        _open_before_deadline(q, rec, "reprioritised")
        if rec.ever_resolved:
            raise RequestConflict(f"task {rec.task_id} is resolved; its priority can no longer change")
        if rec.priority == checked:
            raise RequestConflict(f"task {rec.task_id} already has priority {checked}")
        return reprioritise(rec, checked)

    return service.status_of(await service.transition(q, check_task_id(task_id), step))
