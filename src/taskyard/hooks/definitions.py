"""Creating, changing, reading and removing hooks; their trigger tokens, status and last fires.

A hook's definition is checked here beyond its schema (the route's): each schedule entry must be
a cron expression, `triggerSchema` a JSON schema, and no binding may name an exchange of the
denylist (the queue's task-created, which would let a hook multiply tasks, and the hooks' own).
Each change publishes its event (`hook-created`, `hook-updated`, `hook-deleted`) in its
transaction.
"""

from __future__ import annotations

import hmac
import logging
import re
from typing import NotRequired, TypedDict

import jsonschema
import orjson
from jsonschema.exceptions import SchemaError

from taskyard.hooks import schedules
from taskyard.hooks.service import Hooks
from taskyard.model import dates, paging, slugid
from taskyard.model.errors import AuthenticationFailed, InputError, RequestConflict, ResourceNotFound
from taskyard.model.messages import Message
from taskyard.model.types import JSONObject, JSONValue
from taskyard.queue import service as queue_service
from taskyard.secrets.crypto import Unreadable
from taskyard.storage.port import Row, Tx

log = logging.getLogger(__name__)

DEFAULT_TRIGGER_SCHEMA: JSONObject = {"type": "object", "additionalProperties": False}
# Exchanges no binding may name (anchored at the start), as TaskCluster's default configuration.
DENYLIST = (
    re.compile(r"exchange/taskcluster-queue/v1/task-created"),
    re.compile(r"exchange/taskcluster-hooks/.*"),
)
TOKEN_KEY = [2**62, ""]  # the first page of last fires starts after this (time, taskId) key


class Metadata(TypedDict):
    name: str
    description: str
    owner: str
    emailOnError: bool


class Binding(TypedDict):
    exchange: str
    routingKeyPattern: str


class HookDefinition(TypedDict):
    hookGroupId: str
    hookId: str
    metadata: Metadata
    schedule: list[str]
    task: JSONObject
    bindings: list[Binding]
    triggerSchema: JSONObject


class HookRequest(TypedDict):
    """What createHook and updateHook take, the route's schema checked."""

    hookGroupId: NotRequired[str]
    hookId: NotRequired[str]
    metadata: JSONObject
    schedule: NotRequired[list[str]]
    task: JSONObject
    bindings: NotRequired[list[Binding]]
    triggerSchema: NotRequired[JSONObject]


class Stored(TypedDict):
    """A hook's row: its definition and the hidden parts."""

    definition: HookDefinition
    trigger_token: str
    next_task_id: str
    next_scheduled_date: int


class LastFire(TypedDict):
    hookGroupId: str
    hookId: str
    firedBy: str
    taskId: str
    taskCreateTime: str
    result: str
    error: str
    taskState: str


class LastFires(paging.Page):
    lastFires: list[LastFire]


class HookList(TypedDict):
    hooks: list[HookDefinition]


class GroupList(TypedDict):
    groups: list[str]


class TokenAnswer(TypedDict):
    token: str


def stored_of(row: Row) -> Stored:
    metadata = orjson.loads(row["metadata"])
    definition: HookDefinition = {
        "hookGroupId": row["hook_group_id"],
        "hookId": row["hook_id"],
        "metadata": metadata,
        "schedule": orjson.loads(row["schedule"]),
        "task": orjson.loads(row["task"]),
        "bindings": orjson.loads(row["bindings"]),
        "triggerSchema": orjson.loads(row["trigger_schema"]),
    }
    return {
        "definition": definition,
        "trigger_token": row["trigger_token"],
        "next_task_id": row["next_task_id"],
        "next_scheduled_date": int(row["next_scheduled_date"]),
    }


def with_defaults(group: str, hook: str, body: HookRequest) -> JSONObject:
    """The request with its schema's defaults, and the ids of the URL (no `bindings` default: an
    absent one keeps a hook's bindings on update, and is stored as none on create)."""
    metadata: JSONObject = {**body["metadata"]}
    metadata.setdefault("emailOnError", True)
    full: JSONObject = {
        "hookGroupId": group,
        "hookId": hook,
        "metadata": metadata,
        "schedule": list(body.get("schedule", [])),
        "task": body["task"],
        "triggerSchema": body.get("triggerSchema", DEFAULT_TRIGGER_SCHEMA),
    }
    if "bindings" in body:
        full["bindings"] = [
            {"exchange": b["exchange"], "routingKeyPattern": b["routingKeyPattern"]} for b in body["bindings"]
        ]
    return full


