"""What the web UI and its neighbours cost the server: for now, scraping `GET /metrics`.

metrics   N pending tasks (default 10,000) spread over Q task queues (default 20), a few of them
          claimed; then `GET /metrics` through the app in-process (httpx's ASGI transport, so no
          network): `fresh` scrapes re-run the database queries each time (the 2 s cache is
          skipped by moving the cache's clock), `cached` ones answer from the cache, as most
          scrapes do when several Prometheus servers scrape one taskyard. Aim: fresh <= 50 ms.

Figures are printed, never asserted. Run: .venv/bin/python bench/ui.py [--tasks N] [--queues Q]
[--db-url URL] (default: SQLite in a temporary directory).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from taskyard.api import metrics
from taskyard.api.app import Services, build_app
from taskyard.auth import static
from taskyard.auth.service import Auth
from taskyard.config import QueueConfig
from taskyard.model import dates, slugid
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, tasks
from taskyard.queue.service import Queue
from taskyard.storage import open_storage

TOKEN = "bench-root-token-bench-root-token"
SCRAPES = 50


def definition(task_queue_id: str) -> dict[str, object]:
    now = dates.now_ms()
    return {
        "taskQueueId": task_queue_id,
        "created": dates.to_iso(now),
        "deadline": dates.to_iso(now + dates.DAY),
        "payload": {},
        "metadata": {
            "name": "bench",
            "description": "bench/ui.py",
            "owner": "b@example.com",
            "source": "https://x",
        },
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


async def run(db_url: str, n: int, queues: int) -> None:
    storage = await open_storage(db_url)
    try:
        auth = Auth(storage, secret_key="bench", static_clients=static.static_clients(TOKEN))
        await auth.start()
        queue = Queue(storage, QueueConfig(), credentials_issuer=("bench", TOKEN))
        await queue.start()
        await fill(queue, n, queues)
        app = build_app(Services(queue=queue, auth=auth))
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
    finally:
        await storage.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--queues", type=int, default=20)
    parser.add_argument("--db-url", help="a database to fill (default: SQLite in a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db_url or f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
        asyncio.run(run(url, args.tasks, args.queues))


if __name__ == "__main__":
    main()
