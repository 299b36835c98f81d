"""Events through RabbitMQ: the relay's publish rate with confirms, and commit-to-consumer latency.

1. rate      N task-pending events are written to the outbox (in transactions of 100), then the
             relay drains it through the RabbitMQ bus, each batch recorded published only once the broker
             confirmed it; events/s = N / drain time. With both profiles each event is two
             messages (tc and seed). A consumer bound to both checks every message arrived.
             The consumer reads them only afterwards, so that it takes no CPU from the relay.
2. latency   one event at a time is committed to the outbox (the relay kicked after commit, as the
             queue does); latency = commit returned -> a consumer in this process received it.
3. stream    the same, but the consumer is a client of the HTTP event stream
             (`GET /api/events/v1/stream`, served by uvicorn on a local port, read with httpx): the
             relay logs each batch, the feed wakes on its notification and writes the SSE event.
             With `--amqp memory://` the relay publishes to the in-process bus and phases 1 and 2
             are skipped.

Figures are printed, never asserted. Run: .venv/bin/python bench/events.py [--events N]
(default broker amqp://guest:guest@127.0.0.1:5672/, SQLite in a temporary directory; with
--postgres ADMIN_URL, a scratch database made on that server for the run and dropped after).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import aio_pika
import httpx
import orjson
import uvicorn

from taskyard.api.app import Services, build_app
from taskyard.auth import hawk_client, static
from taskyard.auth.service import Auth
from taskyard.config import QueueConfig
from taskyard.events.amqp import AmqpBus
from taskyard.events.feed import EventFeed
from taskyard.events.memory import MemoryBus
from taskyard.events.outbox import OutboxRelay, append_tx
from taskyard.events.port import EventBus
from taskyard.events.profiles import SEED_PREFIX, TC_PREFIX, Profiles
from taskyard.model import dates, slugid
from taskyard.model.messages import Message, task_message
from taskyard.queue.service import Queue
from taskyard.scheduler.service import Scheduler
from taskyard.secrets.service import Secrets
from taskyard.storage import open_storage
from taskyard.storage.port import Storage


def pending_event(provisioner: str, stamp: float = 0.0) -> Message:
    task_id = slugid.nice()
    status = {
        "taskId": task_id,
        "provisionerId": provisioner,
        "workerType": "bench",
        "taskQueueId": f"{provisioner}/bench",
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
    definition = {"routes": ["index.bench.a"], "tags": {"stamp": repr(stamp)}}
    return task_message("task-pending", status, definition, run_id=0)


class Counter:
    """A consumer of both profiles' task-pending for one provisioner, in this process."""

    def __init__(self) -> None:
        self.count = 0
        self.latencies: list[float] = []
        self.waiting: asyncio.Event = asyncio.Event()
        self.expect = 0
        self.what = "AMQP consumer"
        self.per_event = 1  # messages each event brings: one per exchange bound

    async def bind(self, url: str, provisioner: str, exchanges: list[str]) -> aio_pika.abc.AbstractConnection:
        connection = await aio_pika.connect(url)
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=1000)
        self.queue = await channel.declare_queue("", exclusive=True, auto_delete=True)
        self.per_event = len(exchanges)
        for exchange in exchanges:
            pattern = f"*.*.*.*.{provisioner}.#" if exchange.startswith(SEED_PREFIX) else f"#.{provisioner}.#"
            await channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC, durable=True)
            await self.queue.bind(exchange, pattern)
        return connection

    async def consume(self) -> None:
        await self.queue.consume(self.on_message, no_ack=True)

    async def on_message(self, message: aio_pika.abc.AbstractIncomingMessage) -> None:
        now = time.perf_counter()
        self.count += 1
        if message.exchange.startswith(TC_PREFIX):
            stamp = float(orjson.loads(message.body)["task"]["tags"]["stamp"])
            if stamp:
                self.latencies.append(now - stamp)
        if self.count >= self.expect:
            self.waiting.set()

    async def wait_for(self, total: int, timeout: float = 120) -> None:
        self.expect = total
        if self.count < total:
            self.waiting.clear()
            await asyncio.wait_for(self.waiting.wait(), timeout)


