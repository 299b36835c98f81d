"""What the web UI and its neighbours cost the server: the task-group page, and scraping `GET /metrics`.

group     A task group of 100, 1,000 and 10,000 tasks (a tenth of them roots, the others depending
          on one or two earlier tasks of the group; some roots claimed, completed or failed),
          created through the queue's functions, then `GET /groups/<id>` through the app in
          process (httpx's ASGI transport: server time, no network): the p50 of several renders
          of the page (its first 500 rows), of a filtered one (`?state=failed`), of one sorted by the
          last run's duration, longest first (`?sort=-duration`), of the graph page
          (`/graph`) and of every task as JSON (`/rows`, what the page's script fetches), their
          sizes, and how the time grows from one size to the next (a ratio near 10 for ten times
          the tasks: linear). Wall and CPU time: on a busy machine the CPU time is the steadier.
          Aim: the page <= 300 ms at 10,000 tasks.

browser   The same groups opened in chromium (Playwright, /usr/bin/chromium) from a real
          `taskyard serve` on the same database: the p50 of a few loads of `/groups/<id>`, from
          navigation to the page's load event and to the last of its script's work (every row
          fetched and filterable), as the browser's own Navigation Timing reports them. Aim: a
          group of 10,000 tasks opens in under a second. Skipped, with a note, without chromium.

metrics   N pending tasks (default 10,000) spread over Q task queues (default 20), a few of them
          claimed; then `GET /metrics` through the app in-process (httpx's ASGI transport, so no
          network): `fresh` scrapes re-run the database queries each time (the 2 s cache is
          skipped by moving the cache's clock), `cached` ones answer from the cache, as most
          scrapes do when several Prometheus servers scrape one taskyard. Aim: fresh <= 50 ms.

Figures are printed, never asserted. Run: .venv/bin/python bench/ui.py [--only group|browser|metrics]
[--sizes 100,1000,10000] [--tasks N] [--queues Q] [--db-url URL] (default: SQLite in a temporary
directory; a PostgreSQL URL names a scratch database the bench fills and leaves).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from taskyard.api import metrics
from taskyard.api.app import Services, build_app
from taskyard.auth import roles, static
from taskyard.auth.service import Auth
from taskyard.config import QueueConfig
from taskyard.model import dates, slugid
from taskyard.model.guard import ALLOW_ALL
from taskyard.model.task_definition import TaskDefinition
from taskyard.queue import claims, tasks
from taskyard.queue.service import Queue
from taskyard.scheduler.service import Scheduler
from taskyard.secrets.service import Secrets
from taskyard.storage import open_storage
from taskyard.ui.app import Pages

TOKEN = "bench-root-token-bench-root-token"
SCRAPES = 50
GROUP_SIZES = (100, 1_000, 10_000)
BATCH = 1_000  # tasks created per transaction
GROUP_QUEUE = "bench/group"


def definition(task_queue_id: str, name: str = "bench", **more: object) -> dict[str, object]:
    now = dates.now_ms()
    return {
        "taskQueueId": task_queue_id,
        "created": dates.to_iso(now),
        "deadline": dates.to_iso(now + dates.DAY),
        "payload": {},
        "metadata": {
            "name": name,
            "description": "bench/ui.py",
            "owner": "b@example.com",
            "source": "https://x",
        },
        **more,
    }


async def fill(queue: Queue, n: int, queues: int) -> None:
    started = time.perf_counter()
    for i in range(n):
        await tasks.create_task(queue, slugid.nice(), definition(f"bench/q{i % queues}"), guard=ALLOW_ALL)
    for q in range(min(queues, 5)):
        await claims.claim_work(queue, f"bench/q{q}", ("wg", "w"), 10)
    print(f"filled: {n} tasks over {queues} queues in {time.perf_counter() - started:.1f} s")


def summary(name: str, times: list[float]) -> None:
    ms = sorted(t * 1000 for t in times)
    p95 = ms[int(len(ms) * 0.95) - 1]
    print(f"{name:>7}: median {statistics.median(ms):6.2f} ms  p95 {p95:6.2f} ms  max {ms[-1]:6.2f} ms")


async def scrape(client: httpx.AsyncClient) -> tuple[float, int]:
    started = time.perf_counter()
    response = await client.get("/metrics")
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed, len(response.content)


async def open_services(db_url: str) -> Services:
    storage = await open_storage(db_url)
    auth = Auth(storage, secret_key="bench", static_clients=static.static_clients(TOKEN))
    await auth.start()
    # The pages need the API's read scopes (docs/ui.md): the bench's UI is public, as an operator
    # makes it, its anonymous role granting the groups' read.
    public = ["queue:get-artifact:public/*", "queue:list-task-group:*", "queue:get-task:*", "queue:status:*"]
    await roles.update_role(auth, "anonymous", "anyone may read the bench's groups", public, guard=ALLOW_ALL)
    queue = Queue(storage, QueueConfig(), credentials_issuer=("bench", TOKEN))
    await queue.start()
    secrets = Secrets(storage, secret_key="bench")
    return Services(queue=queue, auth=auth, scheduler=Scheduler(queue, expand=auth.expand), secrets=secrets)


async def measure_metrics(services: Services, n: int, queues: int) -> None:
    await fill(services.queue, n, queues)
    app = build_app(services)
    measured: metrics.Metrics = app.state.metrics
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        await scrape(client)  # warm up
        fresh = []
        for _ in range(SCRAPES):
            assert measured.collector.snapshot is not None
            measured.collector.snapshot.taken -= metrics.CACHE_SECONDS  # stale: query again
            fresh.append((await scrape(client))[0])
        cached = [(await scrape(client))[0] for _ in range(SCRAPES)]
        size = (await scrape(client))[1]
    print(f"/metrics at {n} pending tasks, {queues} queues ({size} bytes), {SCRAPES} scrapes each:")
    summary("fresh", fresh)
    summary("cached", cached)


async def fill_group(queue: Queue, n: int, rng: random.Random) -> str:
    """A group of `n` tasks: a tenth roots, the rest depending on one or two earlier tasks; then a
    few roots claimed, and some of those completed or failed."""
    group, made = slugid.nice(), []
    items: list[tuple[str, TaskDefinition]] = []
    for i in range(n):
        task_id = slugid.nice()
        roots = i < max(1, n // 10)
        deps = [] if roots else sorted({rng.choice(made) for _ in range(rng.choice((1, 2)))})
        body = definition(GROUP_QUEUE, f"build/{i % 37}/step-{i}", taskGroupId=group, dependencies=deps)
        items.append((task_id, tasks.define(queue, task_id, body)))
        made.append(task_id)
    for start in range(0, n, BATCH):
        async with queue.storage.transaction() as tx:
            await tasks.create_tasks_tx(queue, tx, items[start : start + BATCH])
    claimed = await claims.claim_pending(queue, GROUP_QUEUE, ("wg", "w1"), max(1, n // 20))
    for i, claim in enumerate(claimed):
        if i % 3 == 0:
            continue  # left running
        state = "completed" if i % 3 == 1 else "failed"
        await claims.report(queue, claim["status"]["taskId"], claim["runId"], state, state)
    return group


@dataclass
class Timed:
    wall: float  # the p50 of the renders' elapsed time, ms
    cpu: float  # the p50 of this process's CPU time per render, ms (what a busy machine adds is not in it)
    size: int  # the last answer's bytes

    def __str__(self) -> str:
        return f"{self.wall:7.1f} ms (cpu {self.cpu:6.1f} ms)"


async def p50(render: Callable[[], Awaitable[int]], times: int) -> Timed:
    """The medians of `times` renders, after one to warm up, and the last answer's size."""
    size = await render()
    wall, cpu = [], []
    for _ in range(times):
        started, used = time.perf_counter(), time.process_time()
        size = await render()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    return Timed(statistics.median(wall) * 1000, statistics.median(cpu) * 1000, size)


