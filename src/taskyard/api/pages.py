"""The web UI's reads that no API route answers, as guarded operations of the call pipeline.

A page reads what an API route answers by calling that route through the pipeline
(`calls.call(..., calls.route("status"), ...)`). What no route answers (the dashboard's
aggregates, a group's table, a task's artifacts and log, a queue's workers) is an `Operation`
here, its scope template declared with it and taken from the API's route of the same read. They
run only through `calls.call()`, as the viewer; a handler that answers without its check having
run raises `calls.UncheckedScopes`, so a read that forgets its check shows nothing.

A list whose every item needs scopes of its own (the recent groups) is a `calls.listing`, which
keeps each item only if the caller holds that route's template for it; inside an operation
authorized as a whole, a part of an item the API shows only with scopes of its own (a queue's
counts, its workers) is blanked with `calls.may()` and the template of that route.
See docs/ui.md, "Who may read what".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict, cast

import orjson

from taskyard.api import authz, calls, log_tail, metrics
from taskyard.api.artifacts_v1 import GET_LOADS, GET_SCOPES
from taskyard.api.calls import Operation
from taskyard.api.routing import Call, ScopeExpression, run_id
from taskyard.model import dates, paging, scopes
from taskyard.model.errors import ResourceNotFound
from taskyard.model.messages import EXCHANGES
from taskyard.model.status import StatusAnswer
from taskyard.queue import artifacts, groups, service, tasks
from taskyard.queue.groups import TaskGroup
from taskyard.queue.service import Queue
from taskyard.secrets import store as secret_store
from taskyard.storage.port import Row, Session


def _scopes(name: str) -> ScopeExpression:
    """The scope template of the queue's route `name`: never written again here."""
    found = calls.route(name).scopes
    assert found is not None, name
    return found


# What the task page needs: the scopes of the API's `task` and `status`.
TASK_READ: ScopeExpression = {"AllOf": [_scopes("task"), _scopes("status")]}
LIST_GROUP = _scopes("listTaskGroup")
LIST_QUEUES = _scopes("listTaskQueues")
QUEUE_COUNTS = _scopes("taskQueueCounts")
LIST_WORKERS = _scopes("listWorkers")
# Said out loud, for the one read anybody may make: the recent groups, a listing (`calls.listing`)
# that keeps each only with its own listTaskGroup scopes; without them a viewer learns only how
# many were held back.
ANYONE: ScopeExpression = {"AllOf": []}

SHOWN_RELATIONS = 100  # dependencies listed with their state
SHOWN_ARTIFACTS = 500  # artifacts listed, over all runs, the latest run's first
RECENT_GROUPS = 20
TASKS_LOOKED_AT = 5_000
EVENTS_LOOKED_AT = 5_000
QUARANTINED_SHOWN = 200
MAX_WORKERS = 1_000  # workers listed on a page
MINUTE = 60 * dates.SECOND


def _q(call: Call) -> Queue:
    return call.services.queue


def _now(call: Call) -> int:
    return int(call.services.queue.clock())


# -------------------------------------------------------------------------------------------------
# A task.


async def _task_status(call: Call) -> StatusAnswer:
    return await tasks.status(_q(call), call.params["taskId"])


TASK_STATUS = Operation("taskPageStatus", TASK_READ, _task_status)
"""The task's status, to whoever may read the task page (its script polls it)."""


class Related(TypedDict):
    taskId: str
    name: str
    state: str  # "gone": a dependency that no longer exists


async def _task_dependencies(call: Call) -> list[Related]:
    q = _q(call)
    rec = await service.load(q, call.params["taskId"])
    ids = list(rec.definition.get("dependencies", []))[:SHOWN_RELATIONS]
    found: dict[str, Related] = {
        r.task_id: {
            "taskId": r.task_id,
            "name": r.definition["metadata"]["name"],
            "state": r.status()["state"],
        }
        for r in await tasks.records(q, ids)
    }
    return [found.get(i, {"taskId": i, "name": "", "state": "gone"}) for i in ids]


TASK_DEPENDENCIES = Operation("taskDependencies", TASK_READ, _task_dependencies)
"""The task's first SHOWN_RELATIONS dependencies, with their names and states."""


