"""Firing a hook: its JSON-e template rendered, its task created as the hook's role, the fire
recorded.

The task is created with the scopes of the role `hook-id:<hookGroupId>/<hookId>` (and the
anonymous role), as TaskCluster's hooks service creates it with `authorizedScopes:
["assume:hook-id:<g>/<h>"]`: every scope createTask requires (the task's scopes, its routes, its
queue, project and scheduler) must be in that role's expansion, whatever the caller who
triggered it holds. A refusal is a fire that failed, recorded in lastFires.

The task and the fire's record are written in one transaction, so a fire is recorded exactly when
its task exists. A scheduled fire also moves the hook's schedule on in that transaction, and uses
the taskId chosen (and stored) before it: a scheduler that dies at any point leaves either the
whole fire done or nothing, and the next one fires with the same taskId and time. Times missed
while no scheduler ran collapse into one fire: the next time is computed from now.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Literal, TypedDict

import jsone
import jsonschema
import orjson

from taskyard.hooks import definitions, schedules
from taskyard.hooks.definitions import Stored
from taskyard.hooks.service import Hooks
from taskyard.model import dates, scopes, slugid
from taskyard.model.errors import InputError, InsufficientScopes, TaskyardError, Unavailable
from taskyard.model.task_definition import TaskDefinition
from taskyard.model.types import JSONObject, JSONValue, Millis
from taskyard.queue import tasks
from taskyard.storage.port import RowMoved, Tx, UniqueViolation

log = logging.getLogger(__name__)

FiredBy = Literal["schedule", "triggerHook", "triggerHookWithToken", "pulseMessage"]
DAY_MS = 86_400_000
MAX_ERROR = 131_072  # characters of a fire's stored error
DUE_BATCH = 1000
CHUNK = 100  # scheduled fires a transaction
CONCURRENT_CHUNKS = 4


class TriggerAnswer(TypedDict, total=False):
    taskId: str
    status: dict[str, str]


class Declined(Exception):
    """The template rendered to nothing: no task, no record."""


def role_of(group: str, hook: str) -> str:
    return f"assume:hook-id:{group}/{hook}"


def check_payload(stored: Stored, payload: JSONValue) -> None:
    """400 naming every way `payload` breaks the hook's triggerSchema."""
    schema = stored["definition"]["triggerSchema"]
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        problems = [_describe(e) for e in validator.iter_errors(payload)]
    except Exception as exc:  # a $ref that resolves nowhere, say: the payload can't be checked
        raise InputError(f"the payload cannot be checked against triggerSchema: {exc}") from None
    if problems:
        raise InputError("; ".join(problems))


def _describe(error: jsonschema.ValidationError) -> str:
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"payload{where} {error.message}"


def render(stored: Stored, context: JSONObject, task_id: str, now: Millis) -> JSONObject:
    """The hook's task for this fire, with TaskCluster's defaults; Declined if it rendered to
    nothing, InputError if it does not render (or not to an object)."""
    full = {**context, "now": dates.to_iso(now), "taskId": task_id}
    try:
        task = jsone.render(stored["definition"]["task"], full)
    except Exception as exc:  # JSON-e's errors, and anything a template makes it raise
        raise InputError(f"While firing hook:\n\n{type(exc).__name__}: {exc}") from None
    if not task:
        raise Declined()
    if not isinstance(task, dict):
        raise InputError(
            f"While firing hook:\n\nthe template rendered to {type(task).__name__}, not an object"
        )
    task.setdefault("created", dates.to_iso(now))
    task.setdefault("deadline", dates.to_iso(now + DAY_MS))
    task.setdefault("expires", dates.to_iso(now + 30 * DAY_MS))
    task.setdefault("taskGroupId", task_id)
    return task


