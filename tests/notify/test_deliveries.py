"""The notifier on SQLite and PostgreSQL, with a fake clock: one record per (event, route) from
the event log, the cursor, the events each `on-` fires for, refused and ignored routes, retries
with a growing delay, and pulse routes published through the outbox."""

from __future__ import annotations

from typing import Any

import orjson

from taskyard.events import log as event_log
from taskyard.model.guard import ALLOW_ALL
from taskyard.notify import deliveries
from taskyard.notify.mail import Smtp
from taskyard.notify.service import Notify
from taskyard.queue import claims, tasks
from taskyard.queue.service import Queue
from tests.conftest import FakeClock, Published, until
from tests.queue.helpers import definition, new_id

TQ = "test-prov/test-worker"
WORKER = ("wg", "w1")
NOWHERE = Smtp("smtp", "127.0.0.1", 9, "", "", "ci@taskyard.test")  # the discard port: nothing listens


async def run_task(queue: Queue, clock: FakeClock, outcome: str, routes: list[str]) -> str:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now, routes=routes), guard=ALLOW_ALL)
    await claims.claim_pending(queue, TQ, WORKER, 1)
    await claims.report(queue, task_id, 0, outcome, outcome)
    return task_id


async def recorded(nt: Notify, task_id: str) -> list[dict[str, Any]]:
    async with nt.storage.reader() as session:
        return [dict(r) for r in await session.fetch("task_notify_deliveries", task_id)]


async def heard_through_the_end(queue: Queue, heard: list[str | None]) -> None:
    """Wait until `heard` holds the relay's notification of the log's newest event."""
    async with queue.storage.reader() as session:
        newest = (await session.fetchrow("event_log_end"))["newest"]
    await until(lambda: any(p is not None and p.split()[0] == str(newest) for p in heard))


async def test_the_notifier_is_woken_only_by_a_batch_with_a_notify_route(
    queue: Queue, clock: FakeClock, published: Published
) -> None:
    nt = Notify(queue, NOWHERE)
    await nt.start()
    heard: list[str | None] = []  # heard after the notifier: each payload it was handed first
    await queue.storage.listen(event_log.CHANNEL, heard.append)
    await run_task(queue, clock, "completed", ["x.y", "index.p.done"])
    await published.collect()
    await heard_through_the_end(queue, heard)
    assert not nt.published.is_set()
    task_id = await run_task(queue, clock, "failed", ["notify.email.a@x.test.on-failed"])
    await published.collect()
    await heard_through_the_end(queue, heard)
    assert nt.published.is_set()
    await deliveries.record_events(nt)
    assert [r["route"] for r in await recorded(nt, task_id)] == ["notify.email.a@x.test.on-failed"]


async def test_each_route_whose_event_fires_is_recorded_once(
    queue: Queue, clock: FakeClock, published: Published
) -> None:
    nt = Notify(queue, NOWHERE)
    routes = [
        "notify.email.a@x.test.on-failed",
        "notify.email.b@x.test.on-completed",
        "notify.email.c@x.test.on-any",
        "notify.email.d@x.test.on-transition",
        "notify.slack-channel.C1.on-failed",
        "notify.email.not-an-address.on-failed",
        "notify.email.e@x.test.oops",
    ]
    task_id = await run_task(queue, clock, "failed", routes)
    await published.collect()
    await deliveries.record_events(nt)
    await deliveries.record_events(nt)  # read again: nothing more
    rows = await recorded(nt, task_id)
    by_route = {(r["route"]): (r["outcome"], r["detail"]) for r in rows}
    assert by_route["notify.email.a@x.test.on-failed"] == ("pending", "")
    assert by_route["notify.email.c@x.test.on-any"] == ("pending", "")
    assert "notify.email.b@x.test.on-completed" not in by_route
    assert by_route["notify.slack-channel.C1.on-failed"][0] == "refused"
    assert "no slack-channel transport" in by_route["notify.slack-channel.C1.on-failed"][1]
    assert by_route["notify.email.not-an-address.on-failed"][0] == "refused"
    # on-transition fires on every task event: defined, pending, running, failed
    assert sum(1 for r in rows if r["route"] == "notify.email.d@x.test.on-transition") == 4
    assert not any(r["route"].endswith("oops") for r in rows)


async def test_a_failed_send_waits_longer_each_time_then_gives_up(
    queue: Queue, clock: FakeClock, published: Published
) -> None:
    nt = Notify(queue, NOWHERE, max_attempts=3)
    task_id = await run_task(queue, clock, "failed", ["notify.email.a@x.test.on-failed"])
    await published.collect()
    await deliveries.record_events(nt)
    await deliveries.send_due(nt)
    ((row),) = await recorded(nt, task_id)
    assert (row["outcome"], row["attempts"]) == ("pending", 1) and "not sent" in row["detail"]
    await deliveries.send_due(nt)  # not due yet: nothing tried
    assert (await recorded(nt, task_id))[0]["attempts"] == 1
    clock.advance(1)
    await deliveries.send_due(nt)
    assert (await recorded(nt, task_id))[0]["attempts"] == 2
    clock.advance(1)
    await deliveries.send_due(nt)  # the delay doubled: 2 s
    assert (await recorded(nt, task_id))[0]["attempts"] == 2
    clock.advance(1)
    await deliveries.send_due(nt)
    (row,) = await recorded(nt, task_id)
    assert (row["outcome"], row["attempts"]) == ("failed", 3)


async def test_a_canceled_task_notifies_nobody(queue: Queue, clock: FakeClock, published: Published) -> None:
    nt = Notify(queue, NOWHERE)
    task_id = new_id()
    await tasks.create_task(
        queue, task_id, definition(clock.now, routes=["notify.email.a@x.test.on-exception"]), guard=ALLOW_ALL
    )
    await tasks.cancel_task(queue, task_id, guard=ALLOW_ALL)
    await published.collect()
    await deliveries.record_events(nt)
    assert await recorded(nt, task_id) == []


async def test_a_pulse_route_publishes_the_status_through_the_outbox(
    queue: Queue, clock: FakeClock, published: Published
) -> None:
    nt = Notify(queue, None)
    heard: list[Any] = []
    published.bus.subscribe(
        "exchange/taskcluster-notify/v1/notification", "route.my.key", lambda e: heard.append(e)
    )
    task_id = await run_task(queue, clock, "completed", ["notify.pulse.my.key.on-resolved"])
    await published.collect()
    await deliveries.record_events(nt)
    await deliveries.send_due(nt)
    await published.collect()
    (envelope,) = heard
    assert envelope.routing_key == "primary.my.key" and envelope.cc == ["route.my.key"]
    assert envelope.body["version"] == 1 and envelope.body["message"]["taskId"] == task_id
    (row,) = await recorded(nt, task_id)
    assert row["outcome"] == "sent"
    await deliveries.send_due(nt)
    await published.collect()
    assert len(heard) == 1
    assert orjson.dumps(envelope.body)
