"""taskyard beside the task queues a Python user would pick instead: the same no-op work, same machine.

Each system runs N no-op jobs, in rounds that alternate the systems, and the table gives each
one's jobs/s (median of the rounds) and its ratio to taskyard's lifecycle rate:

- taskyard            bench/lifecycle.py's throughput phase on a scratch PostgreSQL database:
                      createTask (16 in flight) while 8 workers loop claimWork -> reportCompleted,
                      over HTTP with Hawk; lifecycles/s from the first createTask to the last report;
- taskyard worker     bench/worker.py: `taskyard up` (SQLite) and its worker running `true`;
- procrastinate       bench/peers/procrastinate_peer.py on its own scratch PostgreSQL database;
- celery              bench/peers/celery_peer.py on RabbitMQ, done counted in Redis, with the
                      prefork pool (2 processes) and the threads pool (8 threads).

The peers are installed by this script into a virtual environment of their own (bench/.peers-venv,
made on the first run from bench/peers/requirements.txt), never into taskyard's, and each peer's part
runs there in a subprocess. Everything started is stopped, and the scratch databases and queues are
dropped, even on Ctrl-C or SIGTERM. Timings are printed, never asserted. See bench/README.md.
Run: .venv/bin/python bench/peers.py
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run as a script: `bench.lifecycle` is imported from the checkout
    sys.path.insert(0, str(ROOT))

from bench import lifecycle  # noqa: E402

REQUIREMENTS = HERE / "peers" / "requirements.txt"
DEFAULT_VENV = HERE / ".peers-venv"
BASELINE = "taskyard"
PEERS_RUNNING: list[asyncio.subprocess.Process] = []  # each in its own process group, killed on exit


@dataclass(frozen=True)
class System:
    name: str
    label: str  # what runs, with its settings, as the table shows it
    needs: str  # "postgres", "rabbitmq" or "" (what must answer for it to run)


SYSTEMS: dict[str, System] = {
    s.name: s
    for s in (
        System("taskyard", "taskyard lifecycles (PostgreSQL, HTTP + Hawk, 8 workers)", "postgres"),
        System("procrastinate", "procrastinate (batch defer 100, concurrency 8)", "postgres"),
        System("procrastinate-single", "procrastinate (defer_async 16 in flight, concurrency 8)", "postgres"),
        System("celery-prefork", "Celery + RabbitMQ (prefork, 2 processes, acks_late)", "rabbitmq"),
        System("celery-threads", "Celery + RabbitMQ (threads, 8, acks_late)", "rabbitmq"),
        System("taskyard-worker", "taskyard worker (`taskyard up`, SQLite, runs `true`)", ""),
    )
}


@dataclass
class Figures:
    """One system's figures over the rounds: jobs/s, and where measured, enqueue and worker alone."""

    jobs_per_s: list[float] = field(default_factory=list)
    enqueue_per_s: list[float] = field(default_factory=list)
    worker_per_s: list[float] = field(default_factory=list)
    cpu_ms_per_job: list[float] = field(default_factory=list)  # every party's CPU, summed
    notes: list[str] = field(default_factory=list)

    def add(self, result: dict[str, Any]) -> None:
        for key in ("jobs_per_s", "enqueue_per_s", "worker_per_s"):
            if isinstance(result.get(key), int | float):
                getattr(self, key).append(float(result[key]))
        if result.get("cpu_ms_per_job"):
            self.cpu_ms_per_job.append(sum(result["cpu_ms_per_job"].values()))


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


COLUMNS = (("jobs/s", 8), ("ratio", 8), ("enqueue/s", 11), ("worker/s", 10), ("CPU ms/job", 12))


def table(figures: dict[str, Figures], systems: Sequence[str]) -> str:
    """The final table: jobs/s (median of rounds), ratio to taskyard's, enqueue and worker alone,
    CPU per job, and each round's jobs/s."""
    base = median(figures[BASELINE].jobs_per_s) if BASELINE in figures else None
    width = max(len(SYSTEMS[s].label) for s in systems) + 2
    head = f"{'system':<{width}}" + "".join(f"{title:>{w}}" for title, w in COLUMNS) + "   rounds"
    lines = [head, "-" * len(head)]
    for name in systems:
        f = figures.get(name, Figures())
        rate, cpu = median(f.jobs_per_s), median(f.cpu_ms_per_job)
        cells = [
            _num(rate),
            f"{rate / base:.2f}" if rate and base else "-",
            _num(median(f.enqueue_per_s)),
            _num(median(f.worker_per_s)),
            "-" if cpu is None else f"{cpu:.1f}",
        ]
        rounds = ", ".join(f"{v:.0f}" for v in f.jobs_per_s) or "; ".join(f.notes) or "not run"
        row = "".join(f"{cell:>{w}}" for cell, (_, w) in zip(cells, COLUMNS, strict=True))
        lines.append(f"{SYSTEMS[name].label:<{width}}{row}   {rounds}")
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


