"""Events through a real RabbitMQ: keys, bodies, CCs, confirms, outages and reconnection.

Consumers bind the way TaskCluster's clients bind (`primary.#`, `route.<r>` on the
`exchange/taskcluster-queue/v1/*` exchanges) and the way the `seed` profile's consumers do
(`*.*.*.*.<provisionerId>.#` on v1/queue:task-pending, `*.*.*.*.*.*.<schedulerId>.#` on
v1/queue:task-completed and task-failed). Tests that stop or reconfigure a broker use a private
node (tests/events/rabbit.py); the others use the shared one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from asyncio.selector_events import _SelectorSocketTransport
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import orjson
import pytest

from taskyard.events.amqp import AmqpBus
from taskyard.events.outbox import OutboxRelay
from taskyard.events.port import BusUnavailable, Envelope
from taskyard.events.profiles import SEED_PREFIX, TC_PREFIX, Profiles
from taskyard.internals import amqp as amqp_internals
from taskyard.model.guard import ALLOW_ALL
from taskyard.model.messages import EXCHANGES, Message, task_message
from taskyard.queue import claims, tasks
from taskyard.queue.service import Queue
from taskyard.storage.port import Storage
from tests.conftest import RABBITMQ_URL, FakeClock, need_rabbitmq, new_queue
from tests.e2e.conftest import start_server
from tests.e2e.helpers import create, wait_for
from tests.events.rabbit import Consumer, PrivateRabbit, Received, TcpProxy, eventually
from tests.queue.helpers import definition, new_id

ROOT = "https://tc.example.com"
AMQP_LOGGER = "taskyard.events.amqp"


@pytest.fixture
def rabbit_url() -> str:
    need_rabbitmq()
    return RABBITMQ_URL


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@contextlib.asynccontextmanager
async def relaying(
    storage: Storage, clock: FakeClock, url: str, **options: Any
) -> AsyncIterator[tuple[AmqpBus, Queue]]:
    """An AMQP bus, the relay feeding it and a queue kicking the relay, as `taskyard serve` wires them."""
    bus = AmqpBus(url, Profiles(root_url=ROOT), **options)
    await bus.start()
    relay = OutboxRelay(storage, bus)
    queue = new_queue(storage, clock, events_committed=relay.kick)
    task = asyncio.create_task(relay.run())
    try:
        yield bus, queue
    finally:
        # Bounded: a test that failed inside must fail, not hang on a close that waits for the broker.
        async with asyncio.timeout(30):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await bus.close()


def bus_lines(caplog: pytest.LogCaptureFixture, words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == AMQP_LOGGER and words in r.getMessage()]


def outage_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return bus_lines(caplog, "is unavailable")


def back_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return bus_lines(caplog, "is back after")


def driver_noise(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Warnings from anyone but the bus, and any traceback at all. Except asyncio's "socket.send()
    raised exception.": on a loaded machine aiormq may write a few frames into the socket of a
    broker that is shutting down before it reads the close, and asyncio logs that once per
    connection. (Known, left: the bus could drop its connection at the broker's close frame.)"""
    return [
        r
        for r in caplog.records
        if ((r.levelno >= logging.WARNING and r.name != AMQP_LOGGER) or r.exc_info)
        and not (r.name == "asyncio" and r.getMessage() == "socket.send() raised exception.")
    ]


T = TypeVar("T", Received, Envelope)


def of_tasks(received: list[T], *task_ids: str) -> list[T]:
    """The task events of these tasks. A consumer bound to `primary.#` also gets what other tests
    publish meanwhile (in other processes too): group events, which have no status, and others'."""
    return [r for r in received if r.body.get("status", {}).get("taskId") in task_ids]


def local_tc(local: list[Envelope]) -> list[Envelope]:
    """The task events a local subscriber got in TaskCluster's profile."""
    return [e for e in local if e.exchange.startswith(TC_PREFIX) and "status" in e.body]


async def create_in(queue: Queue, clock: FakeClock, task_id: str, prov: str) -> None:
    """Create task `task_id` in the task queue `<prov>/wt`, whose events the test's bindings select."""
    await tasks.create_task(queue, task_id, definition(clock.now, taskQueueId=f"{prov}/wt"), guard=ALLOW_ALL)


