"""Task definitions: the createTask body checked, completed with defaults and normalised.

The checks run in TaskCluster's order: the schema (InputValidationError), then the queue identity,
the dates and the scopes (InputError). The result is what gets stored and compared for
idempotency, so every date is written as `YYYY-MM-DDTHH:MM:SS.mmmZ` and every default is filled.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal, TypedDict, cast

from taskyard.model import dates, errors, schema
from taskyard.model.identifiers import IDENT, SLUGID, TASK_QUEUE_ID, WORKER_TYPE
from taskyard.model.types import JSONObject, LooseJSON, Millis

Priority = Literal["highest", "very-high", "high", "medium", "low", "very-low", "lowest"]
Requires = Literal["all-completed", "all-resolved"]
PRIORITIES: list[Priority] = ["highest", "very-high", "high", "medium", "low", "very-low", "lowest"]
REQUIRES: list[Requires] = ["all-completed", "all-resolved"]
MAX_DEPENDENCIES = 10000
CLOCK_SKEW = 15 * dates.MINUTE  # how far `created` may stray from now, and the grace on the deadline

_METADATA = schema.obj(
    {
        "name": schema.string(max_length=255),
        "description": schema.string(max_length=32768),
        "owner": schema.string(max_length=255),
        "source": schema.string(pattern=r"^(https?://|ssh://|git@)", max_length=4096),
    },
    required=["name", "description", "owner", "source"],
    additional=False,
)

REQUEST = schema.obj(
    {
        "provisionerId": schema.string(pattern=IDENT),
        "workerType": schema.string(pattern=WORKER_TYPE),
        "taskQueueId": schema.string(pattern=TASK_QUEUE_ID),
        "schedulerId": schema.string(pattern=r"^([a-zA-Z0-9-_]*)$", min_length=1, max_length=38),
        "projectId": schema.string(pattern=r"^([a-zA-Z0-9._/-]*)$", min_length=1, max_length=500),
        "taskGroupId": schema.string(pattern=SLUGID),
        "dependencies": schema.array(schema.string(pattern=SLUGID), max_items=MAX_DEPENDENCIES, unique=True),
        "requires": schema.enum(*REQUIRES),
        "routes": schema.array(schema.string(min_length=1, max_length=249), max_items=64, unique=True),
        "priority": schema.enum(*PRIORITIES),
        "retries": schema.integer(minimum=0, maximum=49),
        "created": schema.date_time(),
        "deadline": schema.date_time(),
        "expires": schema.date_time(),
        "scopes": schema.array(schema.string(pattern=r"^[\x20-\x7e]*$")),
        "payload": schema.any_object(),
        "metadata": _METADATA,
        "tags": schema.obj(additional=schema.string(max_length=4096)),
        "extra": schema.any_object(),
    },
    required=["created", "deadline", "payload", "metadata"],
    additional=False,
)

# The keys of a stored definition, in the order TaskCluster returns them.
KEYS = (
    "provisionerId",
    "workerType",
    "taskQueueId",
    "schedulerId",
    "projectId",
    "taskGroupId",
    "dependencies",
    "requires",
    "routes",
    "priority",
    "retries",
    "created",
    "deadline",
    "expires",
    "scopes",
    "payload",
    "metadata",
    "tags",
    "extra",
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class TaskMetadata(TypedDict):
    name: str
    description: str
    owner: str
    source: str


class TaskDefinition(TypedDict):
    """A task definition as stored and answered: every key of KEYS, defaults filled."""

    provisionerId: str
    workerType: str
    taskQueueId: str
    schedulerId: str
    projectId: str
    taskGroupId: str
    dependencies: list[str]
    requires: Requires
    routes: list[str]
    priority: Priority
    retries: int
    created: str
    deadline: str
    expires: str
    scopes: list[str]
    payload: JSONObject
    metadata: TaskMetadata
    tags: dict[str, str]
    extra: JSONObject


def priority_rank(name: str) -> int:
    """7 for `highest` down to 1 for `lowest`: bigger is claimed first."""
    if name not in PRIORITIES:
        raise errors.InputValidationError(f"priority must be one of: {', '.join(PRIORITIES)}")
    return len(PRIORITIES) - PRIORITIES.index(name)


def validate(task_id: str, body: object, *, now: Millis, max_deadline_days: int = 5) -> TaskDefinition:
    """Check a createTask body and return the full, normalised definition to store."""
    schema.validate(REQUEST, body)
    request = cast(LooseJSON, body)  # the schema has checked every field read below
    task_queue_id = _task_queue_id(request)
    full = cast(LooseJSON, with_defaults(task_id, request))
    created = schema.to_millis(full["created"])
    deadline = schema.to_millis(full["deadline"])
    # From the request, not `full`: the default is computed here without a round trip through text.
    expires = schema.to_millis(request["expires"]) if "expires" in request else _plus_one_year(deadline)
    _check_dates(created, deadline, expires, now=now, max_deadline_days=max_deadline_days)
    _check_scopes(full["scopes"])
    provisioner_id, worker_type = task_queue_id.split("/", 1)
    full.update(
        provisionerId=provisioner_id,
        workerType=worker_type,
        taskQueueId=task_queue_id,
        created=dates.to_iso(created),
        deadline=dates.to_iso(deadline),
        expires=dates.to_iso(expires),
        retries=int(full["retries"]),  # JSON Schema counts 5.0 as an integer; store 5
    )
    return cast(TaskDefinition, {key: full[key] for key in KEYS})


def with_defaults(task_id: str, body: object) -> object:
    """A copy of a dict body with the missing defaults filled, unvalidated (to echo in errors)."""
    if not isinstance(body, dict):
        return body
    filled = dict(body)
    for key, value in _defaults(task_id).items():
        filled.setdefault(key, value)
    if "expires" not in filled:
        expires = _default_expires(filled.get("deadline"))
        if expires is not None:
            filled["expires"] = expires
    return filled


def _defaults(task_id: str) -> JSONObject:
    return {
        "schedulerId": "-",
        "projectId": "none",
        "taskGroupId": task_id,
        "dependencies": [],
        "requires": "all-completed",
        "routes": [],
        "priority": "lowest",
        "retries": 5,
        "scopes": [],
        "tags": {},
        "extra": {},
    }


def _task_queue_id(request: LooseJSON) -> str:
    """The task queue, from `taskQueueId` or the deprecated `provisionerId` + `workerType`."""
    given: str | None = request.get("taskQueueId")
    provisioner_id: str | None = request.get("provisionerId")
    worker_type: str | None = request.get("workerType")
    if given is None:
        if provisioner_id is None or worker_type is None:
            raise errors.InputError(
                "the task needs a taskQueueId, or both provisionerId and workerType (deprecated)"
            )
        return f"{provisioner_id}/{worker_type}"
    split = dict(zip(("provisionerId", "workerType"), given.split("/", 1), strict=True))
    for name, part in (("provisionerId", provisioner_id), ("workerType", worker_type)):
        if part is not None and part != split[name]:
            raise errors.InputError(
                f"taskQueueId must equal provisionerId/workerType when both forms are given: "
                f"taskQueueId {given!r} has {name} {split[name]!r}, but {name} is {part!r}"
            )
    return given


def _default_expires(deadline: object) -> str | None:
    """`deadline` plus one calendar year, as JavaScript's setUTCFullYear does (29 Feb -> 1 Mar)."""
    if not isinstance(deadline, str):
        return None
    try:
        ms = schema.to_millis(deadline)
    except (ValueError, OverflowError):
        return None
    return dates.to_iso(_plus_one_year(ms))


