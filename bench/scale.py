"""How taskyard's costs grow with the size of its data, against a real `taskyard serve` process.

For each backend (SQLite in a temporary data directory, PostgreSQL in a scratch database) it starts
the server as a subprocess and drives it over HTTP with Hawk-signed requests (bench/lifecycle.py's
clients and helpers). Five measurements, each beside its aim:

1. claimWork      p50 of sequential claimWork(tasks=1) at each backlog of --sizes (1k, 100k, 1M
                  pending tasks in one task queue); aim: the largest within 1.5x of the smallest.
2. listTaskGroup  p50 of one page (--page-size tasks) at the start of groups of --group-sizes
                  tasks (10, 10k, 100k), and deep in them (from the continuationToken of the
                  group's last page of 1,000, found by paging through it); aim: flat.
3. dependents     a task with --dependents (10,000) dependents completes: the delay from its
                  reportCompleted until every dependent is pending; aim: <= 2 s.
4. memory         the server's VmRSS and VmHWM (/proc) once the largest backlog is filled, and after
                  its claims; aim: RSS <= 200 MB.
5. ready          from spawning `taskyard serve` to its first answered ping, on a fresh database
                  and again on the one holding the largest backlog; aim (SQLite): <= 1 s.

The smallest backlog and the groups' first ten tasks are created over HTTP; the rest are copies of
such a task written in SQL (its tasks, pending_runs and poll_messages rows, under new ids), as
createTask writes them. The dependents are created over HTTP. Printed, never asserted; see
bench/README.md. Run: .venv/bin/python bench/scale.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).parent.parent
if str(ROOT) not in sys.path:  # run as a script: `bench.lifecycle` is imported from the checkout
    sys.path.insert(0, str(ROOT))

from bench import lifecycle as lc  # noqa: E402
from bench.lifecycle import Api, Creds, Server, ms, now, percentile, slugid  # noqa: E402

AIMS = {
    "claim_ratio": 1.5,  # largest backlog's p50 / smallest's
    "group_ratio": 1.5,  # a page's p50 in the largest group / in the smallest ("flat")
    "dependents_s": 2.0,
    "rss_mb": 200.0,
    "ready_s": 1.0,  # SQLite
}
FULL: dict[str, Any] = {
    "sizes": "1000,100000,1000000",
    "group_sizes": "10,10000,100000",
    "dependents": 10_000,
}
QUICK: dict[str, Any] = {"sizes": "1000,10000,50000", "group_sizes": "10,1000,10000", "dependents": 1000}
STOP = threading.Event()  # tells a filling thread to stop between chunks (Ctrl-C)
WORKER = {"workerGroup": "scale", "workerId": "scale-0", "tasks": 1}


# --------------------------------------------------------------------------- the server


class TimedServer(Server):
    """lifecycle's Server, started with a finer ping loop that times spawn -> first answered ping."""

    ready_s: float = float("nan")
    ready_cpu_s: float = float("nan")  # the server's own CPU until then: steadier on a busy machine

    async def start(self) -> None:
        cmd = [*self.command, "serve", "--port", str(self.port), "--data-dir", str(self.data_dir)]
        cmd += ["--db", self.db_url] if self.db_url else []
        env = {k: v for k, v in os.environ.items() if not k.startswith("TASKYARD_")}
        env.update(TASKYARD_ROOT_ACCESS_TOKEN=self.token, TASKYARD_LOG_LEVEL="WARNING")
        url = f"{self.root_url}/api/queue/v1/ping"
        async with httpx.AsyncClient(timeout=2) as client:
            with self.log_path.open("ab") as log:
                spawned = now()
                self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            lc.RUNNING.append(self.proc)
            while now() - spawned < 60:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"taskyard serve exited with {self.proc.returncode}:\n{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(url)).status_code == 200:
                        self.ready_s = now() - spawned
                        self.ready_cpu_s = lc.proc_cpu_seconds(self.proc.pid)
                        return
                await asyncio.sleep(0.01)
        raise RuntimeError(f"taskyard serve did not answer ping within 60 s:\n{self.log_tail()}")


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of the process, in MB (the kernel reports kB)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}


