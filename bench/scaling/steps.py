"""The measurements (claimWork, listTaskGroup, dependents) and a backend's run of them, with the
server's readiness and memory."""

from __future__ import annotations

import argparse
import asyncio
import secrets
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import lifecycle as lc
from bench.lifecycle import Api, Creds, ms, now, percentile, slugid
from bench.scaling.database import Database, PostgresDatabase, SQLiteDatabase
from bench.scaling.server import TimedServer, memory_mb, settle

WORKER = {"workerGroup": "scale", "workerId": "scale-0", "tasks": 1}


class Bench:
    def __init__(self, server: TimedServer, db: Database, args: argparse.Namespace) -> None:
        self.server, self.db, self.args = server, db, args
        self.api = Api(server.root_url, "raw")
        self.root = Creds.permanent(lc.ROOT_CLIENT_ID, server.token)
        self.session = self.api.session()

    async def create(self, definition: dict[str, Any], count: int) -> list[str]:
        created, _, _ = await lc.create_many(
            self.api, self.root, definition, count, self.args.create_inflight
        )
        if len(created) != count:
            raise RuntimeError(f"created {len(created)} of {count} tasks: {dict(self.api.errors)}")
        return created

    async def copy(self, template: str, count: int) -> None:
        if count > 0:
            started = now()
            await self.db.copy_task(template, count)
            print(f"    copied {count:,} tasks in SQL in {now() - started:.1f} s")

    async def fill(self, definition: dict[str, Any], pending: int, size: int) -> None:
        """Bring a task queue from `pending` tasks to `size`: the first ones over HTTP, then copies."""
        if pending == 0:
            created = await self.create(definition, min(size, self.args.http_tasks))
            pending = len(created)
        template = await self.db.any_pending(definition["taskQueueId"])
        await self.copy(template, size - pending)

    async def claims(self, task_queue_id: str, count: int) -> list[float]:
        return await lc.measure_claims(self.api, self.root, task_queue_id, count)

    async def claim_curve(self) -> dict[str, Any]:
        """claimWork p50 at each backlog, growing one task queue; memory at the largest."""
        queue = lc.new_queue("scale")
        definition = lc.task_definition(queue, slugid())
        result: dict[str, Any] = {"p50": {}, "p99": {}}
        pending = 0
        for size in self.args.sizes:
            await self.fill(definition, pending, size)
            if size == self.args.sizes[-1]:
                result["memory_filled"] = memory_mb(self.server.pid)
            await settle(self.server)
            latencies = await self.claims(queue, self.args.claim_samples)
            result["p50"][size], result["p99"][size] = (
                ms(percentile(latencies, 50)),
                ms(percentile(latencies, 99)),
            )
            pending = size - len(latencies) - 10
            print(
                f"    {size:,} pending: claimWork p50 {result['p50'][size]:.2f} ms,"
                f" p99 {result['p99'][size]:.2f}"
            )
        result["memory_claimed"] = memory_mb(self.server.pid)
        p50s = result["p50"]
        result["ratio"] = p50s[self.args.sizes[-1]] / p50s[self.args.sizes[0]]
        return result

    async def page(self, group: str, token: str | None) -> float:
        path = f"/task-group/{group}/list?limit={self.args.page_size}"
        path += f"&continuationToken={token}" if token else ""
        sent = now()
        status, body = await self.session.call("GET", path, None, self.root)
        if status != 200 or len(body["tasks"]) == 0:
            raise RuntimeError(f"listTaskGroup answered {status}")
        return now() - sent

    async def deep_token(self, group: str) -> str | None:
        """The continuationToken that lists the group's last 1,000 tasks or fewer (None: one page),
        found by walking it as a client would."""
        token = None
        while True:
            path = f"/task-group/{group}/list?limit=1000"
            path += f"&continuationToken={token}" if token else ""
            status, body = await self.session.call("GET", path, None, self.root)
            if status != 200:
                raise RuntimeError(f"listTaskGroup answered {status}")
            if "continuationToken" not in body:
                return token
            token = body["continuationToken"]

    async def group_curve(self) -> dict[str, Any]:
        """listTaskGroup: one page at the start and one at the end of each group size."""
        result: dict[str, Any] = {"first": {}, "last": {}}
        for size in self.args.group_sizes:
            group = slugid()
            created = await self.create(lc.task_definition(lc.new_queue("group"), group), min(size, 10))
            await self.copy(created[0], size - len(created))
            last = await self.deep_token(group)
            await settle(self.server)  # the tasks just created over HTTP: their events relayed
            for where, token in (("first", None), ("last", last)):
                samples = [await self.page(group, token) for _ in range(self.args.page_samples + 10)][10:]
                result[where][size] = ms(percentile(samples, 50))
            print(
                f"    group of {size:,}: first page {result['first'][size]:.2f} ms,"
                f" last {result['last'][size]:.2f}"
            )
        sizes = self.args.group_sizes
        result["ratio"] = max(result[w][sizes[-1]] / result[w][sizes[0]] for w in ("first", "last"))
        return result

    async def dependents(self) -> dict[str, Any]:
        """One task with N dependents completes: how long until all N are pending."""
        n, group = self.args.dependents, slugid()
        required = lc.task_definition(lc.new_queue("required"), group)
        (required_id,) = await self.create(required, 1)
        dependent = {**lc.task_definition(lc.new_queue("dependents"), group), "dependencies": [required_id]}
        started = now()
        await self.create(dependent, n)
        print(f"    created {n:,} dependents over HTTP in {now() - started:.1f} s")
        status, claim = await self.session.call(
            "POST", f"/claim-work/{required['taskQueueId']}", WORKER, self.root
        )
        if status != 200 or not claim["tasks"]:
            raise RuntimeError(f"could not claim the required task ({status})")
        if not await lc.complete_claim(self.session, claim["tasks"][0]):
            raise RuntimeError("reportCompleted failed")
        completed, first = now(), None
        while (count := await self.db.pending(dependent["taskQueueId"])) < n and now() - completed < 120:
            first = first or (now() - completed if count else None)
            await asyncio.sleep(0.02)
        took = now() - completed
        print(f"    {count:,} of {n:,} dependents pending {took:.2f} s after reportCompleted")
        return {"all_pending_s": took if count >= n else None, "first_pending_s": first, "pending": count}


