"""`GET /workers`: every task queue with its workers; `GET /queues/{taskQueueId}`: one queue.

Workers are the queue's worker records (`queue/workers.py`): a worker is recorded when it claims
(or declares itself), with its first claim, when it was last active, its latest tasks and any
quarantine. A queue's page adds its pending and claimed counts, what each worker runs now (the
queue's running tasks, by the worker their run names) and its first pending tasks.

Each page needs the scopes of the API's reads of the same things: `/workers` those of
`listTaskQueues` (a queue's workers are listed with `listWorkers`' for it), a queue's page those of
`getTaskQueue`, `taskQueueCounts` and `listWorkers` (its pending tasks are listed with
`listPendingTasks`', what its workers run with `listClaimedTasks`').
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from taskyard.model import paging
from taskyard.model.errors import ResourceNotFound
from taskyard.queue import inspect
from taskyard.queue import workers as queue_workers
from taskyard.storage.port import Row
from taskyard.ui import access, dashboard
from taskyard.ui.render import UI, view

MAX_WORKERS = 1_000  # workers listed on a page
PENDING_SHOWN = 20
RUNNING_LOOKED_AT = paging.MAX_LIMIT  # a queue's running tasks read to say what each worker runs


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


async def workers_page(ui: UI, request: Request) -> Response:
    """Every task queue (as the dashboard lists them) with its workers."""
    await access.require(ui, request, "listTaskQueues", {})
    who = await access.viewer(ui, request)
    now = ui.now()
    async with ui.services.queue.storage.reader() as session:
        lines = await dashboard.queue_lines(ui, session, now)
        rows = await session.fetch("ui_workers_all", now, MAX_WORKERS + 1)
    by_queue: dict[str, list[WorkerLine]] = defaultdict(list)
    for row in rows[:MAX_WORKERS]:
        by_queue[row["task_queue_id"]].append(worker_line(row, now))
        lines.setdefault(row["task_queue_id"], dashboard.QueueLine(row["task_queue_id"]))
    queues = [dashboard.readable(lines[k], who) for k in sorted(lines)]
    hidden = {q.task_queue_id for q in queues if q.workers_need}
    return await ui.page(
        request,
        "workers.html",
        queues=queues,
        workers={k: v for k, v in by_queue.items() if k not in hidden},
        capped=len(rows) > MAX_WORKERS,
        max_workers=MAX_WORKERS,
    )


async def queue_page(ui: UI, request: Request) -> Response:
    """One task queue: counts, workers with what they run, its first pending tasks."""
    task_queue_id = queue_workers.check_task_queue_id(request.path_params["taskQueueId"])
    q, now = ui.services.queue, ui.now()
    params = dashboard.queue_params(task_queue_id)
    for name in ("getTaskQueue", "taskQueueCounts", "listWorkers"):
        await access.require(ui, request, name, params)
    counts = await inspect.counts(q, task_queue_id)
    try:
        known = await queue_workers.get_task_queue(q, task_queue_id)
    except ResourceNotFound:
        known = None
    pending_shown = await access.allowed(ui, request, "listPendingTasks", params)
    pending = (
        await inspect.list_pending(q, task_queue_id, paging.Query(PENDING_SHOWN)) if pending_shown else None
    )
    claimed = []
    if await access.allowed(ui, request, "listClaimedTasks", params):
        claimed = (await inspect.list_claimed(q, task_queue_id, paging.Query(RUNNING_LOOKED_AT)))["tasks"]
    async with q.storage.reader() as session:
        rows = await session.fetch("list_workers", task_queue_id, now, "", "", MAX_WORKERS + 1)
    lines = [worker_line(row, now) for row in rows[:MAX_WORKERS]]
    running: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    for task in claimed:
        running[(task["workerGroup"], task["workerId"])].append((task["taskId"], task["runId"]))
    for line in lines:
        line.running = running.get((line.worker_group, line.worker_id), [])
    return await ui.page(
        request,
        "queue.html",
        task_queue_id=task_queue_id,
        known=known,
        counts=counts,
        pending_shown=pending is not None,
        pending_need=access.needs("listPendingTasks", params),
        pending=pending["tasks"] if pending is not None else [],
        more_pending=pending is not None and counts["pendingTasks"] > len(pending["tasks"]),
        workers=lines,
        capped=len(rows) > MAX_WORKERS,
        max_workers=MAX_WORKERS,
    )


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/workers", view(workers_page)(ui), methods=["GET"]),
        Route("/queues/{taskQueueId:path}", view(queue_page)(ui), methods=["GET"]),
    ]