async def test_a_tasks_life_reaches_taskcluster_and_seed_consumers(
    storage: Storage, clock: FakeClock, rabbit_url: str
) -> None:
    prov, scheduler, route = unique("prov"), unique("sched"), f"index.{unique('r')}.done"
    tc_all = Consumer(rabbit_url)
    for exchange in EXCHANGES:
        tc_all.bind(TC_PREFIX + exchange, "primary.#")
    tc_route = Consumer(rabbit_url).bind(TC_PREFIX + "task-completed", f"route.{route}")
    seed_provisioner = Consumer(rabbit_url)
    for exchange in ("task-pending", "task-running"):
        seed_provisioner.bind(SEED_PREFIX + exchange, f"*.*.*.*.{prov}.#")
    seed_scheduler = Consumer(rabbit_url)
    for exchange in ("task-completed", "task-failed"):
        seed_scheduler.bind(SEED_PREFIX + exchange, f"*.*.*.*.*.*.{scheduler}.#")

    body = {"taskQueueId": f"{prov}/wt", "schedulerId": scheduler, "routes": [route]}
    done, failed, canceled = new_id(), new_id(), new_id()
    async with relaying(storage, clock, rabbit_url) as (bus, queue):
        local: list[Envelope] = []
        for exchange in Profiles().exchanges():
            bus.subscribe(exchange, "#", local.append)
        tags = {"taskyard:routing": "graph-1.build"}
        await tasks.create_task(queue, done, definition(clock.now, **body, tags=tags), guard=ALLOW_ALL)
        await claims.claim_pending(queue, f"{prov}/wt", ("wg", "w1"), 1)
        await claims.report(queue, done, 0, "completed", "completed")
        await tasks.create_task(queue, failed, definition(clock.now, **body), guard=ALLOW_ALL)
        await claims.claim_pending(queue, f"{prov}/wt", ("wg", "w1"), 1)
        await claims.report(queue, failed, 0, "exception", "worker-shutdown")  # retried: run 1
        await claims.claim_pending(queue, f"{prov}/wt", ("wg", "w2"), 1)
        await claims.report(queue, failed, 1, "failed", "failed")
        await tasks.create_task(queue, canceled, definition(clock.now, **body), guard=ALLOW_ALL)
        await tasks.cancel_task(queue, canceled, guard=ALLOW_ALL)
        ids = (done, failed, canceled)
        # 3 defined, 4 pending, 3 running, 1 completed, 1 exception retried, 1 failed, 1 canceled
        await eventually(lambda: len(of_tasks(tc_all.take(), *ids)) == 14)
        await eventually(lambda: len(seed_scheduler.take()) == 3 and len(seed_provisioner.take()) == 7)
        await eventually(lambda: len(tc_route.take()) == 1)
        # Local subscribers are called by the bus on its own schedule, not when the broker
        # confirms: wait for them too before the bus closes.
        await eventually(lambda: len(of_tasks(local_tc(local), *ids)) == 14)

    # TaskCluster's profile: what the consumer got is what the queue made, in order, with CCs.
    tc_local = local_tc(local)
    assert [(r.exchange, r.routing_key, r.body) for r in of_tasks(tc_all.received, *ids)] == [
        (e.exchange, e.routing_key, e.body) for e in tc_local if e.body["status"]["taskId"] in ids
    ]
    for received in of_tasks(tc_all.received, *ids):
        assert received.headers == {"CC": [f"route.{route}"]}
        assert received.delivery_mode == 2 and received.content_type == "application/json"
        assert received.body["version"] == 1
    (completed,) = tc_route.received
    assert completed.exchange == TC_PREFIX + "task-completed"
    assert completed.routing_key == f"primary.{done}.0.wg.w1.{prov}.wt.{scheduler}.{done}._"
    assert set(completed.body) == {"status", "runId", "workerGroup", "workerId", "task", "version"}

    # The seed profile: pending and running by provisioner, resolutions by scheduler.
    seed = [(r.exchange.removeprefix(SEED_PREFIX), r.routing_key) for r in seed_provisioner.received]
    assert seed == [
        ("task-pending", f"{done}._._._.{prov}.wt.{scheduler}.{done}.graph-1.build"),
        ("task-running", f"{done}.0.wg.w1.{prov}.wt.{scheduler}.{done}.graph-1.build"),
        ("task-pending", f"{failed}._._._.{prov}.wt.{scheduler}.{failed}"),
        ("task-running", f"{failed}.0.wg.w1.{prov}.wt.{scheduler}.{failed}"),
        ("task-pending", f"{failed}._._._.{prov}.wt.{scheduler}.{failed}"),
        ("task-running", f"{failed}.1.wg.w2.{prov}.wt.{scheduler}.{failed}"),
        ("task-pending", f"{canceled}._._._.{prov}.wt.{scheduler}.{canceled}"),
    ]
    pending, running = seed_provisioner.received[:2]
    assert pending.body == {"version": "0.2.0", "status": pending.body["status"]}
    assert pending.body["status"]["state"] == "pending" and pending.body["status"]["taskId"] == done
    run0 = f"{ROOT}/api/queue/v1/task/{done}/runs/0/artifacts"
    assert running.body == {
        "version": "0.2.0",
        "status": running.body["status"],
        "run_id": 0,
        "worker_group": "wg",
        "worker_id": "w1",
        "logs": f"{run0}/public/logs/live.log",
    }
    assert running.headers == {} and running.delivery_mode == 2
    assert running.content_type == "application/json"
    resolved = seed_scheduler.received
    assert [(r.exchange.removeprefix(SEED_PREFIX), r.routing_key) for r in resolved] == [
        ("task-completed", f"{done}.0.wg.w1.{prov}.wt.{scheduler}.{done}.graph-1.build"),
        ("task-failed", f"{failed}.1.wg.w2.{prov}.wt.{scheduler}.{failed}"),
        ("task-failed", f"{canceled}.0._._.{prov}.wt.{scheduler}.{canceled}"),
    ]
    completed_seed, failed_seed, canceled_seed = (r.body for r in resolved)
    assert completed_seed == {
        "version": "0.2.0",
        "status": completed_seed["status"],
        "run_id": 0,
        "worker_group": "wg",
        "worker_id": "w1",
        "logs": f"{run0}/public/logs/live.log",
        "result": run0,
    }
    assert completed_seed["status"]["state"] == "completed"
    assert failed_seed == {
        "version": "0.2.0",
        "status": failed_seed["status"],
        "run_id": 1,
        "worker_group": "wg",
        "worker_id": "w2",
    }
    assert canceled_seed == {"version": "0.2.0", "status": canceled_seed["status"], "run_id": 0}
    assert canceled_seed["status"]["runs"][0]["reasonResolved"] == "canceled"
    for consumer in (tc_all, tc_route, seed_provisioner, seed_scheduler):
        consumer.close()


