"""The notifier: the notifications tasks ask for by their `notify.` routes.

Recording. It reads the queue's task events (defined, pending, running, completed, failed,
exception) CC'd to a `notify.` route from the event log, from a cursor kept in the database
(`notify_cursor`), as the indexer does. For each event and each route whose `on-<event>` fires
for the task's state, it records a notification keyed by (event log id, route), and moves the
cursor past the batch, in one transaction: an event is recorded once however the server stops.

Sending. Each pending notification is sent, then marked sent. A process killed between the two
sends it again after the restart (at least once); once marked sent it is never sent again. A
notification that fails (SMTP server down) is tried again later, with a growing delay, up to
`max_attempts` times. A route taskyard has no transport for (Slack, Matrix, IRC, ...) or with a
bad address is recorded as refused, with the reason, and logged: the queue accepts every route
its caller has the `queue:route:` scope for, as TaskCluster's does. An email or pulse route whose
address is denylisted is recorded as suppressed.
"""

from __future__ import annotations

import logging

import orjson

from taskyard.events import log as event_log
from taskyard.model import notify_routes
from taskyard.model.errors import TaskyardError
from taskyard.model.types import LooseJSON
from taskyard.notify import custom, sending
from taskyard.notify.service import NOTIFIER, SENDER, Notify
from taskyard.queue import resolvers
from taskyard.queue import service as queue_service
from taskyard.storage.port import Tx, run_in_transaction

log = logging.getLogger(__name__)
BATCH = 200
MAX_DELAY_MS = 300_000
KEEP_MS = 7 * 24 * 3600 * 1000  # settled notifications are kept a week, for `notify status`


async def record_events(nt: Notify) -> int:
    """Record the notifications of the next batch of task events; answer how many events it read
    (0: up to date)."""
    async with nt.storage.reader() as session:
        end = await event_log.end(session)
    return await run_in_transaction(nt.storage, lambda tx: _batch_tx(nt, tx, end))


async def _batch_tx(nt: Notify, tx: Tx, end: event_log.End) -> int:
    through = int(await tx.fetchval("notify_cursor"))
    if through >= end.newest:
        return 0
    if through < end.pruned:
        log.warning(
            "notifier: events %d to %d were pruned from the log before their notifications were recorded",
            through + 1,
            end.pruned,
        )
    rows = await tx.fetch("notify_task_events", through, end.newest, BATCH)
    now = nt.clock()
    for row in rows:
        for route, outcome, detail, task_id, status in _notifications(row["body"], row["cc"]):
            await tx.execute(
                "record_notify_delivery",
                event_id=int(row["id"]),
                route=route,
                task_id=task_id,
                status=status,
                outcome=outcome,
                detail=detail,
                now=now,
            )
    full = len(rows) == BATCH
    await tx.execute("move_notify_cursor", int(rows[-1]["id"]) if full else end.newest)
    if rows:
        tx.after_commit(nt.recorded.set)  # send them at once
    return len(rows) if full else 0


def _notifications(body_text: str, cc_text: str) -> list[tuple[str, str, str, str, str]]:
    """(route, outcome, detail, taskId, status JSON) of each notification an event asks for."""
    body = orjson.loads(body_text)
    status = body.get("status") if isinstance(body, dict) else None
    if not isinstance(status, dict) or not isinstance(status.get("taskId"), str):
        return []
    if notify_routes.ignored(status):
        return []
    state = str(status.get("state", ""))
    found = []
    for cc in orjson.loads(cc_text):
        route = notify_routes.parse(cc.removeprefix("route.")) if isinstance(cc, str) else None
        if route is None or not notify_routes.fires(route.event, state):
            continue
        why = notify_routes.refusal(route)
        if why is not None:
            log.warning("task %s route %s not delivered: %s", status["taskId"], cc, why)
        outcome = "pending" if why is None else "refused"
        found.append(
            (cc.removeprefix("route."), outcome, why or "", status["taskId"], orjson.dumps(status).decode())
        )
    return found