# --------------------------------------------------------------------------- the peers' venv


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure_venv(venv: Path, say: Callable[[str], None] = print) -> Path:
    """The peers' virtual environment, made or updated when bench/peers/requirements.txt changed."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]
    stamp = venv / f".installed-{digest}"
    python = venv_python(venv)
    if stamp.exists() and python.exists():
        return python
    if not python.exists():
        say(f"creating the peers' virtual environment {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    say(f"installing the peers into it from {REQUIREMENTS.relative_to(ROOT)} (first run: about a minute)")
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
    for old in venv.glob(".installed-*"):
        old.unlink()
    stamp.touch()
    return python


def versions(python: Path) -> str:
    code = (
        "from importlib.metadata import version as v; "
        "print(', '.join(f'{p} {v(p)}' for p in ('procrastinate', 'psycopg', 'celery', 'kombu', 'redis')))"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or "?"


# --------------------------------------------------------------------------- running the parts


async def run_part(command: Sequence[str], prefix: str = "    ") -> dict[str, Any]:
    """Run one part in its own process group, echo its output, and return its `RESULT {json}`."""
    proc = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True
    )
    PEERS_RUNNING.append(proc)
    result: dict[str, Any] = {}
    try:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            if line.startswith("RESULT "):
                result = json.loads(line.removeprefix("RESULT "))
                continue
            if line.strip():
                print(prefix + line, flush=True)
        await proc.wait()
    finally:
        await stop_group(proc)
    if not result:
        raise RuntimeError(f"{command[1]} exited with {proc.returncode} and no result")
    return result


async def stop_group(proc: asyncio.subprocess.Process, grace: float = 30) -> None:
    """SIGTERM to the part's process group (it stops its workers and cleans up), then SIGKILL."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # whatever of the group is left (a worker's children)
    if proc in PEERS_RUNNING:
        PEERS_RUNNING.remove(proc)


def kill_leftovers() -> None:
    for proc in PEERS_RUNNING:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    lifecycle.kill_leftovers()


async def run_taskyard(args: argparse.Namespace) -> dict[str, Any]:
    """bench/lifecycle.py's throughput phase on PostgreSQL, in this process (its client is asyncio)."""
    options = lifecycle.parse_args(["--backends", "postgres", "--tasks", str(args.jobs)])
    options.backend_name = "postgres"
    results = await lifecycle.run_server("postgres", options, only=("throughput",))
    throughput = (results or {}).get("throughput")
    if not throughput:
        raise RuntimeError("bench/lifecycle.py's throughput phase gave no figure")
    cpu = {"bench client" if k == "client" else k: v for k, v in throughput["cpu_ms_per_lifecycle"].items()}
    return {"jobs_per_s": throughput["lifecycles_per_s"], "cpu_ms_per_job": cpu}


async def run_taskyard_worker(args: argparse.Namespace) -> dict[str, Any]:
    """bench/worker.py in a subprocess; its `tasks/s (done/created completed)` line is the figure."""
    command = [sys.executable, str(HERE / "worker.py"), "--tasks", str(args.worker_tasks)]
    command += ["--capacity", str(args.worker_capacity)]
    print(f"    {' '.join(command[1:])} (its output is read at the end)", flush=True)
    proc = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True
    )
    PEERS_RUNNING.append(proc)
    try:
        out, _ = await proc.communicate()
    finally:
        await stop_group(proc)
    text = out.decode(errors="replace")
    rate = parse_worker_rate(text)
    if rate is None:
        raise RuntimeError("bench/worker.py printed no tasks/s:\n" + text[-2000:])
    print(
        f"    bench/worker.py: {rate:.1f} tasks/s"
        f" ({args.worker_tasks} tasks, capacity {args.worker_capacity})"
    )
    return {"jobs_per_s": rate, "cpu_ms_per_job": parse_worker_cpu(text)}


WORKER_RATE = re.compile(r"^tasks/s \((\d+)/(\d+) completed\)\s+([0-9.]+)", re.MULTILINE)
WORKER_CPU = re.compile(r"^(server|worker|  its `true` commands),? CPU ms per task\s+([0-9.]+)", re.MULTILINE)


def parse_worker_rate(text: str) -> float | None:
    match = WORKER_RATE.search(text)
    return float(match.group(3)) if match else None


def parse_worker_cpu(text: str) -> dict[str, float]:
    """bench/worker.py's CPU ms per task of the server, the worker and the commands it ran."""
    return {name.strip(): float(value) for name, value in WORKER_CPU.findall(text)}


async def run_procrastinate(args: argparse.Namespace, python: Path, single: bool) -> dict[str, Any]:
    async with lifecycle.scratch_database("postgres") as dsn:
        if dsn is None:
            raise RuntimeError("PostgreSQL is unavailable")
        command = [str(python), str(HERE / "peers" / "procrastinate_peer.py"), "--dsn", dsn]
        command += ["--jobs", str(args.jobs), "--concurrency", "8"]
        command += ["--batch", "1", "--inflight", "16"] if single else ["--batch", "100"]
        return await run_part(command)


