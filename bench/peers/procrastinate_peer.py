"""procrastinate's part of bench/peers.py: N no-op jobs through procrastinate on a scratch database.

Runs in the peers' virtual environment. Two phases, one worker process (`procrastinate worker`,
`--concurrency C`, LISTEN/NOTIFY on, its pool at C + 1 connections):

1. backlog     defer N jobs with no worker running (defer rate alone), then start the worker and
               let it drain them (worker rate alone: first job started -> last job succeeded);
2. together    with the worker waiting, defer N more: jobs/s = N / (first defer -> last succeeded).

Completion times are procrastinate's own: its `procrastinate_events` rows ('started',
'succeeded'), written in the same transactions as the jobs' changes. The CPU time of the deferrer,
the worker and PostgreSQL (this database's backends and its background processes) during phase 2
is reported per job. Prints progress, then one line `RESULT {json}` that bench/peers.py reads.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import cpu

HERE = Path(__file__).parent


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dsn", required=True, help="a scratch database (its schema is applied here)")
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--batch", type=int, default=100, help="jobs per batch_defer_async (1: defer_async)")
    p.add_argument("--inflight", type=int, default=16, help="with --batch 1: defer_async calls in flight")
    p.add_argument("--timeout", type=float, default=300)
    return p.parse_args()


async def defer_all(task: Any, n: int, batch: int, inflight: int) -> tuple[float, float]:
    """Defer n jobs; (first defer sent, last defer answered), epoch seconds."""
    first = time.time()
    if batch > 1:
        for start in range(0, n, batch):
            await task.batch_defer_async(*({} for _ in range(min(batch, n - start))))
    else:
        left = iter(range(n))

        async def deferrer() -> None:
            for _ in left:
                await task.defer_async()

        await asyncio.gather(*(deferrer() for _ in range(inflight)))
    return first, time.time()


async def wait_done(conn: Any, after_id: int, n: int, timeout: float) -> dict[str, float]:
    """Wait until the n jobs with ids above `after_id` are finished; their first start, last success."""
    give_up = time.monotonic() + timeout
    finished = 0
    while time.monotonic() < give_up:
        cur = await conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE id > %s AND status NOT IN ('todo', 'doing')",
            (after_id,),
        )
        finished = (await cur.fetchone())[0]
        if finished >= n:
            break
        await asyncio.sleep(0.1)
    cur = await conn.execute(
        "SELECT extract(epoch FROM min(at) FILTER (WHERE type = 'started')),"
        " extract(epoch FROM max(at) FILTER (WHERE type = 'succeeded')),"
        " count(*) FILTER (WHERE type = 'succeeded')"
        " FROM procrastinate_events WHERE job_id > %s",
        (after_id,),
    )
    first_started, last_succeeded, succeeded = await cur.fetchone()
    return {
        "first_started": float(first_started or 0),
        "last_succeeded": float(last_succeeded or 0),
        "succeeded": int(succeeded),
        "finished": int(finished),
    }


def start_worker(args: argparse.Namespace) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PEERS_POOL": str(args.concurrency + 1), "PYTHONPATH": str(HERE)}
    command = [sys.executable, "-m", "procrastinate", "--app", "procrastinate_app.app", "--log-level"]
    command += ["warning", "worker", "--concurrency", str(args.concurrency), "--queues", "peers"]
    return subprocess.Popen(command, env=env)


def stop_worker(worker: subprocess.Popen[bytes] | None) -> None:
    if worker is None or worker.poll() is not None:
        return
    worker.send_signal(signal.SIGTERM)  # graceful: it finishes its jobs and unregisters
    try:
        worker.wait(15)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait(5)


def cpu_now(worker: int, dsn: str) -> dict[str, float]:
    """CPU seconds so far of the deferrer (this process), the worker, and PostgreSQL for this database."""
    return {"sender": cpu.own(), "worker": cpu.tree(worker), "postgres": cpu.postgres(dsn.rsplit("/", 1)[1])}


async def max_job_id(conn: Any) -> int:
    cur = await conn.execute("SELECT coalesce(max(id), 0) FROM procrastinate_jobs")
    return int((await cur.fetchone())[0])


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    import psycopg

    os.environ["PEERS_DSN"] = args.dsn  # read by procrastinate_app, here and in the worker
    os.environ["PEERS_POOL"] = str(max(args.inflight, 2))  # the deferring side's pool
    sys.path.insert(0, str(HERE))
    from procrastinate_app import app, noop

    n, how = args.jobs, f"batch_defer_async of {args.batch}" if args.batch > 1 else "defer_async"
    result: dict[str, Any] = {"versions": {"procrastinate": version("procrastinate")}}
    worker = None
    async with app.open_async(), await psycopg.AsyncConnection.connect(args.dsn, autocommit=True) as conn:
        await app.schema_manager.apply_schema_async()
        try:
            print(f"backlog: {n} jobs deferred ({how}) with no worker running", flush=True)
            first, last = await defer_all(noop, n, args.batch, args.inflight)
            result["enqueue_per_s"] = n / (last - first)
            print(f"  deferred in {last - first:.2f} s: {result['enqueue_per_s']:.0f} jobs/s", flush=True)
            worker = start_worker(args)
            done = await wait_done(conn, 0, n, args.timeout)
            span = done["last_succeeded"] - done["first_started"]
            result["worker_per_s"] = done["succeeded"] / span if span > 0 else None
            print(f"  worker drained {done['succeeded']} in {span:.2f} s", flush=True)

            print(f"together: {n} jobs deferred ({how}) while the worker waits", flush=True)
            after = await max_job_id(conn)
            before = cpu_now(worker.pid, args.dsn)
            first, last = await defer_all(noop, n, args.batch, args.inflight)
            done = await wait_done(conn, after, n, args.timeout)
            used = {k: v - before[k] for k, v in cpu_now(worker.pid, args.dsn).items()}
            result["cpu_ms_per_job"] = {k: 1000 * v / max(done["succeeded"], 1) for k, v in used.items()}
            span = done["last_succeeded"] - first
            result["jobs_per_s"] = done["succeeded"] / span if span > 0 else None
            result["completed"], result["jobs"] = done["succeeded"], n
            print(
                f"  {done['succeeded']}/{n} succeeded in {span:.2f} s from the first defer"
                f" (deferring took {last - first:.2f} s)",
                flush=True,
            )
        finally:
            stop_worker(worker)
    return result


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _interrupt)
    with contextlib.suppress(KeyboardInterrupt):
        result = asyncio.run(measure(args))
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    return 130


if __name__ == "__main__":
    sys.exit(main())
