"""`GET /workers`: every task queue with its workers; `GET /queues/{taskQueueId}`: one queue.

Workers are the queue's worker records (`queue/workers.py`): a worker is recorded when it claims
(or declares itself), with its first claim, when it was last active, its latest tasks and any
quarantine. A queue's page adds its pending and claimed counts, what each worker runs now (the
queue's running tasks, by the worker their run names) and its first pending tasks.

Each page reads through the API's call pipeline as the viewer (`ui/access.py`), so it needs the
scopes of the API's reads of the same things: `/workers` is `api.pages.WORKERS`, with
`listTaskQueues`' scopes (a queue's workers are listed with `listWorkers`' for it); a queue's page
calls `getTaskQueue` and `taskQueueCounts`, and reads its workers with `api.pages.QUEUE_WORKERS`
(`listWorkers`' scopes); its pending tasks are `listPendingTasks`' answer, what its workers run
`listClaimedTasks`'.
"""

from __future__ import annotations

from collections import defaultdict
from typing import cast

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from taskyard.api import calls, pages
from taskyard.model import paging
from taskyard.model.errors import ResourceNotFound
from taskyard.queue import inspect
from taskyard.queue import workers as queue_workers
from taskyard.ui import access
from taskyard.ui.render import UI, view

MAX_WORKERS = pages.MAX_WORKERS  # workers listed on a page
PENDING_SHOWN = 20
RUNNING_LOOKED_AT = paging.MAX_LIMIT  # a queue's running tasks read to say what each worker runs


async def workers_page(ui: UI, request: Request) -> Response:
    """Every task queue (as the dashboard lists them) with its workers."""
    found = await access.read(ui, request, pages.WORKERS, {})
    return await ui.page(
        request,
        "workers.html",
        queues=found.queues,
        workers=found.workers,
        capped=found.capped,
        max_workers=MAX_WORKERS,
    )


async def queue_page(ui: UI, request: Request) -> Response:
    """One task queue: counts, workers with what they run, its first pending tasks."""
    task_queue_id = queue_workers.check_task_queue_id(request.path_params["taskQueueId"])
    params = pages.queue_params(task_queue_id)
    try:
        known = await access.read(ui, request, calls.route("getTaskQueue"), params)
    except ResourceNotFound:
        known = None
    counts = cast(inspect.Counts, await access.read(ui, request, calls.route("taskQueueCounts"), params))
    listed = await access.read(ui, request, pages.QUEUE_WORKERS, params)
    pending_list = calls.route("listPendingTasks")
    answer = await access.attempt(ui, request, pending_list, params, {"limit": str(PENDING_SHOWN)})
    pending = cast(inspect.PendingList, answer) if answer is not None else None
    answer = await access.attempt(
        ui, request, calls.route("listClaimedTasks"), params, {"limit": str(RUNNING_LOOKED_AT)}
    )
    claimed = cast(inspect.ClaimedList, answer)["tasks"] if answer is not None else []
    running: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    for task in claimed:
        running[(task["workerGroup"], task["workerId"])].append((task["taskId"], task["runId"]))
    for line in listed.workers:
        line.running = running.get((line.worker_group, line.worker_id), [])
    return await ui.page(
        request,
        "queue.html",
        task_queue_id=task_queue_id,
        known=known,
        counts=counts,
        pending_shown=pending is not None,
        pending_need=access.needs(pending_list, params),
        pending=pending["tasks"] if pending is not None else [],
        more_pending=pending is not None and counts["pendingTasks"] > len(pending["tasks"]),
        workers=listed.workers,
        capped=listed.capped,
        max_workers=MAX_WORKERS,
    )


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/workers", view(workers_page)(ui), methods=["GET"]),
        Route("/queues/{taskQueueId:path}", view(queue_page)(ui), methods=["GET"]),
    ]