def check_definition(group: str, hook: str, body: HookRequest) -> None:
    """The checks createHook and updateHook make beyond the schema, in TaskCluster's order: the
    ids, then (after authorization, which the edge did) the schedule, the triggerSchema, the
    bindings."""
    if body.get("hookGroupId", group) != group:
        raise InputError("Hook Group Ids do not match: hookGroupId in the body differs from the URL's")
    if body.get("hookId", hook) != hook:
        raise InputError("Hook Ids do not match: hookId in the body differs from the URL's")
    schedules.check(list(body.get("schedule", [])))
    check_trigger_schema(body.get("triggerSchema", DEFAULT_TRIGGER_SCHEMA))
    for index, binding in enumerate(body.get("bindings", [])):
        if any(rule.match(binding["exchange"]) for rule in DENYLIST):
            raise InputError(
                f"bindings[{index}].exchange: {binding['exchange']!r} is on the denylist "
                "(the queue's task-created exchange and the hooks exchanges cannot be bound)"
            )


def check_trigger_schema(value: JSONValue) -> None:
    try:
        jsonschema.validators.validator_for(value, default=jsonschema.Draft7Validator).check_schema(value)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        raise InputError(
            f"triggerSchema is not a valid JSON schema: {exc.message}" + (f" (at {where})" if where else "")
        ) from None
    except Exception as exc:  # an unreadable $schema or an odd value: still the caller's input
        raise InputError(f"triggerSchema is not a valid JSON schema: {exc}") from None


_COLUMNS = {
    "metadata": "metadata",
    "task": "task",
    "schedule": "schedule",
    "bindings": "bindings",
    "trigger_schema": "triggerSchema",
}


def _columns(definition: JSONObject) -> dict[str, str]:
    """The definition's stored columns, each as JSON text, by the queries' parameter names."""
    return {column: orjson.dumps(definition[key]).decode() for column, key in _COLUMNS.items()}


def _token_name(group: str, hook: str) -> str:
    return f"hook trigger token {group}/{hook}"


def seal_token(h: Hooks, group: str, hook: str, token: str) -> str:
    """A trigger token as stored: sealed under the deployment's key, the hook's name bound in."""
    key_id, sealed = h.sealer.seal(_token_name(group, hook), token.encode())
    return f"{key_id}:{sealed}"


def open_token(h: Hooks, stored: Stored) -> str:
    """The hook's trigger token; 503 if this server cannot open it (another secret key sealed it)."""
    definition = stored["definition"]
    key_id, _, sealed = stored["trigger_token"].partition(":")
    name = _token_name(definition["hookGroupId"], definition["hookId"])
    return h.sealer.open(name, key_id, sealed).decode()


def _message(exchange: str, group: str, hook: str) -> Message:
    return Message(exchange, "_", {"hookGroupId": group, "hookId": hook})


async def create_hook(
    h: Hooks, group: str, hook: str, body: HookRequest, *, client_id: str
) -> HookDefinition:
    """Store a new hook; the same definition again answers it (200), another is a 409. The answer
    is the request with its defaults and ids, as TaskCluster answers it: without `bindings` if the
    request had none, though the hook is stored (and read back) with `bindings: []`."""
    check_definition(group, hook, body)
    requested = with_defaults(group, hook, body)
    definition: JSONObject = {**requested, "bindings": requested.get("bindings", [])}
    now = h.clock()
    next_date = schedules.next_date(definition["schedule"], now)  # type: ignore[arg-type]
    async with h.storage.transaction() as tx:
        inserted = await tx.execute(
            "insert_hook",
            hook_group_id=group,
            hook_id=hook,
            **_columns(definition),
            trigger_token=seal_token(h, group, hook, slugid.nice()),
            next_task_id=slugid.nice(),
            next_scheduled_date=next_date,
            now=now,
        )
        if inserted:
            await queue_service.publish_tx(h.queue, tx, [_message("hook-created", group, hook)])
            tx.after_commit(h.hook_changed)
            existing = None
        else:
            existing = await _load_tx(tx, group, hook)
    if existing is None:
        log.info("hook %s/%s created by %s", group, hook, client_id)
    elif _comparable(existing["definition"]) != _comparable(requested):
        raise RequestConflict(f"hook `{group}/{hook}` already exists.")
    return _ordered(requested)


