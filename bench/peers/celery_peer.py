"""Celery's part of bench/peers.py: N no-op tasks through Celery on RabbitMQ, counted done in Redis.

Runs in the peers' virtual environment, with a queue of its own (`peers-bench-<random>`) that it
deletes at the end. One worker process
(`celery worker`, prefork or threads pool) and, in this process, the sender (`apply_async`):

1. backlog     send N tasks with no worker running (send rate alone), then start the worker and
               let it drain them (worker rate alone: first task done -> last task done);
2. together    with the worker ready, send N more: jobs/s = N / (first send -> last task done).

The CPU time of the sender, the worker, RabbitMQ and Redis during phase 2 is reported per task.
Prints progress, then one line `RESULT {json}` that bench/peers.py reads.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
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
    p.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--pool", choices=("prefork", "threads"), default="prefork")
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--prefetch", type=int, default=64, help="worker_prefetch_multiplier")
    p.add_argument("--timeout", type=float, default=300)
    return p.parse_args()


def start_worker(args: argparse.Namespace, queue: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "celery", "--quiet", "-A", "celery_app", "worker", "--pool", args.pool]
    command += ["--concurrency", str(args.concurrency), "--without-gossip", "--without-mingle"]
    command += ["--without-heartbeat", "--loglevel", "WARNING", "--queues", queue, "--hostname"]
    command.append(f"{queue}@%h")
    # As root (a container), Celery warns about superuser privileges on every start: not news here.
    quiet = "ignore:You're running the worker with superuser privileges"
    return subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(HERE), "PYTHONWARNINGS": quiet})


def stop_worker(worker: subprocess.Popen[bytes] | None) -> None:
    """Warm shutdown (SIGTERM: it finishes what it holds), then SIGKILL."""
    if worker is None or worker.poll() is not None:
        return
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(20)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait(5)


def cpu_now(worker: int) -> dict[str, float]:
    """CPU seconds so far of the sender (this process), the worker and its pool, RabbitMQ and Redis
    (whole: other users of them on the machine count too)."""
    return {
        "sender": cpu.own(),
        "worker": cpu.tree(worker),
        "rabbitmq": cpu.named("beam.smp"),
        "redis": cpu.named("redis-server"),
    }


def wait_key(r: Any, key: str, timeout: float, worker: subprocess.Popen[bytes] | None = None) -> float:
    """Wait for `key` to be set (polling every 20 ms); its value as a float."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        value = r.get(key)
        if value is not None:
            return float(value)
        if worker is not None and worker.poll() is not None:
            raise RuntimeError(f"the Celery worker exited with {worker.returncode}")
        time.sleep(0.02)
    raise TimeoutError(f"{key} not set within {timeout:.0f} s")


def send_all(noop: Any, key: str, n: int, r: Any) -> tuple[float, float]:
    """Send n tasks (apply_async, one by one, as an application would); (first sent, last sent)."""
    r.set(f"{key}:done", 0, ex=600)
    first = time.time()
    for _ in range(n):
        noop.apply_async((key, n))
    return first, time.time()


def measure(args: argparse.Namespace, queue: str) -> dict[str, Any]:
    import redis

    r = redis.Redis.from_url(args.redis)
    r.ping()
    sys.path.insert(0, str(HERE))
    from celery_app import app, noop

    n = args.jobs
    result: dict[str, Any] = {"versions": {"celery": version("celery"), "kombu": version("kombu")}}
    worker = None
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1)
        print(f"backlog: {n} tasks sent with no worker running ({queue})", flush=True)
        first, last = send_all(noop, f"{queue}:backlog", n, r)
        result["enqueue_per_s"] = n / (last - first)
        print(f"  sent in {last - first:.2f} s: {result['enqueue_per_s']:.0f} tasks/s", flush=True)
        worker = start_worker(args, queue)
        done = wait_key(r, f"{queue}:backlog:last", args.timeout, worker)
        started = float(r.get(f"{queue}:backlog:first") or done)
        result["worker_per_s"] = n / (done - started) if done > started else None
        print(
            f"  the worker ({args.pool}, {args.concurrency}) drained them in {done - started:.2f} s",
            flush=True,
        )

        wait_key(r, f"{queue}:ready", 60, worker)
        print(f"together: {n} tasks sent while the worker waits", flush=True)
        before = cpu_now(worker.pid)
        first, last = send_all(noop, f"{queue}:together", n, r)
        done = wait_key(r, f"{queue}:together:last", args.timeout, worker)
        used = {k: v - before[k] for k, v in cpu_now(worker.pid).items()}
        result["cpu_ms_per_job"] = {k: 1000 * v / n for k, v in used.items()}
        result["jobs_per_s"] = n / (done - first)
        result["completed"] = result["jobs"] = n
        print(f"  {n} done in {done - first:.2f} s from the first send (sending took {last - first:.2f} s)")
        return result
    finally:
        stop_worker(worker)
        clean_up(app, r, queue)


def clean_up(app: Any, r: Any, queue: str) -> None:
    with contextlib.suppress(Exception), app.connection_for_write() as conn:
        conn.default_channel.queue_delete(queue)
        conn.default_channel.exchange_delete(queue)
    with contextlib.suppress(Exception):
        keys = list(r.scan_iter(f"{queue}:*"))
        if keys:
            r.delete(*keys)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _interrupt)
    queue = f"peers-bench-{secrets.token_hex(4)}"
    os.environ.update(PEERS_BROKER=args.broker, PEERS_REDIS=args.redis, PEERS_QUEUE=queue)
    os.environ["PEERS_PREFETCH"] = str(args.prefetch)
    try:
        result = measure(args, queue)
    except KeyboardInterrupt:
        return 130
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