async def check_role(h: Hooks, group: str, hook: str, definition: TaskDefinition) -> None:
    """403 unless the hook's role (with the anonymous role) holds every scope createTask needs."""
    held = await h.expand([role_of(group, hook), "assume:anonymous"])
    problems: list[str] = []

    def guard(**values: object) -> None:
        expression = scopes.render(tasks.CREATE_TASK_SCOPES, values)
        if expression is None or scopes.satisfies_expression(held, expression):
            return
        missing = scopes.remove_given_scopes(held, expression)
        problems.append(
            scopes.format_insufficient(f"hook-id:{group}/{hook}", missing or expression, expression)
        )

    tasks.guard_definition(guard, definition)
    if problems:
        raise InsufficientScopes(
            f"The role `hook-id:{group}/{hook}` does not have sufficient scopes to create the task:\n\n"
            + problems[0]
        )


async def fire(
    h: Hooks,
    stored: Stored,
    fired_by: FiredBy,
    context: JSONObject,
    *,
    task_id: str,
    now: Millis,
) -> TriggerAnswer:
    """Render and create the hook's task as its role; record the fire (success or error) in the
    same transaction as the task. Raises what the caller should answer for an error."""
    group, hook = stored["definition"]["hookGroupId"], stored["definition"]["hookId"]
    try:
        task = render(stored, context, task_id, now)
        definition = tasks.define(h.queue, task_id, task)
        await check_role(h, group, hook, definition)
        await _create_and_record(h, group, hook, fired_by, task_id, definition, now)
    except Declined:
        log.info("hook %s/%s declined to fire (%s)", group, hook, fired_by)
        return {}
    except Unavailable:
        raise  # nothing recorded: the database (or the queue) is down; the caller may retry
    except TaskyardError as exc:
        await _record(h, group, hook, fired_by, task_id, now, _error_text(exc))
        raise _answer_for(exc) from None
    log.info("hook %s/%s fired (%s): task %s", group, hook, fired_by, task_id)
    return {"taskId": task_id, "status": {"taskId": task_id}}


async def _create_and_record(
    h: Hooks,
    group: str,
    hook: str,
    fired_by: FiredBy,
    task_id: str,
    definition: TaskDefinition,
    now: Millis,
    schedule_step: tuple[str, Millis] | None = None,
) -> None:
    for attempt in range(3):
        try:
            async with h.storage.transaction() as tx:
                if schedule_step is not None:
                    row = await tx.fetchrow("lock_hook", group, hook)
                    if row is None or row["next_task_id"] != schedule_step[0]:
                        return  # fired meanwhile by another process, or changed by an update
                await tasks.create_task_tx(h.queue, tx, task_id, definition)
                await _record_tx(tx, group, hook, fired_by, task_id, now, "")
                if schedule_step is not None:
                    await tx.execute(
                        "advance_hook_schedule",
                        group,
                        hook,
                        schedule_step[0],
                        slugid.nice(),
                        schedule_step[1],
                    )
            return
        except (UniqueViolation, RowMoved):
            if attempt == 2:
                raise InputError(f"While calling createTask: task {task_id} could not be created") from None


def mail_owner(h: Hooks, stored: Stored, fired_by: str, error: str) -> None:
    """Tell the hook's owner that a fire no caller hears of (a schedule's, an event's) failed, if
    the hook asks for it (`metadata.emailOnError`, true by default)."""
    metadata = stored["definition"]["metadata"]
    if not metadata.get("emailOnError", True):
        return
    group, hook = stored["definition"]["hookGroupId"], stored["definition"]["hookId"]
    subject = f"Hook {group}/{hook} failed to create a task"
    content = (
        f"The hook `{group}/{hook}` fired ({fired_by}) and failed to create its task:\n\n"
        f"```\n{error[:4000]}\n```\n\nIts last fires are in `listLastFires`. This mail is sent "
        "because the hook's `metadata.emailOnError` is true."
    )
    h.mail(metadata["owner"], subject, content)


def _answer_for(exc: TaskyardError) -> TaskyardError:
    """What a trigger answers for a fire that failed, as TaskCluster words it: the role's refusal
    as a 403, a rendering error as it is, anything else the queue said as a 400 naming createTask."""
    if isinstance(exc, InsufficientScopes) or exc.message.startswith("While firing hook"):
        return exc
    return InputError(f"While calling createTask: {exc.code}\n\n{exc.message}")


