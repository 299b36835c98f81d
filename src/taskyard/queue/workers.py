"""Task queues, provisioners, worker types and workers: what the queue knows of who claims work."""

from __future__ import annotations

import re
from typing import NotRequired, TypedDict

import orjson

from taskyard.model import dates, identifiers, paging
from taskyard.model.errors import InputError, InvalidRequestArguments, ResourceNotFound
from taskyard.model.guard import Guard
from taskyard.queue import service
from taskyard.queue.service import Queue
from taskyard.storage.port import Row, Tx

IDENT = re.compile(identifiers.IDENT)
TASK_QUEUE_ID = re.compile(identifiers.TASK_QUEUE_ID)
RECENT_TASKS = 20
# Writes of lastDateActive for a task queue are throttled to one per this many ms per process.
TASK_QUEUE_WRITE_EVERY = 60 * dates.SECOND


class TaskQueue(TypedDict):
    taskQueueId: str
    stability: str
    description: str
    expires: str
    lastDateActive: str


class TaskQueueList(paging.Page):
    taskQueues: list[TaskQueue]


class Provisioner(TypedDict):
    provisionerId: str
    stability: str
    description: str
    expires: str
    lastDateActive: str


class ProvisionerList(paging.Page):
    provisioners: list[Provisioner]


class WorkerType(TaskQueue):
    provisionerId: str
    workerType: str


class WorkerTypeList(paging.Page):
    workerTypes: list[WorkerType]


class RecentTask(TypedDict):
    taskId: str
    runId: int


class Worker(TypedDict):
    """getWorker's answer, and quarantineWorker's and declareWorker's."""

    taskQueueId: str
    provisionerId: str
    workerType: str
    workerGroup: str
    workerId: str
    recentTasks: list[RecentTask]
    expires: str
    firstClaim: str
    quarantineUntil: str
    lastDateActive: NotRequired[str]


class WorkerSummary(TypedDict):
    """A worker as listWorkers lists it."""

    workerGroup: str
    workerId: str
    firstClaim: str
    lastDateActive: NotRequired[str]
    latestTask: NotRequired[RecentTask]
    quarantineUntil: NotRequired[str]


class WorkerList(paging.Page):
    workers: list[WorkerSummary]


class Quarantine(TypedDict):
    """quarantineWorker's body."""

    quarantineUntil: str
    quarantineInfo: NotRequired[str]


class Declaration(TypedDict, total=False):
    """declareWorker's body: the properties it declares."""

    expires: str


def check(name: str, value: str, pattern: re.Pattern[str]) -> str:
    if not pattern.fullmatch(value):
        raise InvalidRequestArguments(f"{name} {value[:80]!r} must match {pattern.pattern}")
    return value


def check_task_queue_id(value: str) -> str:
    return check("taskQueueId", value, TASK_QUEUE_ID)


def split(task_queue_id: str) -> tuple[str, str]:
    provisioner_id, worker_type = task_queue_id.split("/", 1)
    return provisioner_id, worker_type


WORKER_COLUMNS = ("first_claim", "expires", "quarantine_until", "quarantine_details", "recent_tasks")


def worker_of(row: Row) -> Row | None:
    """The worker's columns `seen_tx` reads, from a row that carries them as `worker_*`
    (take_pending's); None for a worker never seen."""
    if row["worker_first_claim"] is None:
        return None
    return {column: row[f"worker_{column}"] for column in WORKER_COLUMNS}


def is_quarantined(row: Row | None, now: int) -> bool:
    """Whether the worker whose row (None: it has none yet) this is is quarantined at `now`."""
    return row is not None and (row["quarantine_until"] or 0) > now


async def seen(q: Queue, task_queue_id: str, worker: tuple[str, str]) -> None:
    """Record that `worker` asked for work, at most once a minute per worker and process."""
    key = f"{task_queue_id}/{worker[0]}/{worker[1]}"
    now = q.clock()
    if now - q.seen_writes.get(key, 0) < TASK_QUEUE_WRITE_EVERY:
        return
    async with q.storage.transaction() as tx:
        row = await tx.fetchrow("get_worker", task_queue_id, *worker)
        await seen_tx(q, tx, task_queue_id, worker, [], row)
    q.seen_writes[key] = now