async def send_due(nt: Notify) -> int:
    """Send the pending notifications that are due; answer how many it tried when the batch was full
    (0: none left now)."""
    async with nt.storage.reader() as session:
        rows = await session.fetch("due_notify_deliveries", nt.clock(), BATCH)
    for row in rows:
        await _send_one(
            nt, row["event_id"], row["route"], row["task_id"], row["status"], int(row["attempts"])
        )
    return len(rows) if len(rows) == BATCH else 0


async def _send_one(
    nt: Notify, event_id: int, route_text: str, task_id: str, status_text: str, attempts: int
) -> None:
    route = notify_routes.parse(route_text)
    assert route is not None  # recorded only when it parsed
    status: LooseJSON = orjson.loads(status_text)
    try:
        outcome, detail = await _deliver(nt, route, task_id, status)
    except TaskyardError as exc:
        await _failed(nt, event_id, route_text, task_id, attempts, exc.message)
        return
    await _settle(nt, event_id, route_text, outcome, detail)


async def _failed(nt: Notify, event_id: int, route: str, task_id: str, attempts: int, why: str) -> None:
    """A try that failed: tried again later with a growing delay, or given up after `max_attempts`."""
    if attempts + 1 >= nt.max_attempts:
        log.warning("task %s route %s: giving up after %d attempts: %s", task_id, route, attempts + 1, why)
        await _settle(nt, event_id, route, "failed", why)
        return
    delay = min(int(nt.poll_interval * 1000) * 2**attempts, MAX_DELAY_MS)
    log.info("task %s route %s not sent (%s); trying again in %d ms", task_id, route, why, delay)
    await run_in_transaction(
        nt.storage, lambda tx: tx.execute("retry_notify_delivery", event_id, route, why, nt.clock() + delay)
    )


async def _settle(nt: Notify, event_id: int, route: str, outcome: str, detail: str) -> None:
    await run_in_transaction(
        nt.storage, lambda tx: tx.execute("settle_notify_delivery", event_id, route, outcome, detail)
    )


async def _deliver(
    nt: Notify, route: notify_routes.NotifyRoute, task_id: str, status: LooseJSON
) -> tuple[str, str]:
    """Send one notification: its outcome and detail; a TaskyardError to try again later."""
    kind = "email" if route.kind == "email" else "pulse"
    if await sending.denylisted(nt, kind, route.target):
        return "suppressed", f"{route.target} is denylisted for {kind}"
    if route.kind == "pulse":
        await run_in_transaction(nt.storage, lambda tx: sending.publish_tx(nt, tx, route.target, status))
        return "sent", ""
    async with nt.storage.reader() as session:
        row = await session.fetchrow("get_task", task_id)
    task = dict(queue_service.record_from_row(row).definition) if row is not None else None
    default = notify_routes.task_email(task_id, status, task, nt.ui_url)
    mail_ = custom.task_email(default, task_id, status, task, nt.ui_url)
    sent = await sending.deliver_email(nt, route.target, mail_)
    return ("sent", "") if sent else ("suppressed", "a duplicate, or over the rate limit")


async def expire(nt: Notify) -> int:
    """Delete settled notifications older than a week, in bounded batches."""
    return await run_in_transaction(
        nt.storage, lambda tx: tx.execute("expire_notify_deliveries", nt.clock() - KEEP_MS, 1000)
    )


async def run_forever(nt: Notify) -> None:
    """Record task events' notifications until cancelled: at once when the relay logs events for it,
    else every `poll_interval`; only in the process that leads the job."""
    await resolvers.run_forever(
        NOTIFIER, lambda: record_events(nt), nt.poll_interval, nt.published, lead=nt.storage.lead
    )


async def send_forever(nt: Notify) -> None:
    """Send due notifications until cancelled, every `poll_interval` (and expire old ones)."""

    async def once() -> int:
        sent = await send_due(nt)
        if not sent:
            await expire(nt)
        return sent

    await resolvers.run_forever(SENDER, once, nt.poll_interval, nt.recorded, lead=nt.storage.lead)
