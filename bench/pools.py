"""Local worker pools against a real `taskyard serve`, driven by TaskCluster's clients, on SQLite
and PostgreSQL.

1. cold    R times (default 10), one after the other: a task is created in a local pool with
           `minCapacity` 0 and no worker running (the last one left after its 1 s idle timeout);
           the figure is its first run's `started` minus its `scheduled` (both the server's
           commit times): how long a task waits for the worker its pool starts for it. p50, max.
2. burst   T one-second tasks (default 200) created at once in a pool of `maxCapacity` M (default
           8), one task per worker; the figure is the last resolution minus the first task's
           `scheduled`, against the ideal T/M seconds, and the most workers seen at once
           (`--per-worker N`: N tasks per worker process, M/N processes).
Aims: cold p50 at most 1.5 s; the burst within 10 % of T/M. Printed, never asserted.
Run: .venv/bin/python bench/pools.py [--rounds 10] [--tasks 200] [--max 8] [--per-worker 1]
     [--backends sqlite,postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import taskcluster

sys.path.insert(0, str(Path(__file__).parent))
from lifecycle import percentile, scratch_server


def when(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task(pool_id: str, seconds: float) -> dict[str, Any]:
    start = datetime.now(UTC)
    return {
        "taskQueueId": pool_id,
        "created": iso(start),
        "deadline": iso(start + timedelta(hours=1)),
        "payload": {"command": [["sh", "-c", f"sleep {seconds}"]], "maxRunTime": 600},
        "metadata": {
            "name": "bench",
            "description": "-",
            "owner": "bench@example.com",
            "source": "https://x",
        },
    }


def local_pool(wm: taskcluster.WorkerManager, pool_id: str, **config: Any) -> None:
    body = {
        "providerId": "local",
        "description": "bench",
        "config": {"minCapacity": 0, "capacityPerWorker": 1, **config},
        "owner": "bench@example.com",
        "emailOnError": False,
    }
    wm.createWorkerPool(pool_id, body)


def live(wm: taskcluster.WorkerManager, pool_id: str) -> int:
    return sum(1 for w in wm.listWorkersForWorkerPool(pool_id)["workers"] if w["state"] != "stopped")


def wait_until(probe: Any, timeout: float, every: float = 0.05) -> Any:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        found = probe()
        if found:
            return found
        time.sleep(every)
    raise TimeoutError("waited too long")


def cold(wm: taskcluster.WorkerManager, queue: taskcluster.Queue, rounds: int) -> dict[str, Any]:
    pool_id = "bench/cold"
    local_pool(wm, pool_id, maxCapacity=1, idleTimeoutSeconds=1)
    waits: list[float] = []
    for _ in range(rounds):
        wait_until(lambda: live(wm, pool_id) == 0, 60)
        task_id = taskcluster.slugId()
        queue.createTask(task_id, task(pool_id, 0))

        def started(task_id: str = task_id) -> dict[str, Any] | None:
            runs = queue.status(task_id)["status"]["runs"]
            return runs[0] if runs and "started" in runs[0] else None

        run = wait_until(started, 60)
        waits.append(when(run["started"]) - when(run["scheduled"]))
    waits.sort()
    return {"rounds": len(waits), "p50_s": round(percentile(waits, 50), 3), "max_s": round(waits[-1], 3)}


def burst(
    wm: taskcluster.WorkerManager, queue: taskcluster.Queue, count: int, most: int, per_worker: int
) -> dict[str, Any]:
    pool_id = "bench/burst"
    local_pool(wm, pool_id, maxCapacity=most, capacityPerWorker=per_worker, idleTimeoutSeconds=30)
    ids = [taskcluster.slugId() for _ in range(count)]
    seen = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen[0] = max(seen[0], live(wm, pool_id))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with ThreadPoolExecutor(8) as threads:
        list(threads.map(lambda t: queue.createTask(t, task(pool_id, 1)), ids))

    def resolved() -> list[dict[str, Any]] | None:
        statuses = [queue.status(t)["status"] for t in ids[-20:]]
        return statuses if all(s["state"] in ("completed", "failed", "exception") for s in statuses) else None

    wait_until(resolved, 600, every=0.5)
    with ThreadPoolExecutor(8) as threads:
        statuses = list(threads.map(lambda t: queue.status(t)["status"], ids))
    stop.set()
    watcher.join()
    first = min(when(s["runs"][0]["scheduled"]) for s in statuses)
    last = max(when(s["runs"][-1]["resolved"]) for s in statuses if s["runs"] and "resolved" in s["runs"][-1])
    ideal = count / most
    took = last - first
    runs = [r for s in statuses for r in s["runs"] if "resolved" in r]
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for r in runs:
        by_worker.setdefault(r["workerId"], []).append((when(r["started"]), when(r["resolved"])))
    gaps = sorted(
        b[0] - a[1]
        for spans in by_worker.values()
        for a, b in zip(sorted(spans), sorted(spans)[1:], strict=False)
    )
    lengths = sorted(r - s for spans in by_worker.values() for s, r in spans)
    return {
        "startup_s": round(min(when(r["started"]) for r in runs) - first, 3),
        "run_p50_s": round(percentile(lengths, 50), 3),
        "gap_p50_s": round(percentile(gaps, 50), 3) if gaps else None,
        "workers": len(by_worker),
        "tasks": count,
        "max_capacity": most,
        "completed": sum(1 for s in statuses if s["state"] == "completed"),
        "took_s": round(took, 2),
        "ideal_s": round(ideal, 2),
        "over_ideal": round(took / ideal - 1, 3),
        "most_workers_seen": seen[0],
    }


async def run_backend(name: str, args: argparse.Namespace) -> dict[str, Any] | None:
    print(f"\n== {name} ==", flush=True)
    async with scratch_server(name, "pools") as served:
        if served is None:
            return None
        _, options = served
        wm, queue = taskcluster.WorkerManager(options), taskcluster.Queue(options)
        first = await asyncio.to_thread(cold, wm, queue, args.rounds)
        print(f"  cold: created -> claimed p50 {first['p50_s']} s, max {first['max_s']} s", flush=True)
        second = await asyncio.to_thread(burst, wm, queue, args.tasks, args.max, args.per_worker)
        print(
            f"  burst: {second['tasks']} one-second tasks on max {second['max_capacity']}: "
            f"{second['took_s']} s (ideal {second['ideal_s']} s, {second['over_ideal']:+.1%}), "
            f"{second['completed']} completed, at most {second['most_workers_seen']} workers; first "
            f"claim after {second['startup_s']} s, a run takes {second['run_p50_s']} s and the next "
            f"claim comes {second['gap_p50_s']} s after it (p50), {second['workers']} workers in all",
            flush=True,
        )
        return {"cold": first, "burst": second}


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--max", type=int, default=8)
    parser.add_argument("--per-worker", type=int, default=1, help="the burst pool's capacityPerWorker")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--json", metavar="FILE", help="also write the figures there")
    args = parser.parse_args(argv)
    results = {name: await run_backend(name, args) for name in args.backends.split(",")}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