async def measure_group(
    services: Services, sizes: list[int], *, renders: bool = True
) -> list[tuple[int, str]]:
    """The groups made (size, taskGroupId); their pages' server time printed unless `renders` is off."""
    made: list[tuple[int, str]] = []
    transport = httpx.ASGITransport(app=build_app(services, Pages(services)))
    rng = random.Random(7)
    rows = []
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:

        def getter(path: str) -> Callable[[], Awaitable[int]]:
            async def get() -> int:
                answer = await client.get(path, headers={"accept": "text/html"})
                answer.raise_for_status()
                return len(answer.content)

            return get

        for n in sizes:
            started = time.perf_counter()
            group = await fill_group(services.queue, n, rng)
            filled = time.perf_counter() - started
            made.append((n, group))
            if not renders:
                continue
            renders = 15 if n <= 1_000 else 9
            whole = await p50(getter(f"/groups/{group}"), renders)
            failed = await p50(getter(f"/groups/{group}?state=failed"), renders)
            by_duration = await p50(getter(f"/groups/{group}?sort=-duration"), renders)
            graph = await p50(getter(f"/groups/{group}/graph"), renders)
            every = await p50(getter(f"/groups/{group}/rows"), renders)
            rows.append((n, whole, failed, by_duration, graph, every))
            print(f"group of {n:,} tasks (filled in {filled:.1f} s), p50 of {renders} renders:")
            print(f"  table    {whole}  {whole.size / 1e6:5.2f} MB")
            print(f"  filtered {failed}  (?state=failed)")
            print(f"  sorted   {by_duration}  (?sort=-duration)")
            print(f"  graph    {graph}  {graph.size / 1e3:5.0f} kB")
            print(f"  rows     {every}  {every.size / 1e6:5.2f} MB (every task, as the script fetches them)")
    for (n1, *before), (n2, *after) in itertools.pairwise(rows):
        ratios = ", ".join(
            f"{name} x{b.wall / a.wall:.1f} (cpu x{b.cpu / a.cpu:.1f})"
            for name, a, b in zip(
                ("table", "filtered", "sorted", "graph", "rows"), before, after, strict=True
            )
        )
        print(f"growth {n1:,} -> {n2:,} tasks (x{n2 / n1:g}): {ratios}")
    return made