async def task_queue_seen(q: Queue, task_queue_id: str) -> None:
    """Record that a worker of the task queue asked for work without naming itself (pollTaskUrls)."""
    if q.clock() - q.seen_writes.get(task_queue_id, 0) < TASK_QUEUE_WRITE_EVERY:
        return
    async with q.storage.transaction() as tx:
        await task_queue_seen_tx(q, tx, task_queue_id, q.clock())


class Quarantined(Exception):
    """The worker is quarantined: it gets no work."""


async def seen_tx(
    q: Queue,
    tx: Tx,
    task_queue_id: str,
    worker: tuple[str, str],
    claimed: list[tuple[str, int]],
    row: Row | None,
) -> None:
    """Record that `worker` was active and claimed `claimed` (keeping its last 20 tasks).

    `row` is the worker's row as read in `tx` (None if it has none yet).
    """
    now = q.clock()
    await task_queue_seen_tx(q, tx, task_queue_id, now)
    recent = orjson.loads(row["recent_tasks"]) if row else []
    recent = (recent + [{"taskId": t, "runId": r} for t, r in claimed])[-RECENT_TASKS:]
    await tx.defer(
        "upsert_worker",
        task_queue_id=task_queue_id,
        worker_group=worker[0],
        worker_id=worker[1],
        first_claim=row["first_claim"] if row else now,
        last_date_active=now,
        expires=max(now + dates.DAY, row["expires"] if row else 0),
        quarantine_until=row["quarantine_until"] if row else None,
        quarantine_details=row["quarantine_details"] if row else "[]",
        recent_tasks=service.dumps(recent),
    )
    # `seen()` (claimWork's start, reclaims) need not write again within the minute.
    key = f"{task_queue_id}/{worker[0]}/{worker[1]}"
    tx.after_commit(lambda: q.seen_writes.__setitem__(key, now))


async def task_queue_seen_tx(q: Queue, tx: Tx, task_queue_id: str, now: int) -> None:
    last = q.seen_writes.get(task_queue_id, 0)
    if now - last >= TASK_QUEUE_WRITE_EVERY:
        await tx.defer("upsert_task_queue", task_queue_id, now + dates.DAY, now)
        # Once it is written: a transaction rolled back (and perhaps run again) must write it again.
        tx.after_commit(lambda: q.seen_writes.__setitem__(task_queue_id, now))


def task_queue_body(row: Row) -> TaskQueue:
    return {
        "taskQueueId": row["task_queue_id"],
        "stability": row["stability"],
        "description": row["description"],
        "expires": dates.to_iso(row["expires"]),
        "lastDateActive": dates.to_iso(row["last_date_active"]),
    }


def worker_body(row: Row) -> Worker:
    provisioner_id, worker_type = split(row["task_queue_id"])
    first_claim = row["first_claim"]
    # A worker never quarantined shows a quarantineUntil long past, as TaskCluster's do.
    quarantine_until = row["quarantine_until"]
    if quarantine_until is None:
        quarantine_until = first_claim - 10 * 365 * dates.DAY
    body: Worker = {
        "taskQueueId": row["task_queue_id"],
        "provisionerId": provisioner_id,
        "workerType": worker_type,
        "workerGroup": row["worker_group"],
        "workerId": row["worker_id"],
        "recentTasks": orjson.loads(row["recent_tasks"]),
        "expires": dates.to_iso(row["expires"]),
        "firstClaim": dates.to_iso(first_claim),
        "quarantineUntil": dates.to_iso(quarantine_until),
    }
    if row["last_date_active"] is not None:
        body["lastDateActive"] = dates.to_iso(row["last_date_active"])
    return body