def _error_text(exc: TaskyardError) -> str:
    if isinstance(exc, InputError) and exc.message.startswith("While firing hook"):
        return exc.message[:MAX_ERROR]
    body = {"name": exc.code, "message": exc.message, "code": exc.code, "statusCode": exc.status}
    return orjson.dumps(body).decode()[:MAX_ERROR]


async def _record(
    h: Hooks, group: str, hook: str, fired_by: str, task_id: str, now: Millis, error: str
) -> None:
    async with h.storage.transaction() as tx:
        await _record_tx(tx, group, hook, fired_by, task_id, now, error)


async def _record_tx(
    tx: Tx, group: str, hook: str, fired_by: str, task_id: str, now: Millis, error: str
) -> None:
    result = "error" if error else "success"
    await tx.execute(
        "insert_last_fire",
        hook_group_id=group,
        hook_id=hook,
        task_id=task_id,
        fired_by=fired_by,
        task_create_time=now,
        result=result,
        error=error,
    )


async def trigger(
    h: Hooks, group: str, hook: str, payload: JSONValue, *, client_id: str | None, token: str | None = None
) -> TriggerAnswer:
    """triggerHook (a caller's `client_id`) or triggerHookWithToken (its `token`)."""
    stored = await definitions.load(h, group, hook)
    if token is not None:
        definitions.check_token(h, stored, token)
    check_payload(stored, payload)
    task_id = payload.get("taskId") if isinstance(payload, dict) else None
    if task_id is None:
        task_id = slugid.nice()
    elif not slugid.is_valid(task_id):
        raise InputError("Invalid taskId format: payload.taskId must be a slugid")
    context: JSONObject = {
        "firedBy": "triggerHook" if token is None else "triggerHookWithToken",
        "payload": payload,
    }
    if token is None:
        context["clientId"] = client_id or "anonymous"
    fired_by: FiredBy = "triggerHook" if token is None else "triggerHookWithToken"
    return await fire(h, stored, fired_by, context, task_id=str(task_id), now=h.clock())


async def fire_message(h: Hooks, group: str, hook: str, payload: JSONValue) -> None:
    """A bound event's fire: the hook as it is now, the message's body its payload; a body the
    triggerSchema refuses is dropped, errors are only recorded."""
    try:
        stored = await definitions.load(h, group, hook)
    except TaskyardError:
        return  # removed meanwhile
    try:
        check_payload(stored, payload)
    except InputError as exc:
        log.debug("hook %s/%s: event dropped, its body breaks triggerSchema: %s", group, hook, exc.message)
        return
    context: JSONObject = {"firedBy": "pulseMessage", "payload": payload}
    try:
        await fire(h, stored, "pulseMessage", context, task_id=slugid.nice(), now=h.clock())
    except (InputError, InsufficientScopes) as exc:  # recorded in lastFires
        mail_owner(h, stored, "pulseMessage", exc.message)


async def fire_due(h: Hooks) -> int:
    """Fire every hook whose scheduled time has come; answer how many were handled (0: none due).

    Due hooks are fired `CHUNK` to a transaction, `CONCURRENT_CHUNKS` transactions at a time: one
    transaction a fire, a thousand hooks due at the same second took seconds on PostgreSQL. A
    chunk the queue refuses as a whole (one task's dependency missing, say) is fired again hook
    by hook, so that one bad hook fails alone."""
    now = h.clock()
    async with h.storage.reader() as session:
        rows = await session.fetch("due_hooks", now, DUE_BATCH)
    if not rows:
        return 0
    due = [definitions.stored_of(row) for row in rows]
    gate = asyncio.Semaphore(CONCURRENT_CHUNKS)

    async def one(chunk: list[Stored]) -> None:
        async with gate:
            await _fire_chunk(h, chunk)

    await asyncio.gather(*(one(due[i : i + CHUNK]) for i in range(0, len(due), CHUNK)))
    return len(rows) if len(rows) == DUE_BATCH else 0


