"""`GET /`: the dashboard; `GET /find`: the header's search box.

The dashboard shows every task queue (pending and claimed counts, the oldest pending run's age,
claims in the last minute, its workers), the task groups created or changed last, and the workers
seen. It reads them through the API's call pipeline as the viewer, with two guarded operations
(`api/pages.py`), each a fixed number of bounded queries, whatever the deployment holds:

- `DASHBOARD_QUEUES`, with `listTaskQueues`' scopes: pending, claimed and the oldest pending age per
  queue are `/metrics`' own grouped queries (`api.metrics.read_snapshot`); claims in the last
  minute are the `task-running` events in the event log (the relay writes one per claim), of which
  only the newest `EVENTS_LOOKED_AT` rows are read, so past that many events a minute the counts
  are lower bounds, and the page says so. Each queue's counts are kept with its
  `taskQueueCounts`' scopes, its workers with its `listWorkers`';
- `RECENT_GROUPS_READ`: the groups of the newest `TASKS_LOOKED_AT` tasks by creation, and of the
  events just read (a task or group event changes its group), the latest `RECENT_GROUPS` of them,
  each kept with `listTaskGroup`'s scopes for that group (the others are counted as hidden).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from taskyard.api import calls, pages
from taskyard.api.pages import GroupLine, QueueLine
from taskyard.model import identifiers
from taskyard.model.errors import ResourceNotFound
from taskyard.ui import access
from taskyard.ui.render import UI, ReadRefused, view

STATES = ("unscheduled", "pending", "running", "completed", "failed", "exception")
SLUGID = re.compile(identifiers.SLUGID)
# The rule in words (the box is for people: the regular expression would tell them little).
ID_RULE = "an id must be 22 characters, letters, digits, '-' and '_', as taskyard and TaskCluster make them."


@dataclass
class Overview:
    queues: list[QueueLine]
    groups: list[GroupLine]
    claims_capped: bool
    queues_shown: bool = True  # False: the viewer may not list the task queues
    groups_hidden: int = 0  # recent groups the viewer may not list

    @property
    def no_tasks(self) -> bool:
        """No task at all (a queue may be known already: a worker asked it for work)."""
        if not self.queues_shown or self.groups_hidden or any(q.counts_need for q in self.queues):
            return False  # the viewer may not know
        return not self.groups and not any(q.pending or q.claimed for q in self.queues)


async def overview(ui: UI, request: Request) -> Overview:
    """What the dashboard shows the viewer: the queues if it may list them, the groups it may list."""
    queues = await access.attempt(ui, request, pages.DASHBOARD_QUEUES, {})
    recent = await access.read(ui, request, pages.RECENT_GROUPS_READ, {})
    if queues is None:
        return Overview([], recent.items, False, False, recent.hidden)
    return Overview(queues.queues, recent.items, queues.claims_capped, True, recent.hidden)


async def dashboard(ui: UI, request: Request) -> Response:
    return await ui.page(
        request,
        "dashboard.html",
        overview=await overview(ui, request),
        states=STATES,
        queues_need=access.needs(pages.DASHBOARD_QUEUES, {}),
        group_needs=calls.needs(pages.LIST_GROUP, {"taskGroupId": "<taskGroupId>"}),
    )


async def find(ui: UI, request: Request) -> Response:
    """The header's search: a taskId opens its task, a taskGroupId its group (303).

    Only what the viewer may read is looked for, as the API checks scopes before it looks: the task
    with the task page's scopes (`task`, `status`), the group with `listTaskGroup`'s. An id found
    nowhere the viewer may look answers the refusal naming what it lacks, whether or not the id
    exists, so the search tells no one what it would not show them.
    """
    wanted = request.query_params.get("id", "").strip()
    if not wanted:
        return await ui.error(
            request, 400, "Bad request", "Type a taskId or a taskGroupId in the box: " + ID_RULE
        )
    if not SLUGID.fullmatch(wanted):
        message = f"id {wanted[:80]!r} is not a taskId or taskGroupId: {ID_RULE}"
        return await ui.error(request, 400, "Bad request", message)
    refusal: ReadRefused | None = None
    for step, where in ((pages.TASK_STATUS, "tasks"), (calls.route("getTaskGroup"), "groups")):
        try:
            await access.read(ui, request, step, {"taskId": wanted, "taskGroupId": wanted})
        except ResourceNotFound:
            continue
        except ReadRefused as refused:
            refusal = refusal or refused  # the task's refusal first, as the task is looked for first
            continue
        return RedirectResponse(f"/{where}/{wanted}", 303)
    if refusal is not None:
        raise refusal
    message = f"Nothing was found for {wanted}: no task or task group has this id."
    return await ui.error(request, 404, "Not found", message)


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/", view(dashboard)(ui), methods=["GET"]),
        Route("/find", view(find)(ui), methods=["GET"]),
    ]
