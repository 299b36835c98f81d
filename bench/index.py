"""The index service against a real `taskyard serve`, over HTTP with Hawk, on SQLite and PostgreSQL.

1. findTask   p50 and p99 of sequential findTask calls at random paths of N indexed tasks (default
              1,000,000), after 50 warm-ups. The entries are written in SQL before the server
              starts (1,000 namespaces of 1,000 entries), as a long-lived index would hold them.
2. listTasks  p50 of a page of 100 entries of a namespace of 1,000.
3. indexed    C tasks (default 50) with a route `index.bench.latency.t<i>`, each created, claimed and
              reported completed over HTTP; the time from reportCompleted's answer until findTask
              finds it (polled every 2 ms), p50 and p99.

Aims: findTask p50 <= 2 ms at 1,000,000 entries on both databases; completion -> indexed p50 <= 50 ms.
Figures are printed, never asserted.
Run: .venv/bin/python bench/index.py [--entries N] [--backends sqlite,postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import secrets
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from lifecycle import (
    ROOT_CLIENT_ID,
    Api,
    Creds,
    Server,
    ms,
    percentile,
    scratch_database,
    slugid,
    task_definition,
    taskyard_command,
)

from taskyard.storage import open_storage

NAMESPACES = 1000
DAY_MS = 24 * 3600 * 1000
now = time.perf_counter


def path_of(i: int) -> tuple[str, str]:
    return f"bench.ns{i // NAMESPACES}", f"t{i % NAMESPACES}"


async def fill(db_url: str, entries: int) -> float:
    """Migrate the database and write `entries` index entries (and their namespaces) in SQL."""
    storage = await open_storage(db_url)
    await storage.close()
    started = now()
    expires = int(time.time() * 1000) + 30 * DAY_MS
    task_id = slugid()
    spaces = (entries + NAMESPACES - 1) // NAMESPACES
    if db_url.startswith("sqlite"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as db:
            rows = ((*path_of(i), 0, task_id, "{}", expires) for i in range(entries))
            db.executemany("INSERT INTO indexed_tasks VALUES (?, ?, ?, ?, ?, ?)", rows)
            db.execute("INSERT INTO index_namespaces VALUES ('', 'bench', ?)", (expires,))
            db.executemany(
                "INSERT INTO index_namespaces VALUES ('bench', ?, ?)",
                ((f"ns{n}", expires) for n in range(spaces)),
            )
            db.execute("ANALYZE")
    else:
        import asyncpg

        conn = await asyncpg.connect(db_url)
        try:
            await conn.execute(
                "INSERT INTO indexed_tasks SELECT 'bench.ns' || (i / $1), 't' || (i % $1), 0, $2, '{}', $3"
                " FROM generate_series(0, $4 - 1) AS i",
                NAMESPACES,
                task_id,
                expires,
                entries,
            )
            await conn.execute("INSERT INTO index_namespaces VALUES ('', 'bench', $1)", expires)
            await conn.execute(
                "INSERT INTO index_namespaces SELECT 'bench', 'ns' || n, $1"
                " FROM generate_series(0, $2 - 1) AS n",
                expires,
                spaces,
            )
            await conn.execute("ANALYZE")
        finally:
            await conn.close()
    return now() - started


class Client:
    """Signed calls to the index and the queue, one keep-alive connection."""

    def __init__(self, root_url: str, token: str) -> None:
        self.api = Api(root_url)
        self.session = self.api.session()
        self.creds = Creds.permanent(ROOT_CLIENT_ID, token)
        self.root_url = root_url

    async def call(self, service: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        url = f"{self.root_url}/api/{service}/v1{path}"
        payload = json.dumps(body).encode() if body is not None else b""
        status, content = await self.session.send(
            method, url, payload, self.session.signed(method, url, payload, self.creds)
        )
        return status, json.loads(content) if content else None

    async def close(self) -> None:
        await self.api.close()


async def time_calls(client: Client, paths: list[str], service: str = "index") -> list[float]:
    took = []
    for path in paths:
        sent = now()
        status, answer = await client.call(service, "GET", path)
        took.append(now() - sent)
        assert status == 200, (path, status, answer)
    return took


async def find_task(client: Client, entries: int, count: int) -> dict[str, float]:
    pick = random.Random(7)
    paths = [f"/task/{'.'.join(path_of(pick.randrange(entries)))}" for _ in range(count + 50)]
    took = (await time_calls(client, paths))[50:]
    return {"p50": ms(percentile(took, 50)), "p99": ms(percentile(took, 99))}


async def list_tasks(client: Client, entries: int, count: int) -> dict[str, float]:
    spaces = max(1, entries // NAMESPACES)
    pick = random.Random(8)
    paths = [f"/tasks/bench.ns{pick.randrange(spaces)}?limit=100" for _ in range(count + 10)]
    took = (await time_calls(client, paths))[10:]
    return {"p50": ms(percentile(took, 50))}


async def completion_to_indexed(client: Client, count: int) -> dict[str, float]:
    queue = f"bench-index/w{secrets.token_hex(3)}"
    group = slugid()
    delays = []
    for i in range(count):
        task_id = slugid()
        definition = task_definition(queue, group) | {"routes": [f"index.bench.latency.t{i}"]}
        status, answer = await client.call("queue", "PUT", f"/task/{task_id}", definition)
        assert status == 200, answer
        worker = {"workerGroup": "bench", "workerId": "w1", "tasks": 1}
        status, answer = await client.call("queue", "POST", f"/claim-work/{queue}", worker)
        assert status == 200 and answer["tasks"], answer
        status, answer = await client.call("queue", "POST", f"/task/{task_id}/runs/0/completed")
        assert status == 200, answer
        done = now()
        while True:
            status, answer = await client.call("index", "GET", f"/task/bench.latency.t{i}")
            if status == 200 and answer["taskId"] == task_id:
                break
            if now() - done > 10:
                raise RuntimeError(f"task {task_id} not indexed after 10 s")
            await asyncio.sleep(0.002)
        delays.append(now() - done)
    return {"p50": ms(percentile(delays, 50)), "p99": ms(percentile(delays, 99))}


async def run_backend(name: str, args: argparse.Namespace) -> dict[str, Any] | None:
    print(f"\n== {name} ==", flush=True)
    data_dir = Path(tempfile.mkdtemp(prefix=f"taskyard-bench-index-{name}-"))
    try:
        async with scratch_database(name) as pg_url:
            if name == "postgres" and pg_url is None:
                return None
            db_url = pg_url or f"sqlite:///{data_dir}/taskyard.sqlite3"
            filled = await fill(db_url, args.entries)
            print(f"  {args.entries:,} entries written in {filled:.1f} s", flush=True)
            token = secrets.token_urlsafe(33)
            server = Server(data_dir, db_url, token, taskyard_command())
            await server.start()
            client = Client(server.root_url, token)
            try:
                results = {
                    "entries": args.entries,
                    "findTask": await find_task(client, args.entries, args.finds),
                    "listTasks": await list_tasks(client, args.entries, args.finds // 5),
                    "indexed": await completion_to_indexed(client, args.completions),
                }
            finally:
                await client.close()
                server.stop()
            print(
                f"  findTask p50 {results['findTask']['p50']:.2f} ms, p99 {results['findTask']['p99']:.2f} ms"
            )
            print(f"  listTasks (100 of a namespace's 1,000) p50 {results['listTasks']['p50']:.2f} ms")
            indexed = results["indexed"]
            print(f"  completion -> indexed p50 {indexed['p50']:.1f} ms, p99 {indexed['p99']:.1f} ms")
            return results
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--finds", type=int, default=500, help="findTask calls timed")
    parser.add_argument("--completions", type=int, default=50)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--json", metavar="FILE", help="also write the figures there")
    args = parser.parse_args(argv)
    results = {name: await run_backend(name, args) for name in args.backends.split(",")}
    print("\nfigure                                 " + "  ".join(f"{n:>10}" for n in results) + "  aim")
    rows = [
        ("findTask p50, ms", "findTask", "p50", "<= 2"),
        ("findTask p99, ms", "findTask", "p99", ""),
        ("listTasks page p50, ms", "listTasks", "p50", ""),
        ("completion -> indexed p50, ms", "indexed", "p50", "<= 50"),
        ("completion -> indexed p99, ms", "indexed", "p99", ""),
    ]
    for label, part, key, aim in rows:
        cells = [f"{r[part][key]:>10.2f}" if r else f"{'-':>10}" for r in results.values()]
        print(f"{label:<39}" + "  ".join(cells) + f"  {aim}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