async def fill(storage: Storage, provisioner: str, n: int) -> None:
    for start in range(0, n, 100):
        async with storage.transaction() as tx:
            await append_tx(
                tx, [pending_event(provisioner) for _ in range(min(100, n - start))], now=dates.now_ms()
            )


async def measure_rate(storage: Storage, bus: AmqpBus, counter: Counter, provisioner: str, n: int) -> None:
    await fill(storage, provisioner, n)
    relay = OutboxRelay(storage, bus)
    began, cpu = time.perf_counter(), time.process_time()
    drained = 0
    while moved := await relay.relay_once():
        drained += moved
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    per_event = len(bus.profiles.names)
    print(
        f"rate:    {drained} events in {elapsed:.2f} s = {drained / elapsed:,.0f} events/s "
        f"({drained * per_event / elapsed:,.0f} messages/s, profiles {','.join(bus.profiles.names)}), "
        "each batch confirmed before it was recorded published"
    )
    print(
        f"         relay CPU (this process: outbox reads, publishing, the log): "
        f"{cpu / drained * 1e6:.0f} us per event, {cpu / (drained * per_event) * 1e6:.0f} us per message"
    )


async def measure_latency(
    storage: Storage, bus: EventBus, counter: Counter, provisioner: str, n: int
) -> None:
    relay = OutboxRelay(storage, bus, idle_seconds=1.0)
    running = asyncio.create_task(relay.run())
    try:
        for i in range(n):
            async with storage.transaction() as tx:
                tx.after_commit(relay.kick)
                event = pending_event(provisioner, stamp=-1.0)
                stamp = time.perf_counter()  # taken just before commit: the commit is part of it
                body = dict(event.body, task={"tags": {"stamp": repr(stamp)}})
                await append_tx(
                    tx, [Message(event.exchange, event.routing_key, body, event.cc)], now=dates.now_ms()
                )
            await counter.wait_for(counter.count + counter.per_event)
            if i % 50 == 0:
                await asyncio.sleep(0.01)  # let the loop breathe now and then, as a server's would
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    ms = sorted(x * 1000 for x in counter.latencies[-n:])
    p50, p99 = statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(
        f"latency: {len(ms)} events, commit -> {counter.what} p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
        f"max {ms[-1]:.1f} ms"
    )


class StreamClient:
    """An HTTP event-stream client of one provisioner's tc task-pending, in this process."""

    def __init__(self, credentials: tuple[str, str]) -> None:
        self.credentials = credentials  # the client id and access token the stream is read as
        self.count = 0
        self.latencies: list[float] = []
        self.arrived = asyncio.Condition()
        self.what = "SSE client"
        self.per_event = 1  # bound to tc task-pending alone

    async def read(self, url: str, ready: asyncio.Event) -> None:
        # Signed as any client signs it: the server authenticates every request and checks its scopes.
        signed = {"authorization": hawk_client.sign_header("GET", url, None, "", *self.credentials)}
        async with (
            httpx.AsyncClient(timeout=60) as client,
            client.stream("GET", url, headers=signed) as response,
        ):
            assert response.status_code == 200, await response.aread()
            async for line in response.aiter_lines():
                if line.startswith("id: ") and not ready.is_set():
                    ready.set()
                if not line.startswith("data: "):
                    continue
                now = time.perf_counter()
                stamp = float(orjson.loads(line[6:])["body"]["task"]["tags"]["stamp"])
                self.latencies.append(now - stamp)
                async with self.arrived:
                    self.count += 1
                    self.arrived.notify_all()

    async def wait_for(self, total: int, timeout: float = 60) -> None:
        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: self.count >= total), timeout)