async def settle(server: Server, quiet: float = 0.1, give_up: float = 30.0) -> None:
    """Wait until the server is idle (under `quiet` of a core over half a second): the work a step
    left behind (events to relay, dependents to announce) must not be timed by the next step."""
    started = now()
    while now() - started < give_up:
        before = lc.proc_cpu_seconds(server.pid)
        await asyncio.sleep(0.5)
        if lc.proc_cpu_seconds(server.pid) - before < quiet * 0.5:
            return


# --------------------------------------------------------------------------- the database, directly


class Database:
    """Direct SQL on the server's database: bulk copies of a created task, and counts."""

    def __init__(self, server: Server) -> None:
        self.server = server

    async def copy_task(self, template: str, count: int) -> None:
        raise NotImplementedError

    async def pending(self, task_queue_id: str) -> int:
        raise NotImplementedError

    async def any_pending(self, task_queue_id: str) -> str:
        raise NotImplementedError

    async def close(self) -> None:
        pass

    @staticmethod
    def sources(columns: dict[str, list[str]], params: tuple[str, str, str, str]) -> list[str]:
        """The three INSERT ... SELECT statements that copy the template's rows; `params` name the new
        task id, the template's id, the pending run's `inserted` and the poll message's id."""
        new_id, source, inserted, message_id = params
        copy = lc.Backlog.copy_sql
        where = f"s.task_id = {source}"
        return [
            copy("tasks", columns["tasks"], {"task_id": new_id}, where),
            copy("pending_runs", columns["pending_runs"], {"task_id": new_id, "inserted": inserted}, where),
            copy(  # by its primary key (the caller passes the template's message id): no task_id index
                "poll_messages",
                columns["poll_messages"],
                {"task_id": new_id, "message_id": message_id, "inserted": inserted, "visible": inserted},
                f"s.message_id = {source}",
            ),
        ]


class SQLiteDatabase(Database):
    CHUNK = 10_000  # short write transactions: the server keeps working between them

    def _connect(self) -> sqlite3.Connection:
        path = self.server.data_dir / "taskyard.sqlite3"
        return sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)

    async def copy_task(self, template: str, count: int) -> None:
        await asyncio.to_thread(self._copy, template, count)

    def _copy(self, template: str, count: int) -> None:
        conn = self._connect()
        try:
            columns = {
                t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")]
                for t in ("tasks", "pending_runs", "poll_messages")
            }
            statements = self.sources(columns, ("?1", "?2", "?3", "?4"))
            inserted = int(time.time() * 1000)
            sql = "SELECT message_id FROM poll_messages WHERE task_id = ?"
            template_message = conn.execute(sql, (template,)).fetchone()[0]
            for start in range(0, count, self.CHUNK):
                if STOP.is_set():
                    return
                rows = [
                    (slugid(), template, inserted, str(uuid.uuid4()))
                    for _ in range(min(self.CHUNK, count - start))
                ]
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(statements[0], [r[:2] for r in rows])
                conn.executemany(statements[1], [r[:3] for r in rows])
                conn.executemany(statements[2], [(r[0], template_message, *r[2:]) for r in rows])
                conn.execute("COMMIT")
        finally:
            conn.close()

    async def pending(self, task_queue_id: str) -> int:
        def count() -> int:
            conn = self._connect()
            try:
                sql = "SELECT count(*) FROM pending_runs WHERE task_queue_id = ?"
                return int(conn.execute(sql, (task_queue_id,)).fetchone()[0])
            finally:
                conn.close()

        return await asyncio.to_thread(count)

    async def any_pending(self, task_queue_id: str) -> str:
        def first() -> str:
            conn = self._connect()
            try:
                sql = "SELECT task_id FROM pending_runs WHERE task_queue_id = ? LIMIT 1"
                return str(conn.execute(sql, (task_queue_id,)).fetchone()[0])
            finally:
                conn.close()

        return await asyncio.to_thread(first)