async def get_task_queue(q: Queue, task_queue_id: str) -> TaskQueue:
    async with q.storage.reader() as session:
        row = await session.fetchrow("get_task_queue", check_task_queue_id(task_queue_id))
    if row is None or row["expires"] < q.clock():
        raise ResourceNotFound(f"task queue {task_queue_id} does not exist")
    return task_queue_body(row)


async def list_task_queues(q: Queue, query: paging.Query, prefix: str = "") -> list[Row]:
    (last,) = paging.after(query, 1, [""])
    async with q.storage.reader() as session:
        if prefix:
            return await session.fetch(
                "list_task_queues_with_prefix", q.clock(), last, query.limit + 1, prefix
            )
        return await session.fetch("list_task_queues", q.clock(), last, query.limit + 1)


def token_of(rows: list[Row], query: paging.Query, columns: tuple[str, ...]) -> paging.Page:
    """A keyset page's token, holding `columns` of the last row shown."""
    last: list[object] | None = (
        [rows[query.limit - 1][c] for c in columns] if len(rows) > query.limit else None
    )
    return paging.more(paging.keyset_token(rows, last, query.limit))


async def list_task_queues_page(q: Queue, query: paging.Query) -> TaskQueueList:
    rows = await list_task_queues(q, query)
    bodies = [task_queue_body(r) for r in rows[: query.limit]]
    return {"taskQueues": bodies, **token_of(rows, query, ("task_queue_id",))}


async def provisioners_page(q: Queue, query: paging.Query) -> ProvisionerList:
    """Provisioners are synthesised from task queues."""
    rows = await list_task_queues(q, paging.Query(paging.MAX_LIMIT * 10, None))
    seen: dict[str, Row] = {}
    for row in rows:
        seen.setdefault(split(row["task_queue_id"])[0], row)
    names = sorted(seen)
    start = paging.offset(query)
    bodies = [_provisioner_body(n, seen[n]) for n in names[start : start + query.limit + 1]]
    return {
        "provisioners": bodies[: query.limit],
        **paging.more(paging.offset_token(bodies, start, query.limit)),
    }


def _provisioner_body(provisioner_id: str, row: Row) -> Provisioner:
    body = task_queue_body(row)
    return {
        "provisionerId": provisioner_id,
        "stability": body["stability"],
        "description": body["description"],
        "expires": body["expires"],
        "lastDateActive": body["lastDateActive"],
    }


async def get_provisioner(q: Queue, provisioner_id: str) -> Provisioner:
    check("provisionerId", provisioner_id, IDENT)
    rows = await list_task_queues(q, paging.Query(1, None), prefix=provisioner_id + "/")
    if not rows:
        raise ResourceNotFound(f"provisioner {provisioner_id} does not exist")
    return _provisioner_body(provisioner_id, rows[0])


def worker_type_body(row: Row) -> WorkerType:
    provisioner_id, worker_type = split(row["task_queue_id"])
    return {**task_queue_body(row), "provisionerId": provisioner_id, "workerType": worker_type}


async def worker_types_page(q: Queue, provisioner_id: str, query: paging.Query) -> WorkerTypeList:
    check("provisionerId", provisioner_id, IDENT)
    rows = await list_task_queues(q, query, prefix=provisioner_id + "/")
    bodies = [worker_type_body(r) for r in rows[: query.limit]]
    return {"workerTypes": bodies, **token_of(rows, query, ("task_queue_id",))}


async def get_worker_type(q: Queue, provisioner_id: str, worker_type: str) -> WorkerType:
    check("provisionerId", provisioner_id, IDENT)
    check("workerType", worker_type, IDENT)
    async with q.storage.reader() as session:
        row = await session.fetchrow("get_task_queue", f"{provisioner_id}/{worker_type}")
    if row is None or row["expires"] < q.clock():
        raise ResourceNotFound(f"worker type {provisioner_id}/{worker_type} does not exist")
    return worker_type_body(row)