async def test_a_publish_whose_confirm_never_comes_keeps_its_events(
    queue: Queue, storage: Storage, clock: FakeClock, rabbit_url: str
) -> None:
    host_port = rabbit_url.split("@")[1].split("/")[0]
    host, port = host_port.split(":") if ":" in host_port else (host_port, "5672")
    proxy = await TcpProxy((host, int(port))).start()
    proxied = rabbit_url.replace(host_port, f"127.0.0.1:{proxy.port}")
    prov = unique("prov")
    consumer = Consumer(rabbit_url).bind(TC_PREFIX + "task-pending", f"primary.*.*.*.*.{prov}.#")
    bus = AmqpBus(proxied, Profiles(root_url=ROOT), confirm_timeout=0.5)
    await bus.start()
    relay = OutboxRelay(storage, bus)  # driven by hand: relay_once
    try:
        await asyncio.wait_for(bus.wait_ready(), 30)
        task_id = new_id()
        await create_in(queue, clock, task_id, prov)
        proxy.hold_replies()  # the broker gets the messages; its confirms never reach us
        with pytest.raises(BusUnavailable):
            await relay.relay_once()
        assert not bus.connected
        proxy.pass_replies()
        await asyncio.wait_for(bus.wait_ready(), 30)
        assert await relay.relay_once() == 2  # task-defined and task-pending were still there
        assert await relay.relay_once() == 0
        await eventually(lambda: any(r.body["status"]["taskId"] == task_id for r in consumer.take()))
    finally:
        await bus.close()
        await proxy.close()
        consumer.close()