class ArtifactEntry(TypedDict):
    name: str
    runId: int
    storageType: str
    contentType: str
    expires: int
    public: bool  # an anonymous reader may get it
    details: dict[str, object]
    # An s3 artifact whose upload this server has not recorded yet (its bytes are sent later: the
    # worker uploads the backing log when the run ends), so getArtifact leads to nothing yet. With
    # an S3 blob store the upload goes to S3 and is never recorded here: it stays True.
    uploading: bool


class ArtifactList(TypedDict):
    artifacts: list[ArtifactEntry]
    more: bool


async def _task_artifacts(call: Call) -> ArtifactList:
    anonymous = tuple(await call.services.expand([authz.ANONYMOUS]))
    async with _q(call).storage.reader() as session:
        rows = await session.fetch("ui_task_artifacts", call.params["taskId"], SHOWN_ARTIFACTS + 1)
    found: list[ArtifactEntry] = [
        {
            "name": row["name"],
            "runId": row["run_id"],
            "storageType": row["storage_type"],
            "contentType": row["content_type"],
            "expires": row["expires"],
            "public": scopes.satisfies(anonymous, f"queue:get-artifact:{row['name']}"),
            "details": orjson.loads(row["details"]) if row["storage_type"] == "error" else {},
            "uploading": row["storage_type"] == "s3" and bool(row["uploading"]),
        }
        for row in rows[:SHOWN_ARTIFACTS]
        if row["present"]  # an upload not done yet: the API does not answer it either
    ]
    return {"artifacts": found, "more": len(rows) > SHOWN_ARTIFACTS}


TASK_ARTIFACTS = Operation("taskArtifacts", TASK_READ, _task_artifacts)
"""The task's artifacts (at most SHOWN_ARTIFACTS, the latest run's first) and whether there are more."""


@dataclass(frozen=True)
class LogTail:
    """The end of a run's log (`bytes`, and `total` bytes in all), or why it can't be read here."""

    data: bytes = b""
    total: int = 0
    note: str = ""
    stream: str = ""  # the live stream's signed URL (a path of this server), when read from it
    first_line: int | None = 1  # the number of the line `data` starts with (None: unknown)


async def _task_log(call: Call) -> LogTail:
    q = _q(call)
    found = await artifacts.follow(
        q, call.params["taskId"], run_id(call), call.params["name"], guard=call.authorize
    )
    tail = await log_tail.tail_of(q, found)
    if isinstance(tail, str):
        return LogTail(note=tail)
    data = tail.data()
    return LogTail(data, tail.total, "", log_tail.stream_path(q, found), tail.first_line(data))


TASK_LOG = Operation("taskLog", GET_SCOPES, _task_log, loads=GET_LOADS)
"""A run's log (`name`), followed through its links as getArtifact follows them, with getArtifact's
scopes on every name of the chain (the queue's `artifacts.follow` calls the guard); its last bytes."""


# -------------------------------------------------------------------------------------------------
# A task group.


class GroupTask(TypedDict, total=False):
    """A task of a group as its pages show it: the table's columns, or the graph's (id, state, name
    and dependencies as JSON text)."""

    task_id: str
    state: str
    name: str | None
    dependencies: str | None
    runs: int | None
    started: str | None
    resolved: str | None
    worker_group: str | None
    worker_id: str | None
    reason: str | None  # the last run's reasonResolved


@dataclass(frozen=True)
class GroupRows:
    group: TaskGroup
    rows: list[GroupTask]


def _group_rows(query: str) -> Operation[GroupRows]:
    async def read(call: Call) -> GroupRows:
        task_group_id = groups.check_group_id(call.params["taskGroupId"])
        async with _q(call).storage.reader() as session:
            row = await session.fetchrow("get_group", task_group_id)
            if row is None:
                raise ResourceNotFound(f"task group {task_group_id} does not exist")
            rows = await session.fetch(query, task_group_id)
        return GroupRows(groups.group_body(row), [cast(GroupTask, dict(r)) for r in rows])

    return Operation(query.removeprefix("ui_"), LIST_GROUP, read)