async def run_backend(name: str, args: argparse.Namespace) -> dict[str, Any] | None:
    print(f"\n== {name} ==")
    data_dir = Path(tempfile.mkdtemp(prefix=f"taskyard-scale-{name}-"))
    try:
        async with lc.scratch_database(name) as db_url:
            if name == "postgres" and db_url is None:
                return None
            server = TimedServer(data_dir, db_url, secrets.token_urlsafe(33), lc.taskyard_command())
            db: Database = PostgresDatabase(server) if db_url else SQLiteDatabase(server)
            try:
                return await measure(server, db, args)
            finally:
                await db.close()
                server.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


async def measure(server: TimedServer, db: Database, args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    await server.start()
    results["ready_fresh_ms"], results["ready_fresh_cpu_ms"] = ms(server.ready_s), ms(server.ready_cpu_s)
    print(f"  taskyard serve pid {server.pid} ready in {server.ready_s * 1000:.0f} ms (fresh database)")
    bench = Bench(server, db, args)
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("dependents", bench.dependents),
        ("group", bench.group_curve),
        ("claim", bench.claim_curve),
    ]
    try:
        for key, step in steps:
            if key in args.skip:
                continue
            print(f"  {key}:")
            await settle(server)
            try:
                results[key] = await step()
            except Exception as exc:
                print(f"    {key} failed: {exc!r}\n    server log tail:\n{server.log_tail()}")
    finally:
        await bench.api.close()
    server.stop()
    await server.start()  # the same data: the largest backlog, the groups, the dependents
    results["ready_existing_ms"], results["ready_existing_cpu_ms"] = (
        ms(server.ready_s),
        ms(server.ready_cpu_s),
    )
    print(f"  ready in {server.ready_s * 1000:.0f} ms on the existing database")
    return results