def _json(value: object) -> JSONValue:
    """A typed value as plain JSON (what it is, at run time)."""
    return value  # type: ignore[return-value]


def _comparable(value: object) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _ordered(definition: JSONObject) -> HookDefinition:
    keys = ("hookGroupId", "hookId", "metadata", "schedule", "task", "bindings", "triggerSchema")
    return {key: definition[key] for key in keys if key in definition}  # type: ignore[return-value]


async def update_hook(
    h: Hooks, group: str, hook: str, body: HookRequest, *, client_id: str
) -> HookDefinition:
    """Replace a hook's definition (404 if there is none); bindings not given are kept, and the
    next scheduled fire is chosen afresh (a new secret taskId)."""
    check_definition(group, hook, body)
    requested = with_defaults(group, hook, body)
    now = h.clock()
    async with h.storage.transaction() as tx:
        old = await _load_tx(tx, group, hook, lock=True)
        if old is None:
            raise ResourceNotFound(f"No such hook: {group}/{hook}")
        definition: JSONObject = {
            **requested,
            "bindings": requested.get("bindings", _json(old["definition"]["bindings"])),
        }
        next_date = schedules.next_date(definition["schedule"], now)  # type: ignore[arg-type]
        await tx.execute(
            "update_hook",
            hook_group_id=group,
            hook_id=hook,
            **_columns(definition),
            next_task_id=slugid.nice(),
            next_scheduled_date=next_date,
            now=now,
        )
        await queue_service.publish_tx(h.queue, tx, [_message("hook-updated", group, hook)])
        tx.after_commit(h.hook_changed)
    log.info("hook %s/%s updated by %s", group, hook, client_id)
    return _ordered(definition)


async def remove_hook(h: Hooks, group: str, hook: str, *, client_id: str) -> None:
    """Delete a hook and its last fires; removing one that isn't there succeeds too."""
    async with h.storage.transaction() as tx:
        removed = await tx.execute("delete_hook", group, hook)
        await tx.execute("delete_hook_fires", group, hook)
        if removed:
            await queue_service.publish_tx(h.queue, tx, [_message("hook-deleted", group, hook)])
            tx.after_commit(h.hook_changed)
    if removed:
        log.info("hook %s/%s deleted by %s", group, hook, client_id)


async def _load_tx(tx: Tx, group: str, hook: str, *, lock: bool = False) -> Stored | None:
    row = await tx.fetchrow("lock_hook" if lock else "get_hook", group, hook)
    return None if row is None else stored_of(row)


async def load(h: Hooks, group: str, hook: str) -> Stored:
    """A hook's row; 404 "No such hook" if there is none."""
    async with h.storage.reader() as session:
        row = await session.fetchrow("get_hook", group, hook)
    if row is None:
        raise ResourceNotFound(f"No such hook: {group}/{hook}")
    return stored_of(row)


async def get_hook(h: Hooks, group: str, hook: str) -> HookDefinition:
    return (await load(h, group, hook))["definition"]


async def list_groups(h: Hooks) -> GroupList:
    async with h.storage.reader() as session:
        rows = await session.fetch("list_hook_groups")
    return {"groups": [row["hook_group_id"] for row in rows]}


async def list_hooks(h: Hooks, group: str) -> HookList:
    async with h.storage.reader() as session:
        rows = await session.fetch("list_hooks_in_group", group)
    if not rows:
        raise ResourceNotFound(f"No such group: {group}")
    return {"hooks": [stored_of(row)["definition"] for row in rows]}


async def get_token(h: Hooks, group: str, hook: str) -> TokenAnswer:
    return {"token": open_token(h, await load(h, group, hook))}


async def reset_token(h: Hooks, group: str, hook: str) -> TokenAnswer:
    token = slugid.nice()
    async with h.storage.transaction() as tx:
        changed = await tx.execute("set_trigger_token", group, hook, seal_token(h, group, hook, token))
    if not changed:
        raise ResourceNotFound(f"No such hook: {group}/{hook}")
    return {"token": token}