class _Ready(TypedDict):
    group: str
    hook: str
    task_id: str
    due: Millis
    next_date: Millis
    definition: TaskDefinition


async def _fire_chunk(h: Hooks, chunk: list[Stored]) -> None:
    ready: list[_Ready] = []
    for stored in chunk:
        group, hook = stored["definition"]["hookGroupId"], stored["definition"]["hookId"]
        task_id, due = stored["next_task_id"], stored["next_scheduled_date"]
        step = (task_id, schedules.next_date(stored["definition"]["schedule"], h.clock()))
        try:
            task = render(stored, {"firedBy": "schedule"}, task_id, due)
            definition = tasks.define(h.queue, task_id, task)
            await check_role(h, group, hook, definition)
        except Declined:
            await _advance(h, group, hook, step, None)
            continue
        except Unavailable:
            raise
        except TaskyardError as exc:
            log.info("hook %s/%s: scheduled fire failed: %s", group, hook, exc.message)
            await _advance(h, group, hook, step, (task_id, due, _error_text(exc)))
            mail_owner(h, stored, "schedule", exc.message)
            continue
        ready.append(
            {
                "group": group,
                "hook": hook,
                "task_id": task_id,
                "due": due,
                "next_date": step[1],
                "definition": definition,
            }
        )
    if not ready:
        return
    try:
        async with h.storage.transaction() as tx:
            fresh = []
            for item in ready:
                row = await tx.fetchrow("lock_hook", item["group"], item["hook"])
                if row is not None and row["next_task_id"] == item["task_id"]:
                    fresh.append(item)  # else fired meanwhile, or changed by an update
            await tasks.create_tasks_tx(h.queue, tx, [(i["task_id"], i["definition"]) for i in fresh])
            for i in fresh:
                await tx.defer(
                    "insert_last_fire",
                    hook_group_id=i["group"],
                    hook_id=i["hook"],
                    task_id=i["task_id"],
                    fired_by="schedule",
                    task_create_time=i["due"],
                    result="success",
                    error="",
                )
            await tx.executemany(
                "advance_hook_schedule",
                [(i["group"], i["hook"], i["task_id"], slugid.nice(), i["next_date"]) for i in fresh],
            )
    except Unavailable:
        raise
    except (TaskyardError, UniqueViolation, RowMoved):
        for item in ready:
            await fire_scheduled(h, item["group"], item["hook"])
        return
    log.info("fired %d hook(s) on schedule", len(fresh))


async def fire_scheduled(h: Hooks, group: str, hook: str) -> int:
    """One scheduled fire of a due hook, with its stored taskId at its scheduled time."""
    try:
        stored = await definitions.load(h, group, hook)
    except TaskyardError:
        return 0
    due = stored["next_scheduled_date"]
    if due > h.clock():
        return 0  # another process fired it, or an update moved it
    task_id = stored["next_task_id"]
    next_date = schedules.next_date(stored["definition"]["schedule"], h.clock())
    step = (task_id, next_date)
    context: JSONObject = {"firedBy": "schedule"}
    try:
        task = render(stored, context, task_id, due)
        definition = tasks.define(h.queue, task_id, task)
        await check_role(h, group, hook, definition)
        await _create_and_record(h, group, hook, "schedule", task_id, definition, due, step)
        log.info("hook %s/%s fired on schedule: task %s", group, hook, task_id)
    except Declined:
        await _advance(h, group, hook, step, None)
    except Unavailable:
        raise  # the next round fires it again, with the same taskId and time
    except TaskyardError as exc:
        log.info("hook %s/%s: scheduled fire failed: %s", group, hook, exc.message)
        await _advance(h, group, hook, step, (task_id, due, _error_text(exc)))
    return 1


async def _advance(
    h: Hooks, group: str, hook: str, step: tuple[str, Millis], error: tuple[str, Millis, str] | None
) -> None:
    async with h.storage.transaction() as tx:
        moved = await tx.execute("advance_hook_schedule", group, hook, step[0], slugid.nice(), step[1])
        if moved and error is not None:
            await _record_tx(tx, group, hook, "schedule", *error)