async def list_workers(
    q: Queue, task_queue_id: str, query: paging.Query, quarantined: str | None
) -> WorkerList:
    last = paging.after(query, 2, ["", ""])
    async with q.storage.reader() as session:
        rows = await session.fetch("list_workers", task_queue_id, q.clock(), *last, query.limit + 1)
    now = q.clock()
    if quarantined in ("true", "false"):
        want = quarantined == "true"
        rows = [r for r in rows if ((r["quarantine_until"] or 0) > now) == want]
    bodies = [_worker_summary(r, now) for r in rows[: query.limit]]
    return {"workers": bodies, **token_of(rows, query, ("worker_group", "worker_id"))}


def _worker_summary(row: Row, now: int) -> WorkerSummary:
    summary: WorkerSummary = {
        "workerGroup": row["worker_group"],
        "workerId": row["worker_id"],
        "firstClaim": dates.to_iso(row["first_claim"]),
    }
    if row["last_date_active"] is not None:
        summary["lastDateActive"] = dates.to_iso(row["last_date_active"])
    recent = orjson.loads(row["recent_tasks"])
    if recent:
        summary["latestTask"] = recent[-1]
    if (row["quarantine_until"] or 0) > now:
        summary["quarantineUntil"] = dates.to_iso(row["quarantine_until"])
    return summary


async def get_worker(q: Queue, task_queue_id: str, worker: tuple[str, str]) -> Worker:
    async with q.storage.reader() as session:
        row = await session.fetchrow("get_worker", task_queue_id, *worker)
        queue_row = await session.fetchrow("get_task_queue", task_queue_id)
    now = q.clock()
    if row is None or queue_row is None or (row["expires"] < now and (row["quarantine_until"] or 0) < now):
        raise ResourceNotFound(f"worker {worker[0]}/{worker[1]} of {task_queue_id} does not exist")
    return worker_body(row)


async def quarantine_worker(
    q: Queue, task_queue_id: str, worker: tuple[str, str], body: Quarantine, client_id: str
) -> Worker:
    until = dates.parse_iso(body["quarantineUntil"])
    now = q.clock()
    async with q.storage.transaction() as tx:
        row = await tx.fetchrow("get_worker", task_queue_id, *worker)
        if row is None:
            raise ResourceNotFound(f"worker {worker[0]}/{worker[1]} of {task_queue_id} does not exist")
        details = orjson.loads(row["quarantine_details"])
        details.append(
            {
                "clientId": client_id,
                "updatedAt": dates.to_iso(now),
                "quarantineUntil": dates.to_iso(until),
                "quarantineInfo": body.get("quarantineInfo", ""),
            }
        )
        await tx.execute(
            "upsert_worker",
            task_queue_id=task_queue_id,
            worker_group=worker[0],
            worker_id=worker[1],
            first_claim=row["first_claim"],
            last_date_active=row["last_date_active"],
            expires=max(row["expires"], now + dates.DAY),
            quarantine_until=until,
            quarantine_details=service.dumps(details),
            recent_tasks=row["recent_tasks"],
        )
    return await get_worker(q, task_queue_id, worker)


async def declare_worker(
    q: Queue, task_queue_id: str, worker: tuple[str, str], body: Declaration, *, guard: Guard
) -> Worker:
    """Declare the worker's properties (only `expires` today); `guard` sees the property names."""
    guard(properties=sorted(body))
    if not body:
        raise InputError("declareWorker needs at least one property to declare (expires)")
    expires = dates.parse_iso(body["expires"])
    now = q.clock()
    async with q.storage.transaction() as tx:
        await tx.execute("upsert_task_queue", task_queue_id, expires, now)
        row = await tx.fetchrow("get_worker", task_queue_id, *worker)
        await tx.execute(
            "upsert_worker",
            task_queue_id=task_queue_id,
            worker_group=worker[0],
            worker_id=worker[1],
            first_claim=row["first_claim"] if row else now,
            last_date_active=now,
            expires=expires,
            quarantine_until=row["quarantine_until"] if row else None,
            quarantine_details=row["quarantine_details"] if row else "[]",
            recent_tasks=row["recent_tasks"] if row else "[]",
        )
    return await get_worker(q, task_queue_id, worker)