def check_token(h: Hooks, stored: Stored, token: str) -> None:
    """401 unless `token` is the hook's trigger token (compared in constant time)."""
    if not hmac.compare_digest(open_token(h, stored).encode(), token.encode()):
        raise AuthenticationFailed("invalid hook token")


async def hook_status(h: Hooks, group: str, hook: str) -> JSONObject:
    """getHookStatus: the last fire (or `no-fire`), and the next scheduled date if scheduled."""
    stored = await load(h, group, hook)
    async with h.storage.reader() as session:
        row = await session.fetchrow("last_fire", group, hook)
    last: JSONObject
    if row is None:
        last = {"result": "no-fire"}
    elif row["result"] == "success":
        last = {"result": "success", "taskId": row["task_id"], "time": dates.to_iso(row["task_create_time"])}
    else:
        try:
            error = orjson.loads(row["error"])
        except orjson.JSONDecodeError:
            error = None
        if not isinstance(error, dict):
            error = {"message": row["error"]}
        last = {"result": "error", "error": error, "time": dates.to_iso(row["task_create_time"])}
    answer: JSONObject = {"lastFire": last}
    if stored["definition"]["schedule"]:
        answer["nextScheduledDate"] = dates.to_iso(stored["next_scheduled_date"])
    return answer


async def list_last_fires(h: Hooks, group: str, hook: str, query: paging.Query) -> LastFires:
    """A hook's fires, newest first, paged; 404 when it has none."""
    when, task_id = paging.after(query, 2, list(TOKEN_KEY))
    if type(when) is not int or not isinstance(task_id, str):
        raise InputError("continuationToken is not one this server handed out")
    async with h.storage.reader() as session:
        rows = await session.fetch("list_last_fires", group, hook, when, task_id, query.limit + 1)
    if not rows:
        raise ResourceNotFound(f"No such hook or never fired: {group}/{hook}")
    shown = rows[: query.limit]
    fires: list[LastFire] = [
        {
            "hookGroupId": row["hook_group_id"],
            "hookId": row["hook_id"],
            "firedBy": row["fired_by"],
            "taskId": row["task_id"],
            "taskCreateTime": dates.to_iso(row["task_create_time"]),
            "result": row["result"],
            "error": row["error"],
            "taskState": row["task_state"] if row["task_state"] not in (None, "unscheduled") else "unknown",
        }
        for row in shown
    ]
    last: list[object] | None = [int(shown[-1]["task_create_time"]), shown[-1]["task_id"]]
    return {"lastFires": fires, **paging.more(paging.keyset_token(rows, last, query.limit))}


async def sweep_last_fires(h: Hooks, *, batch: int = 1000) -> int:
    """Delete one batch of fires older than a year, as TaskCluster's expiry does."""
    async with h.storage.transaction() as tx:
        return int(await tx.execute("expire_last_fires", h.clock() - 365 * 86_400_000, batch))


async def reseal_tokens(h: Hooks, *, batch: int = 100) -> int:
    """Re-seal one batch of trigger tokens the old secret key sealed under the current one; how
    many were (0 without an old key). A token reset meanwhile is left as it is."""
    old = h.sealer.old
    if old is None:
        return 0
    resealed = 0
    async with h.storage.transaction() as tx:
        rows = await tx.fetch("hooks_sealed_with", old, batch)
        for row in rows:
            group, hook, stored = row["hook_group_id"], row["hook_id"], row["trigger_token"]
            try:
                token = h.sealer.open(_token_name(group, hook), old, stored.partition(":")[2]).decode()
            except Unreadable as exc:  # altered: left as it is, and said once per round
                log.warning("%s", exc.message)
                continue
            sealed = seal_token(h, group, hook, token)
            resealed += await tx.execute("reseal_trigger_token", group, hook, stored, sealed)
    if resealed:
        log.info("re-sealed %d hook trigger token(s) under the current secret key", resealed)
    return resealed


async def upkeep(h: Hooks) -> int:
    """One round of the hooks' background work: a batch of old fires expired, one of trigger
    tokens re-sealed."""
    return await sweep_last_fires(h) + await reseal_tokens(h)
