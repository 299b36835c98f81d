"""The hooks service against a real `taskyard serve`, driven by TaskCluster's `taskcluster.Hooks`,
on SQLite and PostgreSQL.

1. schedule  H hooks (default 1,000), each scheduled once a minute at the same second, a few
             seconds ahead. Each fire's lateness is its task's first run's `scheduled` (when the
             task was committed pending) minus its `created` (the scheduled time, which the fire
             renders as `now`); the figure is the last hook's lateness, and the p50.
2. binding   B times (default 50), one after the other: a task is created with a route a hook is
             bound to (`task-defined` on `route.<r>`); the hook's task's first run's `scheduled`
             minus the bound task's (both committed times, read from the server): p50 and p99.
Aims: every one of 1,000 per-minute hooks fired within 2 s of its time; a binding fires within
100 ms p50 of the event's commit. Figures are printed, never asserted.
Run: .venv/bin/python bench/hooks.py [--hooks 1000] [--bindings 50] [--backends sqlite,postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import taskcluster

sys.path.insert(0, str(Path(__file__).parent))
from lifecycle import percentile, scratch_server

GROUP = "bench"
TEMPLATE = {
    "taskQueueId": "bench/hooks",
    "payload": {},
    "metadata": {
        "name": "bench hook",
        "description": "-",
        "owner": "bench@example.com",
        "source": "https://example.com",
    },
}


def when(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def hook_body(**more: Any) -> dict[str, Any]:
    meta = {"name": "bench", "description": "bench", "owner": "bench@example.com"}
    return {"metadata": meta, "task": TEMPLATE, "bindings": [], **more}


def scheduled(
    hooks: taskcluster.Hooks, queue: taskcluster.Queue, count: int, pool: ThreadPoolExecutor
) -> dict[str, Any]:
    """Create `count` hooks firing at second S of every minute; wait for one fire of each."""
    start = time.time()
    # Far enough ahead for the creates (about 100/s), on a whole second.
    target = int(start + 8 + count / 100)
    second = target % 60
    body = hook_body(schedule=[f"{second} * * * * *"])
    list(pool.map(lambda i: hooks.createHook(GROUP, f"s{i}", body), range(count)))
    created_in = time.time() - start
    time.sleep(max(0.0, target - time.time() + 3))

    def lateness(i: int) -> float | None:
        for _ in range(120):
            try:
                fires = hooks.listLastFires(GROUP, f"s{i}")["lastFires"]
            except taskcluster.TaskclusterRestFailure:
                time.sleep(0.5)
                continue
            status = queue.status(fires[-1]["taskId"])["status"]
            return when(status["runs"][0]["scheduled"]) - when(fires[-1]["taskCreateTime"])
        return None

    late = list(pool.map(lateness, range(count)))
    missing = sum(1 for x in late if x is None)
    found = sorted(x for x in late if x is not None)
    list(pool.map(lambda i: hooks.removeHook(GROUP, f"s{i}"), range(count)))
    return {
        "hooks": count,
        "created_in_s": round(created_in, 1),
        "missing": missing,
        "last_s": round(found[-1], 3) if found else None,
        "p50_s": round(percentile(found, 50), 3) if found else None,
    }


def bound(hooks: taskcluster.Hooks, queue: taskcluster.Queue, count: int) -> dict[str, Any]:
    route = f"bench-hooks.{secrets.token_hex(4)}"
    bindings = [
        {"exchange": "exchange/taskcluster-queue/v1/task-defined", "routingKeyPattern": f"route.{route}"}
    ]
    hooks.createHook(GROUP, "bound", hook_body(bindings=bindings, triggerSchema={"type": "object"}))
    time.sleep(1)  # the consumer's reconciliation
    delays: list[float] = []
    seen: set[str] = set()
    for _ in range(count):
        task_id = taskcluster.slugId()
        now = datetime.now(UTC)
        queue.createTask(
            task_id,
            {
                **TEMPLATE,
                "routes": [route],
                "created": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "deadline": datetime.fromtimestamp(now.timestamp() + 3600, UTC)
                .isoformat(timespec="milliseconds")
                .replace("+00:00", "Z"),
            },
        )
        sent = when(queue.status(task_id)["status"]["runs"][0]["scheduled"])
        for _ in range(200):
            try:
                fires = hooks.listLastFires(GROUP, "bound")["lastFires"]
            except taskcluster.TaskclusterRestFailure:
                fires = []
            new = [f for f in fires if f["taskId"] not in seen]
            if new:
                seen.add(new[0]["taskId"])
                fired = when(queue.status(new[0]["taskId"])["status"]["runs"][0]["scheduled"])
                delays.append(fired - sent)
                break
            time.sleep(0.005)
    hooks.removeHook(GROUP, "bound")
    delays.sort()
    return {
        "fires": len(delays),
        "p50_ms": round(percentile(delays, 50) * 1000, 1) if delays else None,
        "p99_ms": round(percentile(delays, 99) * 1000, 1) if delays else None,
    }


async def run_backend(name: str, args: argparse.Namespace) -> dict[str, Any] | None:
    print(f"\n== {name} ==", flush=True)
    async with scratch_server(name, "hooks") as served:
        if served is None:
            return None
        _, options = served
        hooks, queue = taskcluster.Hooks(options), taskcluster.Queue(options)
        taskcluster.Auth(options).createRole(
            f"hook-id:{GROUP}/*",
            {"description": "bench", "scopes": ["queue:create-task:*", "queue:scheduler-id:*"]},
        )
        with ThreadPoolExecutor(8) as pool:
            sched = await asyncio.to_thread(scheduled, hooks, queue, args.hooks, pool)
        late = f"last fired {sched['last_s']} s after its time, p50 {sched['p50_s']} s"
        print(f"  {sched['hooks']} hooks: {late} ({sched['missing']} missing)", flush=True)
        bind = await asyncio.to_thread(bound, hooks, queue, args.bindings)
        print(f"  binding: event commit -> hook's task p50 {bind['p50_ms']} ms, p99 {bind['p99_ms']} ms")
        return {"schedule": sched, "binding": bind}


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hooks", type=int, default=1000)
    parser.add_argument("--bindings", type=int, default=50)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--json", metavar="FILE", help="also write the figures there")
    args = parser.parse_args(argv)
    results = {name: await run_backend(name, args) for name in args.backends.split(",")}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
