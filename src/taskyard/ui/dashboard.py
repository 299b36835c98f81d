"""`GET /`: the dashboard; `GET /find`: the header's search box.

The dashboard shows every task queue (pending and claimed counts, the oldest pending run's age,
claims in the last minute, its workers), the task groups created or changed last, and the workers
seen. Its reads are a fixed number of bounded queries, whatever the deployment holds:

- pending, claimed and the oldest pending age per queue are `/metrics`' own grouped queries
  (`api.metrics.read_snapshot`);
- claims in the last minute are the `task-running` events in the event log (the relay writes one
  per claim); only its newest `EVENTS_LOOKED_AT` rows are read, so past that many events a minute
  the counts are lower bounds, and the page says so;
- recent groups are those of the newest `TASKS_LOOKED_AT` tasks by creation, and of the events
  just read (a task or group event changes its group), the latest `RECENT_GROUPS` of them.

It shows only what the viewer may read through the API: the queues with `listTaskQueues`'
scopes, each queue's counts with its `taskQueueCounts`' and its workers with its `listWorkers`'
(`readable`), and each recent group with `listTaskGroup`'s for that group (the others are counted
as hidden). The viewer's scopes are checked in memory, once a request.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from taskyard.api import metrics
from taskyard.api.authz import Caller
from taskyard.model import dates, identifiers
from taskyard.model.messages import EXCHANGES
from taskyard.storage.port import Row, Session
from taskyard.ui import access
from taskyard.ui.render import UI, view

RECENT_GROUPS = 20
TASKS_LOOKED_AT = 5_000
EVENTS_LOOKED_AT = 5_000
QUARANTINED_SHOWN = 200
MINUTE = 60 * dates.SECOND
STATES = ("unscheduled", "pending", "running", "completed", "failed", "exception")
SLUGID = re.compile(identifiers.SLUGID)


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
class GroupLine:
    """One task group: when it last changed, and how many of its tasks are in each state."""

    task_group_id: str
    changed: int
    states: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.states.values())


@dataclass
class Recent:
    """What the newest events say: claims per queue in the last minute, groups changed lately."""

    claims: Counter[str] = field(default_factory=Counter)
    capped: bool = False  # more events came in the last minute than were read
    groups: dict[str, int] = field(default_factory=dict)  # taskGroupId: when last changed


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


async def queue_lines(ui: UI, session: Session, now: int) -> dict[str, QueueLine]:
    """Every task queue known (seen by workers, holding tasks, with workers): counts and workers."""
    snap = await metrics.read_snapshot(ui.services.queue, 0.0)
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


def queue_params(task_queue_id: str) -> dict[str, str]:
    """A queue's id and its halves, as the API's routes name them."""
    provisioner_id, _, worker_type = task_queue_id.partition("/")
    return {"taskQueueId": task_queue_id, "provisionerId": provisioner_id, "workerType": worker_type}


def readable(line: QueueLine, who: Caller) -> QueueLine:
    """`line` with what `who` may not read through the API blanked, and the scopes that would let
    it: the counts (pending, running, the oldest pending run's age, the last minute's claims) need
    taskQueueCounts' scopes for the queue, its workers listWorkers'."""
    params = queue_params(line.task_queue_id)
    if access.check(who, "taskQueueCounts", params) is not None:
        line.pending = line.claimed = line.claims = 0
        line.oldest_age = None
        line.counts_need = access.needs("taskQueueCounts", params)
    if access.check(who, "listWorkers", params) is not None:
        line.workers, line.quarantined = 0, []
        line.workers_need = access.needs("listWorkers", params)
    return line


async def recent_groups(session: Session, changed: dict[str, int]) -> list[GroupLine]:
    """The `RECENT_GROUPS` groups created or changed last (`changed`: from the events), with counts."""
    latest = dict(changed)
    for row in await session.fetch("ui_dashboard_recent_groups", TASKS_LOOKED_AT, RECENT_GROUPS):
        latest[row["task_group_id"]] = max(int(row["latest"]), latest.get(row["task_group_id"], 0))
    chosen = sorted(latest, key=lambda g: (-latest[g], g))[:RECENT_GROUPS]
    states: dict[str, dict[str, int]] = {g: {} for g in chosen}
    for row in await session.fetch("ui_dashboard_group_states", chosen):
        states[row["task_group_id"]][row["state"]] = int(row["tasks"])
    # A group whose tasks all expired has no counts left: it is not shown.
    return [GroupLine(g, latest[g], states[g]) for g in chosen if states[g]]


async def overview(ui: UI, who: Caller) -> Overview:
    """What the dashboard shows `who`: the queues if it may list them, the groups it may list."""
    now = ui.now()
    queues_shown = access.check(who, "listTaskQueues", {}) is None
    async with ui.services.queue.storage.reader() as session:
        lines = await queue_lines(ui, session, now) if queues_shown else {}
        recent = recent_events(await session.fetch("ui_dashboard_recent_events", EVENTS_LOOKED_AT), now)
        if queues_shown:
            for task_queue_id, count in recent.claims.items():
                lines.setdefault(task_queue_id, QueueLine(task_queue_id)).claims = count
        groups = await recent_groups(session, recent.groups)
    shown = [
        g for g in groups if access.check(who, "listTaskGroup", {"taskGroupId": g.task_group_id}) is None
    ]
    queues = [readable(lines[k], who) for k in sorted(lines)]
    return Overview(queues, shown, recent.capped, queues_shown, len(groups) - len(shown))


async def dashboard(ui: UI, request: Request) -> Response:
    who = await access.viewer(ui, request)
    return await ui.page(
        request,
        "dashboard.html",
        overview=await overview(ui, who),
        states=STATES,
        queues_need=access.needs("listTaskQueues", {}),
        group_needs=access.needs("listTaskGroup", {"taskGroupId": "<taskGroupId>"}),
    )


async def find(ui: UI, request: Request) -> Response:
    """The header's search: a taskId opens its task, a taskGroupId its group (303).

    Only what the viewer may read is looked for, as the API checks scopes before it looks: the task
    with the task page's scopes (`task`, `status`), the group with `listTaskGroup`'s. An id found
    nowhere the viewer may look answers the refusal naming what it lacks, whether or not the id
    exists, so the search tells no one what it would not show them.
    """
    wanted = request.query_params.get("id", "").strip()
    if not SLUGID.fullmatch(wanted):
        shown = repr(wanted[:80]) if wanted else "(empty)"
        message = f"id {shown} is not a taskId or taskGroupId: it must match {identifiers.SLUGID}"
        return await ui.error(request, 400, "Bad request", message)
    task_reads = [("task", {"taskId": wanted}), ("status", {"taskId": wanted})]
    group_reads = [("listTaskGroup", {"taskGroupId": wanted})]
    may_read_task = all([await access.allowed(ui, request, name, params) for name, params in task_reads])
    may_list_group = all([await access.allowed(ui, request, name, params) for name, params in group_reads])
    async with ui.services.queue.storage.reader() as session:
        if may_read_task and await session.fetchrow("get_task", wanted) is not None:
            return RedirectResponse(f"/tasks/{wanted}", 303)
        if may_list_group and await session.fetchrow("get_group", wanted) is not None:
            return RedirectResponse(f"/groups/{wanted}", 303)
    for name, params in group_reads if may_read_task else task_reads:
        await access.require(ui, request, name, params)
    message = f"Nothing was found for {wanted}: no task or task group has this id."
    return await ui.error(request, 404, "Not found", message)


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/", view(dashboard)(ui), methods=["GET"]),
        Route("/find", view(find)(ui), methods=["GET"]),
    ]