async def measure_stream(
    storage: Storage, bus: EventBus, profiles: Profiles, provisioner: str, n: int
) -> None:
    """Phase 3: commit -> an SSE client of a real server's stream."""
    feed = EventFeed(storage, profiles)
    await feed.start()
    auth = Auth(storage, secret_key="bench", static_clients=static.static_clients("bench-token"))
    await auth.start()
    issuer = (static.QUEUE_CLIENT_ID, static.derived_token("bench-token", static.QUEUE_CLIENT_ID))
    queue = Queue(storage, QueueConfig(), credentials_issuer=issuer)
    secrets = Secrets(storage, secret_key="bench")
    services = Services(queue, auth, Scheduler(queue, expand=auth.expand), secrets, events=feed)
    server = uvicorn.Server(uvicorn.Config(build_app(services), port=0, log_level="warning", lifespan="off"))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    binding = f"{TC_PREFIX}task-pending:#.{provisioner}.#"
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/api/events/v1/stream?{urlencode({'binding': binding})}"
    client, ready = StreamClient((static.ROOT_CLIENT_ID, "bench-token")), asyncio.Event()
    reading = asyncio.create_task(client.read(url, ready))
    await asyncio.wait_for(ready.wait(), 30)
    try:
        await measure_latency(storage, bus, client, provisioner, n)
    finally:
        reading.cancel()
        feed.end_streams()
        server.should_exit = True
        await serving
        await feed.close()
        sock.close()


@contextlib.asynccontextmanager
async def scratch_database(admin_url: str) -> AsyncIterator[str]:
    """SQLite in a temporary directory, or a PostgreSQL database made for the run and dropped after."""
    if not admin_url:
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{Path(tmp, 'bench.sqlite3')}"
        return
    import asyncpg  # type: ignore[import-untyped]

    name = f"taskyard_bench_events_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(admin_url)
    try:
        await admin.execute(f"CREATE DATABASE {name}")
        try:
            yield urlsplit(admin_url)._replace(path="/" + name).geturl()  # its ?host=... kept
        finally:
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await admin.close()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--amqp", default="amqp://guest:guest@127.0.0.1:5672/", help="or memory://")
    parser.add_argument(
        "--postgres", default="", help="a PostgreSQL server's URL, to run on a scratch database there"
    )
    parser.add_argument("--events", type=int, default=20000, help="events for the rate phase")
    parser.add_argument("--samples", type=int, default=500, help="events for the latency phases")
    parser.add_argument("--profiles", default="tc,seed")
    args = parser.parse_args()
    async with scratch_database(args.postgres) as db_url:
        storage = await open_storage(db_url)
        profiles = Profiles(args.profiles.split(","), root_url="http://127.0.0.1:8080")
        provisioner = f"bench-{uuid.uuid4().hex[:8]}"
        try:
            if args.amqp.startswith("memory://"):
                bus: EventBus = MemoryBus(profiles)
                print(f"storage {'PostgreSQL' if args.postgres else 'SQLite'}, in-process bus")
            else:
                bus = await amqp_phases(args, storage, profiles, provisioner)
            await measure_stream(storage, bus, profiles, provisioner, args.samples)
            await bus.close()
        finally:
            await storage.close()


async def amqp_phases(
    args: argparse.Namespace, storage: Storage, profiles: Profiles, provisioner: str
) -> AmqpBus:
    """Phases 1 and 2, through RabbitMQ; answers the bus for phase 3."""
    bus = AmqpBus(args.amqp, profiles)
    await bus.start()
    await asyncio.wait_for(bus.wait_ready(), 30)
    counter = Counter()
    exchanges = [TC_PREFIX + "task-pending", SEED_PREFIX + "task-pending"]
    exchanges = [e for e in exchanges if e in profiles.exchanges()]
    consumer = await counter.bind(args.amqp, provisioner, exchanges)
    try:
        print(f"storage {'PostgreSQL' if args.postgres else 'SQLite'}, broker {bus.where}")
        await measure_rate(storage, bus, counter, provisioner, args.events)
        await counter.consume()  # only now: the rate is the relay's alone
        await counter.wait_for(args.events * len(exchanges))
        print(f"         the consumer received all {counter.count} messages")
        counter.latencies.clear()
        await measure_latency(storage, bus, counter, provisioner, args.samples)
    finally:
        await consumer.close()
    return bus


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())