def pending(prov: str, routes: list[str]) -> Message:
    """A task-pending event of a new task of `prov`, CC'd to its routes."""
    task_id = new_id()
    status: Any = {
        "taskId": task_id,
        "provisionerId": prov,
        "workerType": "wt",
        "taskQueueId": f"{prov}/wt",
        "schedulerId": "-",
        "projectId": "none",
        "taskGroupId": task_id,
        "priority": "lowest",
        "deadline": "2030-01-01T00:00:00.000Z",
        "expires": "2031-01-01T00:00:00.000Z",
        "retriesLeft": 5,
        "state": "pending",
        "runs": [{"runId": 0, "state": "pending", "reasonCreated": "scheduled", "scheduled": "now"}],
    }
    definition: Any = {"routes": routes, "tags": {}}
    return task_message("task-pending", status, definition, run_id=0)


def raw_messages(consumer: Consumer) -> list[dict[str, Any]]:
    """What the consumer's queue holds: each message's exchange, key, body and every property."""
    taken = []
    while True:
        method, properties, body = consumer.channel.basic_get(consumer.queue, auto_ack=True)
        if method is None:
            return taken
        taken.append(
            {"exchange": method.exchange, "routing_key": method.routing_key, "body": orjson.loads(body)}
            | {name: getattr(properties, name) for name in PROPERTIES}
        )


PROPERTIES = [
    *("content_type", "content_encoding", "headers", "delivery_mode", "priority", "correlation_id"),
    *("reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id", "cluster_id"),
]