# The group and its tasks' rows, two queries whatever its size: what the table shows of each task
# (`ui_group_tasks`: the name, the number of runs, the last run's start, end, worker and
# reasonResolved), or what
# the graph draws (`ui_group_graph`: id, state, name and dependencies).
GROUP_TABLE = _group_rows("ui_group_tasks")
GROUP_GRAPH = _group_rows("ui_group_graph")


async def _group_counts(call: Call) -> dict[str, int]:
    async with _q(call).storage.reader() as session:
        rows = await session.fetch("ui_group_counts", call.params["taskGroupId"])
    return {str(r["state"]): int(r["n"]) for r in rows}


GROUP_COUNTS = Operation("groupCounts", LIST_GROUP, _group_counts)
"""How many of the group's tasks are in each state (the states that have some)."""


# -------------------------------------------------------------------------------------------------
# Task queues and workers: the dashboard, /workers, /queues/<taskQueueId>.


@dataclass
class QueueLine:
    """One task queue as the dashboard shows it."""

    task_queue_id: str
    pending: int = 0
    claimed: int = 0
    oldest_age: int | None = None  # ms since the oldest pending run was queued (None: none pending)
    claims: int = 0  # claims in the last minute
    workers: int = 0
    quarantined: list[tuple[str, str, int]] = field(default_factory=list)  # group, id, until
    counts_need: str = ""  # the scopes the viewer lacks to see the counts (`readable`), or ""
    workers_need: str = ""  # the scopes the viewer lacks to see the workers, or ""


@dataclass
class Recent:
    """What the newest events say: claims per queue in the last minute, groups changed lately."""

    claims: Counter[str] = field(default_factory=Counter)
    capped: bool = False  # more events came in the last minute than were read
    groups: dict[str, int] = field(default_factory=dict)  # taskGroupId: when last changed


def recent_events(rows: list[Row], now: int) -> Recent:
    """Claims per task queue in the minute before `now`, and the groups the events changed."""
    recent = Recent()
    for row in rows:
        parts = str(row["routing_key"]).split(".")
        exchange, published = row["exchange"], int(row["published"])
        if exchange not in EXCHANGES:
            continue  # the scheduler's, whose keys name no task group
        if not exchange.startswith("task-group-") and len(parts) >= 10:
            recent.groups.setdefault(parts[8], published)
            if exchange == "task-running" and published > now - MINUTE:
                recent.claims[f"{parts[5]}/{parts[6]}"] += 1
        elif exchange.startswith("task-group-") and len(parts) >= 2:
            recent.groups.setdefault(parts[1], published)
    recent.capped = len(rows) >= EVENTS_LOOKED_AT and int(rows[-1]["published"]) > now - MINUTE
    return recent


def queue_params(task_queue_id: str) -> dict[str, str]:
    """A queue's id and its halves, as the API's routes name them."""
    provisioner_id, _, worker_type = task_queue_id.partition("/")
    return {"taskQueueId": task_queue_id, "provisionerId": provisioner_id, "workerType": worker_type}


async def _queue_lines(q: Queue, session: Session, now: int) -> dict[str, QueueLine]:
    """Every task queue known (seen by workers, holding tasks, with workers): counts and workers."""
    snap = await metrics.read_snapshot(q, 0.0)
    lines: dict[str, QueueLine] = {}

    def line(task_queue_id: str) -> QueueLine:
        return lines.setdefault(task_queue_id, QueueLine(task_queue_id))

    for row in await session.fetch("list_task_queues", now, "", metrics.MAX_QUEUES):
        line(row["task_queue_id"])
    for task_queue_id, count, since in snap.pending:
        line(task_queue_id).pending = count
        line(task_queue_id).oldest_age = max(0, snap.now_ms - since)
    for task_queue_id, count in snap.claimed:
        line(task_queue_id).claimed = count
    for row in await session.fetch("ui_dashboard_workers", now, metrics.MAX_QUEUES):
        line(row["task_queue_id"]).workers = int(row["workers"])
    for row in await session.fetch("ui_dashboard_quarantined", now, QUARANTINED_SHOWN):
        until = int(row["quarantine_until"])
        line(row["task_queue_id"]).quarantined.append((row["worker_group"], row["worker_id"], until))
    return lines