class PostgresDatabase(Database):
    CHUNK = 20_000

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        self.conn: Any = None

    async def _conn(self) -> Any:
        import asyncpg

        if self.conn is None:
            self.conn = await asyncpg.connect(self.server.db_url)
        return self.conn

    async def copy_task(self, template: str, count: int) -> None:
        conn = await self._conn()
        columns = {}
        for table in ("tasks", "pending_runs", "poll_messages"):
            sql = "SELECT column_name FROM information_schema.columns WHERE table_name = $1"
            sql += " ORDER BY ordinal_position"
            columns[table] = [r["column_name"] for r in await conn.fetch(sql, table)]
        statements = self.sources(columns, ("ids.id", "$2", "$3", "ids.mid"))
        ids_join = " CROSS JOIN unnest($1::text[], $4::text[]) AS ids(id, mid)"
        statements = [s.replace(" s WHERE", " s" + ids_join + " WHERE") for s in statements]
        inserted = int(time.time() * 1000)
        sql = "SELECT message_id FROM poll_messages WHERE task_id = $1"
        template_message = await conn.fetchval(sql, template)
        for start in range(0, count, self.CHUNK):
            if STOP.is_set():
                return
            n = min(self.CHUNK, count - start)
            ids, mids = [slugid() for _ in range(n)], [str(uuid.uuid4()) for _ in range(n)]
            async with conn.transaction():
                # asyncpg wants every $n a statement names: pad unused ones with a no-op condition.
                await conn.execute(
                    statements[0] + " AND $3::bigint IS NOT NULL", ids, template, inserted, mids
                )
                await conn.execute(statements[1], ids, template, inserted, mids)
                await conn.execute(statements[2], ids, template_message, inserted, mids)
        # What autovacuum would have done by the time a real backlog reached this size.
        await conn.execute("ANALYZE tasks; ANALYZE pending_runs; ANALYZE poll_messages")

    async def pending(self, task_queue_id: str) -> int:
        conn = await self._conn()
        return int(
            await conn.fetchval("SELECT count(*) FROM pending_runs WHERE task_queue_id = $1", task_queue_id)
        )

    async def any_pending(self, task_queue_id: str) -> str:
        conn = await self._conn()
        sql = "SELECT task_id FROM pending_runs WHERE task_queue_id = $1 LIMIT 1"
        return str(await conn.fetchval(sql, task_queue_id))

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()
            self.conn = None


# --------------------------------------------------------------------------- the measurements


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


# --------------------------------------------------------------------------- a backend


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


# --------------------------------------------------------------------------- the table


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


Row = tuple[str, tuple[Any, ...], str, str]  # label, path into a backend's results, format, aim


