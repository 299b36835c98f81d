"""The task-graph scheduler: creating big graphs, and completion-to-pending latency of dependents.

Everything runs in this process as `taskyard serve` composes it (storage, queue, outbox relay on
the in-process bus, the queue's resolvers, the scheduler consuming the bus), without HTTP:

1. create   a fan-out graph (1 root -> N-1 dependents, default N = 10,000) through createTaskGraph:
            the time from the call to its answer (the graph and every task committed).
2. fan-out  the root is claimed and completed; the time until each dependent's task-pending
            event reached a subscriber: first, p50, last.
3. chain    a chain of C tasks (default 1,000), each requiring the one before, created, then
            completed one at a time: for each, the time from reportCompleted's commit to the next
            task's task-pending event. The graph ends finished.

Figures are printed, never asserted. Targets (PostgreSQL): create 10,000 tasks in <= 10 s,
chain p50 <= 20 ms and p99 <= 100 ms.
Run: .venv/bin/python bench/scheduler.py [--postgres ADMIN_URL] [--tasks N] [--chain C]
(SQLite in a temporary directory unless --postgres names a server to make a scratch database on).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from events import scratch_database
from taskyard.config import QueueConfig
from taskyard.events.memory import MemoryBus
from taskyard.events.outbox import OutboxRelay
from taskyard.events.port import Envelope
from taskyard.model import dates, slugid
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, resolvers
from taskyard.queue.service import Queue
from taskyard.scheduler import graphs, reactions
from taskyard.scheduler.service import Scheduler
from taskyard.storage import open_storage
from taskyard.storage.port import Storage

TQ = "bench/graph"
CHAIN_TQ = "bench/chain"
WORKER = ("bench", "w1")
SCOPES = ["queue:create-task:*", "queue:scheduler-id:task-graph-scheduler"]
META = {
    "name": "bench",
    "description": "bench",
    "owner": "bench@example.com",
    "source": "https://example.com/bench",
}


def node(task_id: str, requires: list[str], task_queue_id: str = TQ) -> dict[str, Any]:
    now = dates.now_ms()
    task = {
        "taskQueueId": task_queue_id,
        "created": dates.to_iso(now),
        "deadline": dates.to_iso(now + dates.HOUR),
        "payload": {},
        "metadata": META,
    }
    return {"taskId": task_id, "requires": requires, "task": task}


class Pending:
    """When each task's task-pending event reached this subscriber."""

    def __init__(self, bus: MemoryBus) -> None:
        self.at: dict[str, float] = {}
        self.arrived = asyncio.Event()
        bus.subscribe("exchange/taskcluster-queue/v1/task-pending", "#", self.seen)

    def seen(self, envelope: Envelope) -> None:
        self.at.setdefault(envelope.body["status"]["taskId"], time.perf_counter())
        self.arrived.set()

    async def until(self, task_ids: list[str]) -> None:
        while not all(t in self.at for t in task_ids):
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 60)


@contextlib.asynccontextmanager
async def deployment(storage: Storage) -> AsyncIterator[tuple[Scheduler, Pending]]:
    bus = MemoryBus()
    relay = OutboxRelay(storage, bus)
    queue = Queue(storage, QueueConfig(), credentials_issuer=("bench", "x"), events_committed=relay.kick)
    await queue.start()

    async def expand(scopes: Any) -> list[str]:
        return list(scopes)

    scheduler = Scheduler(queue, expand=expand)
    pending = Pending(bus)
    reactions.subscribe(scheduler, bus, ("tc",))
    loops = [asyncio.create_task(relay.run()), *resolvers.start_all(queue)]
    try:
        yield scheduler, pending
    finally:
        for loop in loops:
            loop.cancel()
        await asyncio.wait(loops, timeout=5)
        await bus.close()


async def complete(s: Scheduler, task_id: str, task_queue_id: str = TQ) -> float:
    """Claim and complete `task_id`; when its completion committed."""
    found = await claims.claim_pending(s.queue, task_queue_id, WORKER, 1)
    assert found and found[0]["status"]["taskId"] == task_id, found
    await claims.report(s.queue, task_id, 0, "completed", "completed")
    return time.perf_counter()


def ms(values: list[float]) -> str:
    values = sorted(v * 1000 for v in values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"p50 {statistics.median(values):.1f} ms, p99 {p99:.1f} ms, max {values[-1]:.1f} ms"


async def fan_out(s: Scheduler, pending: Pending, n: int) -> None:
    root = slugid.nice()
    ids = [slugid.nice() for _ in range(n - 1)]
    body = {"scopes": SCOPES, "metadata": META, "tasks": [node(root, []), *(node(t, [root]) for t in ids)]}
    start = time.perf_counter()
    await graphs.create_task_graph(s, slugid.nice(), body, guard=ALLOW_ALL)
    took = time.perf_counter() - start
    print(f"create   {n} tasks (fan-out 1 -> {n - 1}): {took:.2f} s ({n / took:.0f} tasks/s)")
    await pending.until([root])
    done = await complete(s, root)
    await pending.until(ids)
    after = sorted(pending.at[t] - done for t in ids)
    print(
        f"fan-out  {n - 1} dependents pending after the root completed: first {after[0] * 1000:.0f} ms, "
        f"p50 {statistics.median(after) * 1000:.0f} ms, last {after[-1] * 1000:.0f} ms"
    )


async def chain(s: Scheduler, pending: Pending, c: int) -> None:
    ids = [slugid.nice() for _ in range(c)]
    body = {
        "scopes": SCOPES,
        "metadata": META,
        "tasks": [node(t, ids[i - 1 : i], CHAIN_TQ) for i, t in enumerate(ids)],
    }
    graph_id = slugid.nice()
    start = time.perf_counter()
    await graphs.create_task_graph(s, graph_id, body, guard=ALLOW_ALL)
    print(f"create   a chain of {c} tasks: {time.perf_counter() - start:.2f} s")
    await pending.until(ids[:1])
    latencies = []
    for before, after in itertools.pairwise(ids):
        done = await complete(s, before, CHAIN_TQ)
        await pending.until([after])
        latencies.append(pending.at[after] - done)
    await complete(s, ids[-1], CHAIN_TQ)
    for _ in range(500):
        if (await graphs.status(s, graph_id))["status"]["state"] == "finished":
            break
        await asyncio.sleep(0.01)
    state = (await graphs.status(s, graph_id))["status"]["state"]
    print(f"chain    completion -> next task pending ({c - 1} samples): {ms(latencies)}; graph {state}")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--postgres", default="", help="a PostgreSQL server's URL, to run on a scratch database there"
    )
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks of the fan-out graph")
    parser.add_argument("--chain", type=int, default=1000, help="tasks of the chain")
    args = parser.parse_args()
    async with scratch_database(args.postgres) as db_url:
        storage = await open_storage(db_url)
        try:
            print(f"storage {'PostgreSQL' if args.postgres else 'SQLite'}")
            async with deployment(storage) as (scheduler, pending):
                await fan_out(scheduler, pending, args.tasks)
                await chain(scheduler, pending, args.chain)
        finally:
            await storage.close()


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())