async def test_a_batch_is_written_to_the_broker_at_once(
    rabbit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every message of a publish (both profiles' frames) goes in one write on the connection's
    socket, counted on the transport; the broker confirms each, and a consumer gets them all."""
    prov = unique("prov")
    consumer = Consumer(rabbit_url).bind(TC_PREFIX + "task-pending", f"primary.*.*.*.*.{prov}.#")
    consumer.bind(SEED_PREFIX + "task-pending", f"*.*.*.*.{prov}.#")
    broker_port = urlsplit(rabbit_url).port or 5672
    writes: list[bytes] = []
    write = _SelectorSocketTransport.write

    def counted(transport: _SelectorSocketTransport, data: Any) -> None:
        if transport.get_extra_info("peername", ("", 0))[1] == broker_port:
            writes.append(bytes(data))
        write(transport, data)

    bus = AmqpBus(rabbit_url, Profiles(root_url=ROOT))
    await bus.start()
    try:
        await asyncio.wait_for(bus.wait_ready(), 30)
        messages = [pending(prov, [f"index.r{i % 3}"] if i % 2 else []) for i in range(40)]
        monkeypatch.setattr(_SelectorSocketTransport, "write", counted)
        await bus.publish(messages)
        monkeypatch.undo()
    finally:
        await bus.close()
    # A Basic.Publish method frame: type 1, channel, size, then class 60 method 40.
    publishes = [re.findall(rb"\x01..\x00\x00..\x00\x3c\x00\x28", data, re.DOTALL) for data in writes]
    assert [len(found) for found in publishes if found] == [80]
    await eventually(lambda: len(consumer.take()) == 80)
    consumer.close()


async def test_a_batch_sends_what_a_message_at_a_time_sends(
    rabbit_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Whether the bus writes a batch at once or falls back to aiormq's `basic_publish` (as it does
    when aiormq is not what `internals/amqp.py` expects, and says so): the same messages, with the
    same properties, ids numbered in publishing order."""
    caplog.set_level(logging.INFO, logger=AMQP_LOGGER)
    prov = unique("prov")
    consumer = Consumer(rabbit_url).bind(TC_PREFIX + "task-pending", f"primary.*.*.*.*.{prov}.#")
    consumer.bind(SEED_PREFIX + "task-pending", f"*.*.*.*.{prov}.#")
    messages = [pending(prov, ["index.a.b", "notify.email.\u00e9t\u00e9@x.org.on-failed"]), pending(prov, [])]

    async def published(batched: bool) -> list[dict[str, Any]]:
        bus = AmqpBus(rabbit_url, Profiles(root_url=ROOT))
        if not batched:
            monkeypatch.setattr(amqp_internals, "usable", lambda channel: "aiormq 0.0 is not checked")
        await bus.start()
        try:
            await asyncio.wait_for(bus.wait_ready(), 30)
            assert bus._batched is batched
            await bus.publish(messages)
            await bus.publish(messages[:1])
        finally:
            await bus.close()
            monkeypatch.undo()
        received: list[dict[str, Any]] = []

        def all_arrived() -> bool:
            received.extend(raw_messages(consumer))
            return len(received) == 6

        await eventually(all_arrived)
        return received

    try:
        batched, single = await published(True), await published(False)
    finally:
        consumer.close()
    for got in (batched, single):
        ids = [m.pop("message_id") for m in got]
        prefix = ids[0].rpartition("-")[0] + "-"
        assert ids == [f"{prefix}{n}" for n in range(int(ids[0].rpartition("-")[2]), 6)]
    assert batched == single
    assert batched[0]["headers"] == {
        "CC": ["route.index.a.b", "route.notify.email.\u00e9t\u00e9@x.org.on-failed"]
    }
    assert batched[0]["content_type"] == "application/json" and batched[0]["delivery_mode"] == 2
    assert batched[2]["headers"] is None
    (line,) = bus_lines(caplog, "a message at a time")
    assert line.endswith(": aiormq 0.0 is not checked")


async def test_a_batch_the_broker_refuses_stays_in_the_outbox(
    queue: Queue, storage: Storage, clock: FakeClock, rabbit_url: str
) -> None:
    """A queue with no room that refuses publishes (`reject-publish`): the broker nacks, the
    relay's transaction rolls back, and once the queue is gone the same events are published."""
    prov = unique("prov")
    full = unique("ty-full")
    refusing = Consumer(rabbit_url)
    refusing.channel.queue_declare(
        full, exclusive=True, arguments={"x-max-length": 0, "x-overflow": "reject-publish"}
    )
    refusing.channel.exchange_declare(TC_PREFIX + "task-pending", "topic", durable=True)
    refusing.channel.queue_bind(full, TC_PREFIX + "task-pending", f"primary.*.*.*.*.{prov}.#")
    consumer = Consumer(rabbit_url).bind(TC_PREFIX + "task-pending", f"primary.*.*.*.*.{prov}.#")
    bus = AmqpBus(rabbit_url, Profiles(root_url=ROOT))
    await bus.start()
    relay = OutboxRelay(storage, bus)  # driven by hand: relay_once
    try:
        await asyncio.wait_for(bus.wait_ready(), 30)
        task_id = new_id()
        await create_in(queue, clock, task_id, prov)
        with pytest.raises(BusUnavailable, match="DeliveryError"):
            await relay.relay_once()
        refusing.close()  # the exclusive queue goes with its connection
        await asyncio.wait_for(bus.wait_ready(), 30)
        assert await relay.relay_once() == 2  # task-defined and task-pending were still there
        await eventually(lambda: [r.body["status"]["taskId"] for r in consumer.take()] != [])
        # At least once: the consumer's queue got them from the refused batch too.
        assert {r.body["status"]["taskId"] for r in consumer.received} == {task_id}
    finally:
        await bus.close()
        consumer.close()


async def test_a_broker_restart_loses_nothing(
    storage: Storage,
    clock: FakeClock,
    private_rabbit: PrivateRabbit,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=AMQP_LOGGER)
    prov = unique("prov")
    durable = unique("ty-restart")
    consumer = Consumer(private_rabbit.url(), durable_name=durable)
    for exchange in EXCHANGES:
        consumer.bind(TC_PREFIX + exchange, f"primary.*.*.*.*.{prov}.#")
    consumer.close()
    before, during = new_id(), new_id()
    async with relaying(storage, clock, private_rabbit.url()) as (bus, queue):
        await asyncio.wait_for(bus.wait_ready(), 30)
        await create_in(queue, clock, before, prov)
        await claims.claim_pending(queue, f"{prov}/wt", ("wg", "w1"), 1)
        try:
            private_rabbit.stop()
            await eventually(lambda: len(outage_lines(caplog)) == 1)
            # The queue goes on while the broker is away; its events wait in the outbox.
            await claims.report(queue, before, 0, "completed", "completed")
            await create_in(queue, clock, during, prov)
        finally:
            private_rabbit.start()
        await eventually(lambda: len(back_lines(caplog)) == 1)
        consumer = Consumer(private_rabbit.url(), durable_name=durable)
        try:
            await eventually(lambda: len(consumer.take()) >= 6)
            seen = [(r.exchange.removeprefix(TC_PREFIX), r.body["status"]["taskId"]) for r in consumer.take()]
            expected = [
                ("task-defined", before),
                ("task-pending", before),
                ("task-running", before),
                ("task-completed", before),
                ("task-defined", during),
                ("task-pending", during),
            ]
            # At least once: a batch unconfirmed when the broker went may come again, in order.
            assert [s for i, s in enumerate(seen) if s not in seen[:i]] == expected
            consumer.channel.queue_delete(durable)
        finally:
            consumer.close()
    assert len(outage_lines(caplog)) == 1 and len(back_lines(caplog)) == 1
    assert driver_noise(caplog) == []


async def test_refused_credentials_log_one_line_until_they_work(
    storage: Storage,
    clock: FakeClock,
    private_rabbit: PrivateRabbit,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    user, password, prov = unique("user"), "secret-password", unique("prov")
    consumer = Consumer(private_rabbit.url())
    consumer.bind(TC_PREFIX + "task-pending", f"primary.*.*.*.*.{prov}.#")
    task_id = new_id()
    url = private_rabbit.url(user, password)
    async with relaying(storage, clock, url, min_backoff=0.05, max_backoff=0.2) as (bus, queue):
        await create_in(queue, clock, task_id, prov)
        await eventually(lambda: bus.failed_attempts >= 5)
        (line,) = outage_lines(caplog)
        assert "refused the credentials" in line and password not in line
        assert consumer.take() == []
        private_rabbit.add_user(user, password)
        await eventually(lambda: len(consumer.take()) == 1)
    assert len(outage_lines(caplog)) == 1 and len(back_lines(caplog)) == 1
    assert driver_noise(caplog) == []
    consumer.close()


def test_a_server_started_without_its_broker_serves_and_publishes_once_it_is_up(
    tmp_path: Path, private_rabbit: PrivateRabbit
) -> None:
    prov = unique("prov")
    durable = unique("ty-start")
    consumer = Consumer(private_rabbit.url(), durable_name=durable)
    consumer.bind(TC_PREFIX + "task-pending", f"primary.*.*.*.*.{prov}.#")
    consumer.bind(SEED_PREFIX + "task-pending", f"*.*.*.*.{prov}.#")
    consumer.close()
    private_rabbit.stop()
    server = None
    try:
        server = start_server(
            f"sqlite:///{tmp_path / 'taskyard.sqlite3'}",
            tmp_path / "server",
            extra_args=["--events", private_rabbit.url()],
        )
        queue = server.client()
        outages = lambda: server.log_tail().count("is unavailable")  # noqa: E731
        wait_for(outages, what="the outage's log line", timeout=60)
        first = create(queue, f"{prov}/wt")  # the API serves on
        second = create(queue, f"{prov}/wt")
        assert queue.status(second)["status"]["state"] == "pending"
        assert outages() == 1
    finally:
        private_rabbit.start()
    try:
        wait_for(lambda: "is back after" in server.log_tail(), what="the broker's return", timeout=60)
        consumer = Consumer(private_rabbit.url(), durable_name=durable)
        wait_for(lambda: len(consumer.take()) >= 4, what="the held events", timeout=60)
        keys = {(r.exchange, r.body["status"]["taskId"]) for r in consumer.received}
        assert keys == {(e + "task-pending", t) for e in (TC_PREFIX, SEED_PREFIX) for t in (first, second)}
        consumer.channel.queue_delete(durable)
        consumer.close()
        log = server.log_tail()
        assert log.count("is unavailable") == 1 and log.count("is back after") == 1
        assert "Traceback" not in log and "guest:guest" not in log
    finally:
        server.stop()