async def run(db_url: str, only: str | None, sizes: list[int], n: int, queues: int) -> list[tuple[int, str]]:
    """The group and metrics phases; answers the groups made, for the browser phase."""
    services = await open_services(db_url)
    made: list[tuple[int, str]] = []
    try:
        if only in (None, "group", "browser"):
            made = await measure_group(services, sizes, renders=only != "browser")
        if only in (None, "metrics"):
            await measure_metrics(services, n, queues)
    finally:
        await services.queue.storage.close()
    return made


CHROMIUM = Path("/usr/bin/chromium")
LOADS = 5
# The page's load event, and the end of its script's fetch of every row (static/group.js), in ms
# from the navigation's start.
TIMING = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const rows = performance.getEntriesByType("resource").filter((r) => r.name.includes("/rows"));
  return {load: nav.loadEventEnd, ready: rows.length ? rows[rows.length - 1].responseEnd : NaN};
}"""


def measure_browser(db_url: str, data_dir: Path, groups: list[tuple[int, str]]) -> None:
    """Each group's page opened in chromium from a real server on `db_url`: load p50, in ms."""
    if not CHROMIUM.exists():
        print(f"browser: skipped, no chromium at {CHROMIUM}")
        return
    from playwright.sync_api import sync_playwright

    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "taskyard.cli.main",
            "serve",
            "--port",
            str(port),
            "--db",
            db_url,
            "--data-dir",
            str(data_dir / "serve"),
        ],
        env={
            **os.environ,
            "TASKYARD_ROOT_ACCESS_TOKEN": TOKEN,
            "TASKYARD_SECRET_KEY": "bench",
            "TASKYARD_LOG_LEVEL": "WARNING",
        },
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/api/queue/v1/ping", server)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            page = browser.new_page()
            for n, group in groups:
                loads, ready = [], []
                for _ in range(LOADS):
                    page.goto(f"http://127.0.0.1:{port}/groups/{group}", wait_until="networkidle")
                    timing = page.evaluate(TIMING)
                    loads.append(timing["load"])
                    ready.append(timing["ready"])
                print(
                    f"browser, group of {n:,} tasks, p50 of {LOADS} loads: load event "
                    f"{statistics.median(loads):.0f} ms, every row fetched {statistics.median(ready):.0f} ms"
                )
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, server: subprocess.Popen[bytes]) -> None:
    give_up = time.monotonic() + 30
    while time.monotonic() < give_up and server.poll() is None:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"taskyard serve did not answer {url}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", choices=["group", "browser", "metrics"])
    parser.add_argument("--sizes", default=",".join(map(str, GROUP_SIZES)), help="the groups' sizes")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--queues", type=int, default=20)
    parser.add_argument("--db-url", help="a database to fill (default: SQLite in a temporary directory)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db_url or f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
        groups = asyncio.run(run(url, args.only, sizes, args.tasks, args.queues))
        if args.only in (None, "browser"):
            measure_browser(url, Path(tmp), groups)


if __name__ == "__main__":
    main()