def _readable(call: Call, line: QueueLine) -> QueueLine:
    """`line` with what the caller may not read through the API blanked, and the scopes that would
    let it: the counts (pending, running, the oldest pending run's age, the last minute's claims)
    need taskQueueCounts' scopes for the queue, its workers listWorkers'."""
    params = queue_params(line.task_queue_id)
    if not calls.may(call, QUEUE_COUNTS, **params):
        line.pending = line.claimed = line.claims = 0
        line.oldest_age = None
        line.counts_need = calls.needs(QUEUE_COUNTS, params)
    if not calls.may(call, LIST_WORKERS, **params):
        line.workers, line.quarantined = 0, []
        line.workers_need = calls.needs(LIST_WORKERS, params)
    return line


@dataclass(frozen=True)
class QueueLines:
    queues: list[QueueLine]  # by taskQueueId
    claims_capped: bool  # more claims came in the last minute than the events read show


async def _dashboard_queues(call: Call) -> QueueLines:
    now = _now(call)
    async with _q(call).storage.reader() as session:
        lines = await _queue_lines(_q(call), session, now)
        recent = recent_events(await session.fetch("ui_dashboard_recent_events", EVENTS_LOOKED_AT), now)
    for task_queue_id, count in recent.claims.items():
        lines.setdefault(task_queue_id, QueueLine(task_queue_id)).claims = count
    return QueueLines([_readable(call, lines[k]) for k in sorted(lines)], recent.capped)


DASHBOARD_QUEUES = Operation("dashboardQueues", LIST_QUEUES, _dashboard_queues)
"""Every task queue known, with listTaskQueues' scopes; each queue's counts (and claims in the last
minute) with its taskQueueCounts', its workers with its listWorkers'."""


@dataclass
class GroupLine:
    """One task group: when it last changed, and how many of its tasks are in each state."""

    task_group_id: str
    changed: int
    states: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.states.values())


async def _recent_groups(call: Call) -> list[tuple[Mapping[str, object], GroupLine]]:
    now = _now(call)
    async with _q(call).storage.reader() as session:
        recent = recent_events(await session.fetch("ui_dashboard_recent_events", EVENTS_LOOKED_AT), now)
        latest = dict(recent.groups)
        for row in await session.fetch("ui_dashboard_recent_groups", TASKS_LOOKED_AT, RECENT_GROUPS):
            latest[row["task_group_id"]] = max(int(row["latest"]), latest.get(row["task_group_id"], 0))
        chosen = sorted(latest, key=lambda g: (-latest[g], g))[:RECENT_GROUPS]
        states: dict[str, dict[str, int]] = {g: {} for g in chosen}
        for row in await session.fetch("ui_dashboard_group_states", chosen):
            states[row["task_group_id"]][row["state"]] = int(row["tasks"])
    # A group whose tasks all expired has no counts left: it is not shown.
    return [({"taskGroupId": g}, GroupLine(g, latest[g], states[g])) for g in chosen if states[g]]


RECENT_GROUPS_READ = calls.listing("recentGroups", ANYONE, LIST_GROUP, _recent_groups)
"""The RECENT_GROUPS groups created or changed last (by the newest tasks and events), with their
tasks' counts by state; each kept only if the caller may list it (listTaskGroup's scopes)."""


@dataclass
class WorkerLine:
    """One worker as the pages show it."""

    task_queue_id: str
    worker_group: str
    worker_id: str
    first_claim: int
    last_active: int | None
    quarantine_until: int | None  # set while quarantined
    latest_task: dict[str, object] | None
    running: list[tuple[str, int]] = field(default_factory=list)  # taskId, runId

    @property
    def provisioner_id(self) -> str:
        return self.task_queue_id.partition("/")[0]

    @property
    def worker_type(self) -> str:
        return self.task_queue_id.partition("/")[2]

    @property
    def quarantined(self) -> bool:
        return self.quarantine_until is not None

    @property
    def anchor(self) -> str:
        return f"worker-{self.worker_group}-{self.worker_id}"


