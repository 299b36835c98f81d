"""Looking into task queues and task relations: counts, pending and claimed lists, dependents."""

from __future__ import annotations

from typing import TypedDict

import orjson

from taskyard.model import dates, paging
from taskyard.model.task_definition import TaskDefinition
from taskyard.queue import groups, service, workers
from taskyard.queue.service import Queue
from taskyard.queue.tasks import check_task_id


class PendingCount(TypedDict):
    """pendingTasks's answer."""

    provisionerId: str
    workerType: str
    taskQueueId: str
    pendingTasks: int


class Counts(PendingCount):
    """taskQueueCounts's answer."""

    claimedTasks: int


class PendingTask(TypedDict):
    taskId: str
    runId: int
    task: TaskDefinition
    inserted: str


class PendingList(paging.Page):
    tasks: list[PendingTask]


class ClaimedTask(TypedDict):
    taskId: str
    runId: int
    workerGroup: str
    workerId: str
    claimed: str
    task: TaskDefinition


class ClaimedList(paging.Page):
    tasks: list[ClaimedTask]


class Dependents(paging.Page):
    taskId: str
    tasks: list[groups.TaskAndStatus]


async def counts(q: Queue, task_queue_id: str) -> Counts:
    workers.check_task_queue_id(task_queue_id)
    async with q.storage.reader() as session:
        pending = await session.fetchval("count_pending", task_queue_id)
        claimed = await session.fetchval("count_claimed", task_queue_id)
    provisioner_id, worker_type = workers.split(task_queue_id)
    return {
        "provisionerId": provisioner_id,
        "workerType": worker_type,
        "taskQueueId": task_queue_id,
        "pendingTasks": int(pending),
        "claimedTasks": int(claimed),
    }


async def pending_tasks(q: Queue, task_queue_id: str) -> PendingCount:
    body = await counts(q, task_queue_id)
    return {
        "provisionerId": body["provisionerId"],
        "workerType": body["workerType"],
        "taskQueueId": body["taskQueueId"],
        "pendingTasks": body["pendingTasks"],
    }


async def list_pending(q: Queue, task_queue_id: str, query: paging.Query) -> PendingList:
    """Pending runs in the order they were queued."""
    workers.check_task_queue_id(task_queue_id)
    inserted, task_id = paging.after(query, 2, [-1, ""])
    async with q.storage.reader() as session:
        rows = await session.fetch("list_pending", task_queue_id, inserted, task_id, query.limit + 1)
    tasks: list[PendingTask] = [
        {
            "taskId": r["task_id"],
            "runId": r["run_id"],
            "task": orjson.loads(r["definition"]),
            "inserted": dates.to_iso(r["inserted"]),
        }
        for r in rows
    ]
    last: list[object] | None = (
        [rows[query.limit - 1]["inserted"], rows[query.limit - 1]["task_id"]]
        if len(rows) > query.limit
        else None
    )
    return {"tasks": tasks[: query.limit], **paging.more(paging.keyset_token(tasks, last, query.limit))}


async def list_claimed(q: Queue, task_queue_id: str, query: paging.Query) -> ClaimedList:
    """Running runs in the order they were claimed."""
    workers.check_task_queue_id(task_queue_id)
    claimed_at, task_id = paging.after(query, 2, [-1, ""])
    async with q.storage.reader() as session:
        rows = await session.fetch("list_claimed", task_queue_id, claimed_at, task_id, query.limit + 1)
    tasks: list[ClaimedTask] = []
    for r in rows:
        run = orjson.loads(r["runs"])[-1]
        tasks.append(
            {
                "taskId": r["task_id"],
                "runId": run["runId"],
                "workerGroup": run["workerGroup"],
                "workerId": run["workerId"],
                "claimed": dates.to_iso(r["claimed_at"]),
                "task": orjson.loads(r["definition"]),
            }
        )
    last: list[object] | None = (
        [rows[query.limit - 1]["claimed_at"], rows[query.limit - 1]["task_id"]]
        if len(rows) > query.limit
        else None
    )
    return {"tasks": tasks[: query.limit], **paging.more(paging.keyset_token(tasks, last, query.limit))}


async def list_dependents(q: Queue, task_id: str, query: paging.Query) -> Dependents:
    """Tasks that list `task_id` among their dependencies, by taskId."""
    await service.load(q, check_task_id(task_id))
    (after,) = paging.after(query, 1, [""])  # keyset: a deep page costs what the first does
    async with q.storage.reader() as session:
        rows = await session.fetch("list_dependents", task_id, after, query.limit + 1)
    tasks = groups.tasks_and_statuses(rows)
    last: list[object] | None = [rows[query.limit - 1]["task_id"]] if len(rows) > query.limit else None
    return {
        "taskId": task_id,
        "tasks": tasks[: query.limit],
        **paging.more(paging.keyset_token(tasks, last, query.limit)),
    }