async def run_celery(args: argparse.Namespace, python: Path, pool: str) -> dict[str, Any]:
    command = [str(python), str(HERE / "peers" / "celery_peer.py"), "--broker", args.broker]
    command += ["--redis", args.redis, "--jobs", str(args.jobs), "--pool", pool]
    command += ["--concurrency", "2" if pool == "prefork" else "8"]
    return await run_part(command)


async def run_system(name: str, args: argparse.Namespace, python: Path | None) -> dict[str, Any]:
    if name == "taskyard":
        return await run_taskyard(args)
    if name == "taskyard-worker":
        return await run_taskyard_worker(args)
    assert python is not None
    if name.startswith("procrastinate"):
        return await run_procrastinate(args, python, single=name == "procrastinate-single")
    return await run_celery(args, python, pool=name.removeprefix("celery-"))


# --------------------------------------------------------------------------- the run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=None, help="no-op jobs per system and round (default 2000)")
    p.add_argument("--rounds", type=int, default=None, help="rounds, the systems alternating (default 2)")
    p.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help=f"comma-separated, run in this order each round (default: all: {','.join(SYSTEMS)})",
    )
    p.add_argument("--worker-tasks", type=int, default=None, help="bench/worker.py's tasks (default 500)")
    p.add_argument("--worker-capacity", type=int, default=4, help="bench/worker.py's capacity (default 4)")
    p.add_argument("--quick", action="store_true", help="a sanity run: 400 jobs, 1 round, 100 worker tasks")
    p.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="the peers' virtual environment")
    p.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//", help="RabbitMQ for Celery")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="Redis, where Celery's tasks count")
    p.add_argument(
        "--json", type=Path, default=None, help="also write the figures to this file (bench/aims.py)"
    )
    args = p.parse_args(argv)
    args.jobs = args.jobs or (400 if args.quick else 2000)
    args.rounds = args.rounds or (1 if args.quick else 2)
    args.worker_tasks = args.worker_tasks or (100 if args.quick else 500)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in args.systems if s not in SYSTEMS]
    if unknown or not args.systems:
        p.error(
            f"--systems: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(SYSTEMS)}"
        )
    if args.jobs < 1 or args.rounds < 1 or args.worker_tasks < 1:
        p.error("--jobs, --rounds and --worker-tasks must be at least 1")
    return args


async def main_async(args: argparse.Namespace) -> dict[str, Figures]:
    load = Path("/proc/loadavg").read_text().split()[0]
    print(
        f"peers bench: {args.jobs} no-op jobs per system, {args.rounds} round(s);"
        f" {os.cpu_count()} CPUs, load average {load}"
    )
    python = None
    if any(SYSTEMS[s].needs == "rabbitmq" or s.startswith("procrastinate") for s in args.systems):
        python = await asyncio.to_thread(ensure_venv, args.venv)
        print(f"  peers: {await asyncio.to_thread(versions, python)}")
    figures = {name: Figures() for name in args.systems}
    for round_no in range(1, args.rounds + 1):
        for name in args.systems:
            print(f"\n== round {round_no}/{args.rounds}: {SYSTEMS[name].label} ==", flush=True)
            started = time.monotonic()
            try:
                result = await run_system(name, args, python)
            except Exception as exc:  # a finding, not a crash: the other systems still run
                print(f"  {name} failed: {exc}")
                figures[name].notes.append(f"round {round_no} failed")
                continue
            figures[name].add(result)
            rate = result.get("jobs_per_s")
            print(f"  {name}: {_num(rate)} jobs/s ({time.monotonic() - started:.0f} s)", flush=True)
            if result.get("cpu_ms_per_job"):
                parts = ", ".join(f"{k} {v:.2f}" for k, v in result["cpu_ms_per_job"].items())
                print(f"  CPU ms per job: {parts}", flush=True)
    return figures


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # like Ctrl-C: everything started is stopped
    started = time.monotonic()
    try:
        figures = asyncio.run(main_async(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        kill_leftovers()
    print(f"\n{table(figures, args.systems)}")
    print(
        f"\n(jobs/s: median of {args.rounds} round(s), from the first job sent to the last one done;"
        f" ratio: to taskyard's lifecycles/s; enqueue/s and worker/s: enqueueing with no worker,"
        f" then the worker draining that backlog alone; CPU ms/job: every party's CPU (sender or"
        f" bench client, worker or server, database or broker) during the jobs/s run, per job;"
        f" total {time.monotonic() - started:.0f} s)"
    )
    if args.json:
        options = {"jobs": args.jobs, "rounds": args.rounds, "worker_tasks": args.worker_tasks}
        lifecycle.save_json(args.json, {"options": options, "systems": summary(figures)})
    return 0


def summary(figures: dict[str, Figures]) -> dict[str, dict[str, Any]]:
    """Each system's medians over the rounds, with every round's figures, for bench/aims.py."""
    return {
        name: {
            "label": SYSTEMS[name].label,
            "jobs_per_s": median(f.jobs_per_s),
            "worker_per_s": median(f.worker_per_s),
            "cpu_ms_per_job": median(f.cpu_ms_per_job),
            "rounds": f.jobs_per_s,
            "notes": f.notes,
        }
        for name, f in figures.items()
    }


if __name__ == "__main__":
    sys.exit(main())