def _plus_one_year(ms: Millis) -> Millis:
    """One calendar year later, but no later than the last date a client may send."""
    instant = _EPOCH + timedelta(milliseconds=ms)
    if instant.year >= 9998:  # a year later is past dates.LATEST
        return dates.LATEST
    try:
        later = instant.replace(year=instant.year + 1)
    except ValueError:  # 29 February
        later = instant.replace(year=instant.year + 1, month=3, day=1)
    return (later - _EPOCH) // timedelta(milliseconds=1)


def _check_dates(
    created: Millis, deadline: Millis, expires: Millis, *, now: Millis, max_deadline_days: int
) -> None:
    if abs(created - now) > CLOCK_SKEW:
        side = "in the future" if created > now else "in the past"
        raise errors.InputError(
            f"created must be within 15 minutes of the current time; it is {_span(abs(created - now))} {side}"
        )
    if deadline < created:
        raise errors.InputError(
            f"deadline must not be before created; it is {_span(created - deadline)} earlier"
        )
    if deadline < now:
        raise errors.InputError(f"deadline must not be in the past; it was {_span(now - deadline)} ago")
    if deadline > now + max_deadline_days * dates.DAY + CLOCK_SKEW:
        raise errors.InputError(
            f"deadline must be no more than {_count(max_deadline_days, 'day')} (plus 15 minutes) "
            f"after now; it is {_span(deadline - now)} away"
        )
    if expires < deadline:
        raise errors.InputError(
            f"expires must not be before deadline; it is {_span(deadline - expires)} earlier"
        )


def _check_scopes(scopes: list[str]) -> None:
    for index, scope in enumerate(scopes):
        if scope.endswith("**"):
            raise errors.InputError(
                f"scopes[{index}] must not end with '**' (a scope ending in '*' already "
                "covers everything after it)"
            )


_UNITS = (("day", dates.DAY), ("hour", dates.HOUR), ("minute", dates.MINUTE), ("second", dates.SECOND))


def _span(ms: Millis) -> str:
    """A duration in at most two units, like `6 days`, `5 days 16 minutes` or `20 minutes`."""
    if ms < dates.SECOND:
        return _count(ms, "millisecond")
    parts: list[str] = []
    for unit, size in _UNITS:
        if ms >= size and len(parts) < 2:
            parts.append(_count(ms // size, unit))
            ms %= size
    return " ".join(parts)


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"