def dig(results: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        results = results.get(key) if isinstance(results, dict) else None
    return results


def table_rows(args: argparse.Namespace) -> list[Row]:
    big = f"{args.sizes[-1]:,}"
    rows: list[Row] = [
        (f"claimWork p50, {n:,} pending (ms)", ("claim", "p50", n), ".2f", "") for n in args.sizes
    ]
    rows.append(
        (
            "  claimWork ratio, largest / smallest backlog",
            ("claim", "ratio"),
            ".2f",
            f"<= {AIMS['claim_ratio']}",
        )
    )
    rows += [
        (f"listTaskGroup {where} page, group of {n:,} (ms)", ("group", where, n), ".2f", "")
        for where in ("first", "last")
        for n in args.group_sizes
    ]
    rows.append(
        (
            "  listTaskGroup ratio, largest / smallest group (worse page)",
            ("group", "ratio"),
            ".2f",
            "flat, <= 1.5",
        )
    )
    deps = f"{args.dependents:,} dependents all pending after completion (s)"
    rows.append((deps, ("dependents", "all_pending_s"), ".2f", f"<= {AIMS['dependents_s']}"))
    for moment, key in (("filled", "memory_filled"), ("after claims", "memory_claimed")):
        rows.append(
            (
                f"server VmRSS, {big} pending, {moment} (MB)",
                ("claim", key, "VmRSS"),
                ".0f",
                f"<= {AIMS['rss_mb']:.0f}",
            )
        )
        rows.append((f"server VmHWM, {big} pending, {moment} (MB)", ("claim", key, "VmHWM"), ".0f", ""))
    for which, label in (("fresh", "fresh database"), ("existing", f"existing database with {big} pending")):
        rows.append(
            (
                f"serve ready, {label} (ms)",
                (f"ready_{which}_ms",),
                ".0f",
                f"<= {AIMS['ready_s'] * 1000:.0f} (SQLite)",
            )
        )
        rows.append(("  the server's CPU until then (ms)", (f"ready_{which}_cpu_ms",), ".0f", ""))
    return rows


def render_table(all_results: dict[str, dict[str, Any] | None], args: argparse.Namespace) -> str:
    backends = list(all_results)
    rows = table_rows(args)
    width = max(len(label) for label, _, _, _ in rows) + 2
    lines = ["".join([f"{'':<{width}}", *(f"{b:>12}" for b in backends), "   aim"])]
    for label, path, spec, aim in rows:
        cells = [
            fmt(dig(all_results[b], path), spec) if all_results[b] is not None else "skipped"
            for b in backends
        ]
        lines.append("".join([f"{label:<{width}}", *(f"{c:>12}" for c in cells), f"   {aim}"]))
    return "\n".join(lines)


# --------------------------------------------------------------------------- options and main


def sizes(text: str) -> list[int]:
    try:
        values = sorted({int(v.replace("_", "")) for v in text.split(",") if v.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected whole numbers separated by commas, got {text!r}"
        ) from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"expected sizes of at least 1, got {text!r}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a fast sanity run: backlogs {QUICK['sizes']}, groups {QUICK['group_sizes']},"
        f" {QUICK['dependents']} dependents",
    )
    p.add_argument("--sizes", type=sizes, default=None, help=f"claimWork backlogs (default {FULL['sizes']})")
    p.add_argument(
        "--group-sizes", type=sizes, default=None, help=f"task group sizes (default {FULL['group_sizes']})"
    )
    p.add_argument(
        "--dependents",
        type=int,
        default=None,
        help=f"dependents of the one task (default {FULL['dependents']:,})",
    )
    p.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    p.add_argument("--skip", default="", help="comma-separated steps to leave out: dependents, group, claim")
    p.add_argument(
        "--claim-samples", type=int, default=200, help="timed claimWork calls per backlog (default 200)"
    )
    p.add_argument(
        "--page-samples", type=int, default=20, help="timed listTaskGroup calls per page (default 20)"
    )
    p.add_argument(
        "--page-size", type=int, default=10, help="listTaskGroup limit: tasks per page (default 10)"
    )
    p.add_argument(
        "--http-tasks",
        type=int,
        default=1000,
        help="backlog tasks created over HTTP before SQL copies (default 1000)",
    )
    p.add_argument(
        "--create-inflight", type=int, default=16, help="createTask requests in flight (default 16)"
    )
    args = p.parse_args(argv)
    preset = QUICK if args.quick else FULL
    args.sizes = args.sizes or sizes(str(preset["sizes"]))
    args.group_sizes = args.group_sizes or sizes(str(preset["group_sizes"]))
    args.dependents = args.dependents or int(preset["dependents"])
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    args.skip = {s for s in args.skip.split(",") if s}
    if unknown := [b for b in args.backends if b not in ("sqlite", "postgres")]:
        p.error(f"--backends: unknown {unknown}; choose from sqlite, postgres")
    if unknown := args.skip - {"dependents", "group", "claim"}:
        p.error(f"--skip: unknown {sorted(unknown)}; choose from dependents, group, claim")
    if args.sizes[0] < args.claim_samples + 20:
        p.error(f"--sizes: the smallest backlog must exceed --claim-samples ({args.claim_samples}) by 20")
    return args


async def main_async(args: argparse.Namespace) -> None:
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"taskyard scale bench ({'quick' if args.quick else 'full'}); {lc.CPUS} CPUs, load average {load}")
    started = now()
    all_results = {name: await run_backend(name, args) for name in args.backends}
    print("\n" + render_table(all_results, args))
    print(f"\n(total {now() - started:.0f} s; this machine's timings, printed, never asserted)")


def _interrupt(signum: int, frame: object) -> None:
    STOP.set()
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # like Ctrl-C: servers stopped, scratch databases dropped
    try:
        asyncio.run(main_async(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        STOP.set()
        lc.kill_leftovers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