def worker_line(row: Row, now: int) -> WorkerLine:
    recent = orjson.loads(row["recent_tasks"])
    until = row["quarantine_until"]
    return WorkerLine(
        task_queue_id=row["task_queue_id"],
        worker_group=row["worker_group"],
        worker_id=row["worker_id"],
        first_claim=int(row["first_claim"]),
        last_active=None if row["last_date_active"] is None else int(row["last_date_active"]),
        quarantine_until=int(until) if until is not None and until > now else None,
        latest_task=recent[-1] if recent else None,
    )


@dataclass(frozen=True)
class Workers:
    queues: list[QueueLine]  # by taskQueueId, blanked as on the dashboard
    workers: dict[str, list[WorkerLine]]  # by taskQueueId: those of the queues the caller may list workers of
    capped: bool  # more than MAX_WORKERS workers


async def _workers(call: Call) -> Workers:
    now = _now(call)
    async with _q(call).storage.reader() as session:
        lines = await _queue_lines(_q(call), session, now)
        rows = await session.fetch("ui_workers_all", now, MAX_WORKERS + 1)
    by_queue: dict[str, list[WorkerLine]] = {}
    for row in rows[:MAX_WORKERS]:
        by_queue.setdefault(row["task_queue_id"], []).append(worker_line(row, now))
        lines.setdefault(row["task_queue_id"], QueueLine(row["task_queue_id"]))
    queues = [_readable(call, lines[k]) for k in sorted(lines)]
    hidden = {line.task_queue_id for line in queues if line.workers_need}
    return Workers(queues, {k: v for k, v in by_queue.items() if k not in hidden}, len(rows) > MAX_WORKERS)


WORKERS = Operation("workers", LIST_QUEUES, _workers)
"""Every task queue (as the dashboard lists them) with its workers (the first MAX_WORKERS), with
listTaskQueues' scopes; each queue's counts and workers with their own, as on the dashboard."""


@dataclass(frozen=True)
class QueueWorkers:
    workers: list[WorkerLine]
    capped: bool


async def _queue_workers(call: Call) -> QueueWorkers:
    now = _now(call)
    async with _q(call).storage.reader() as session:
        rows = await session.fetch("list_workers", call.params["taskQueueId"], now, "", "", MAX_WORKERS + 1)
    return QueueWorkers([worker_line(row, now) for row in rows[:MAX_WORKERS]], len(rows) > MAX_WORKERS)


QUEUE_WORKERS = Operation("queueWorkers", LIST_WORKERS, _queue_workers)
"""A task queue's workers (the first MAX_WORKERS) with their latest task, with listWorkers' scopes
(params: `taskQueueId`, `provisionerId`, `workerType`: `queue_params`)."""


# ---------------------------------------------------------------------------------------------------
# Secrets: names and expiry, never a value (a value is the secrets service's own `get`, one click on).


def _secrets_scopes(name: str) -> ScopeExpression:
    """The scope template of the secrets service's route `name`."""
    found = calls.route(name, "secrets").scopes
    assert found is not None, name
    return found


LIST_SECRETS = _secrets_scopes("list")
GET_SECRET = _secrets_scopes("get")
SECRETS_SHOWN = 200  # secrets a page lists


@dataclass(frozen=True)
class SecretLine:
    name: str
    expires: str
    readable: bool  # the viewer holds `get`'s scope for it: its value is a click away


@dataclass(frozen=True)
class SecretsPage:
    secrets: list[SecretLine]
    next_token: str | None  # the next page's continuationToken


async def _secrets(call: Call) -> SecretsPage:
    query = paging.parse(call.query, max_limit=SECRETS_SHOWN)
    (after,) = paging.after(query, 1, [""])
    found = await secret_store.list_secrets(call.services.secrets, after=str(after), limit=query.limit)
    shown = found[: query.limit]
    lines = [SecretLine(e["name"], e["expires"], calls.may(call, GET_SECRET, name=e["name"])) for e in shown]
    last: list[object] | None = [shown[-1]["name"]] if shown else None
    return SecretsPage(lines, paging.keyset_token(found, last, query.limit))


SECRETS = Operation("secrets", LIST_SECRETS, _secrets)
"""A page of secrets (SECRETS_SHOWN, by name) with their expiry, with the secrets service's
`list` scope; each says whether the viewer may read its value (`get`'s scope for its name)."""
