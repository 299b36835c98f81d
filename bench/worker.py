"""Benchmark of the worker: N no-op tasks (`true`) through `taskyard up` with a given capacity.

With `--sleep SECONDS` each task runs `sleep SECONDS` instead: calls the worker makes while the
command runs (the backing log's createArtifact) then finish before it ends.

It starts `taskyard up` (API server on SQLite plus its in-process worker) as a subprocess, creates
the tasks over HTTP with Hawk-signed createTask calls (16 in flight) while the worker runs them, and
reads the timestamps back from the queue: a run's `started` is its claim, `resolved` its report.

- tasks/s = tasks completed / (last resolved - first createTask sent);
- overhead per task = (resolved - started) - the command's own `Elapsed Time` from the task's log;
- the log's `[taskcluster <time>]` lines split the overhead into steps (claim to log header, header to
  command, command to `Task Finished`, `Task Finished` to report);
- CPU seconds per task of the `taskyard up` process, of its worker child and of the commands
  (/proc/<pid>/stat).

Timings are printed, never asserted. See bench/README.md. Run: .venv/bin/python bench/worker.py
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import math
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson

from taskyard.auth.hawk_client import sign_header

HERE = Path(__file__).parent
if str(HERE.parent) not in sys.path:  # run as a script: `bench.lifecycle` is imported from the checkout
    sys.path.insert(0, str(HERE.parent))

from bench.lifecycle import taskyard_command  # noqa: E402

ROOT_CLIENT_ID = "static/taskyard/root"
TASK_QUEUE_ID = "local/default"
AIM_OVERHEAD_P50_MS = 30.0  # the worker's aims: overhead p50 and p99, and no-op tasks/s at capacity 4
AIM_OVERHEAD_P99_MS = 100.0
AIM_TASKS_PER_S = 60.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
LINE = re.compile(r"^\[taskcluster (\S+)\] (.*)$", re.MULTILINE)
RUNNING: list[subprocess.Popen[bytes]] = []  # killed on any exit
WORKER_READY = "claiming from"  # the worker's first log line, once it has started


def slugid() -> str:
    """A "nice" slugid (first bit clear), as taskcluster's slugid.nice()."""
    raw = bytearray(uuid.uuid4().bytes)
    raw[0] &= 0x7F
    return base64.urlsafe_b64encode(bytes(raw)).decode()[:22]


def iso(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"


def epoch_ms(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(utime + stime, cutime + cstime) of `pid`: its own CPU, and that of its reaped children."""
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK, (int(fields[13]) + int(fields[14])) / CLK_TCK
    return 0.0, 0.0


def worker_pid(pid: int) -> int:
    """The `taskyard worker` child that `taskyard up` runs (0 if none is found)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path(f"/proc/{pid}/task/{pid}/children").read_text().split()[0])
    return 0


def task_definition(task_group_id: str, sleep: float = 0.0) -> dict[str, Any]:
    start = datetime.now(UTC)
    command = [["sleep", f"{sleep:g}"]] if sleep > 0 else [["true"]]
    return {
        "taskQueueId": TASK_QUEUE_ID,
        "taskGroupId": task_group_id,
        "created": iso(start),
        "deadline": iso(start + timedelta(hours=1)),
        "expires": iso(start + timedelta(days=1)),
        "payload": {"command": command, "maxRunTime": 60},
        "metadata": {
            "name": "no-op",
            "description": "a task of bench/worker.py",
            "owner": "bench@example.com",
            "source": "https://example.com/taskyard/bench",
        },
    }


class Server:
    """One `taskyard up` subprocess; its output goes to DATA_DIR/server.log."""

    def __init__(self, data_dir: Path, capacity: int, log_level: str, taskyard: str = "") -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.root_url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_urlsafe(33)
        self.data_dir, self.capacity, self.log_level = data_dir, capacity, log_level
        self.taskyard = shlex.split(taskyard) if taskyard else taskyard_command()
        self.log_path = data_dir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        command = [
            *self.taskyard,
            "up",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            "--capacity",
        ]
        command.append(str(self.capacity))
        env = {k: v for k, v in os.environ.items() if not k.startswith("TASKYARD_")}
        env.update(TASKYARD_ROOT_ACCESS_TOKEN=self.token, TASKYARD_LOG_LEVEL=self.log_level)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        RUNNING.append(self.proc)
        give_up = time.monotonic() + 30
        async with httpx.AsyncClient(timeout=2) as client:
            while time.monotonic() < give_up and self.proc.poll() is None:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{self.root_url}/api/queue/v1/ping")).status_code == 200:
                        break
                await asyncio.sleep(0.1)
            else:
                raise RuntimeError(f"taskyard up did not start (exit {self.proc.poll()}):\n{self.log_tail()}")
        if self.log_level.upper() in ("DEBUG", "INFO"):  # its first line says it has started
            await self._worker_started(give_up)

    async def _worker_started(self, give_up: float) -> None:
        """Wait for the worker's first log line: its start (imports) is not what is measured."""
        while time.monotonic() < give_up and self.proc is not None and self.proc.poll() is None:
            if WORKER_READY in self.log_path.read_text(errors="replace"):
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"taskyard up's worker did not start:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        """SIGINT (running tasks resolved worker-shutdown), then SIGTERM, then SIGKILL."""
        for sig, wait in ((signal.SIGINT, 20), (signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            if self.proc is None or self.proc.poll() is not None:
                return
            self.proc.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(wait)


class Api:
    def __init__(self, server: Server) -> None:
        self.base = server.root_url + "/api/queue/v1"
        self.token = server.token
        self.http = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=32))
        self.errors: Counter[str] = Counter()

    async def call(self, method: str, path: str, body: Any) -> Any:
        url, payload = self.base + path, orjson.dumps(body)
        auth = sign_header(method, url, payload, "application/json", ROOT_CLIENT_ID, self.token)
        headers = {"Authorization": auth, "Content-Type": "application/json"}
        response = await self.http.request(method, url, content=payload, headers=headers)
        if response.status_code >= 300:
            self.errors[f"{method} {path.split('/')[1]} -> {response.status_code}"] += 1
            return None
        return orjson.loads(response.content)

    async def log(self, task_id: str) -> str | None:
        """The task's live.log (public/: readable anonymously), redirect followed and gunzipped."""
        url = f"{self.base}/task/{task_id}/runs/0/artifacts/public/logs/live.log"
        response = await self.http.get(url, follow_redirects=True)
        if response.status_code != 200:
            self.errors[f"GET live.log -> {response.status_code}"] += 1
            return None
        return response.text


async def bounded(items: list[Any], inflight: int, each: Any) -> None:
    queue = iter(items)

    async def one() -> None:
        for item in queue:
            await each(item)

    await asyncio.gather(*(one() for _ in range(inflight)))


async def create_all(api: Api, n: int, inflight: int, sleep: float) -> tuple[list[str], float]:
    """Create n tasks in one group (its first task alone, as a decision task would); (ids, first send)."""
    group = slugid()
    definition = task_definition(group, sleep)
    created: list[str] = []

    async def create(task_id: str) -> None:
        if await api.call("PUT", f"/task/{task_id}", definition) is not None:
            created.append(task_id)

    first_sent = time.time() * 1000
    await create(group)
    await bounded([slugid() for _ in range(n - 1)], inflight, create)
    return created, first_sent


async def statuses_of(api: Api, task_ids: list[str]) -> dict[str, Any]:
    """The status of each task, 1,000 ids a tasks/status call."""
    statuses: dict[str, Any] = {}
    for i in range(0, len(task_ids), 1000):
        answer = await api.call("POST", "/tasks/status", {"taskIds": task_ids[i : i + 1000]})
        statuses.update((s["taskId"], s["status"]) for s in (answer or {}).get("statuses", []))
    return statuses


async def wait_resolved(api: Api, task_ids: list[str], timeout: float) -> dict[str, Any]:
    """Wait until every task is resolved or `timeout` passes; then every task's status. While waiting
    it asks about the 100 oldest unresolved tasks once a second (the worker claims the oldest first):
    asking about all of them every time costs the server CPU the worker needs."""
    pending = list(task_ids)
    give_up = time.monotonic() + timeout
    while pending and time.monotonic() < give_up:
        head = await statuses_of(api, pending[:100])
        resolved = {t for t, s in head.items() if s["state"] in ("completed", "failed", "exception")}
        pending = [t for t in pending if t not in resolved]
        if pending and len(resolved) < 100:
            await asyncio.sleep(1.0)
    return await statuses_of(api, task_ids)


MARKS = {"=== Task Starting ===": "header", "Executing command 0": "exec", "=== Task Finished ===": "end"}


def steps(text: str, started: float, resolved: float) -> dict[str, float] | None:
    """Milliseconds of each step of one run, from its log's `[taskcluster <time>]` lines."""
    at: dict[str, float] = {}
    command = 0.0
    for stamp, message in LINE.findall(text):
        if message.startswith("Elapsed Time: "):
            command += float(message.removeprefix("Elapsed Time: ").rstrip("s")) * 1000
            at["ran"] = epoch_ms(stamp)
        elif (mark := next((m for k, m in MARKS.items() if message.startswith(k)), "")) and mark not in at:
            at[mark] = epoch_ms(stamp)
    if len(at) < 4:
        return None
    return {
        "command (its Elapsed Time)": command,
        "overhead (claim to report - command)": resolved - started - command,
        "  claim -> log header": at["header"] - started,
        "  log header -> command start": at["exec"] - at["header"],
        "  command end -> Task Finished": at["end"] - at["ran"],
        "  Task Finished -> reported": resolved - at["end"],
        "claim to report": resolved - started,
    }


async def measure(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    """Run the tasks and print the figures; answer the summary `--json` writes."""
    api, pid = Api(server), server.proc.pid if server.proc else 0
    worker = worker_pid(pid)
    cpu_before = (*cpu_seconds(pid), *cpu_seconds(worker), time.monotonic())
    print(f"  creating {args.tasks} tasks, 16 in flight; capacity {args.capacity}")
    created, first_sent = await create_all(api, args.tasks, 16, args.sleep)
    all_created = time.time() * 1000
    print(f"    {len(created)} created in {all_created / 1000 - first_sent / 1000:.1f} s")
    statuses = await wait_resolved(api, created, args.timeout)
    cpu_after = (*cpu_seconds(pid), *cpu_seconds(worker), time.monotonic())
    own, _, worker_own, children, span = (b - a for a, b in zip(cpu_before, cpu_after, strict=True))
    runs = {t: s["runs"][-1] for t, s in statuses.items() if s.get("runs")}
    outcomes = Counter(f"{r['state']}/{r.get('reasonResolved') or '-'}" for r in runs.values())
    outcomes["unresolved"] = len(created) - sum(outcomes.values())
    print(f"    outcomes: {dict(+outcomes)}")
    completed = {t: r for t, r in runs.items() if r["state"] == "completed"}
    last = max((epoch_ms(r["resolved"]) for r in completed.values()), default=first_sent)
    print(f"  fetching the logs of all {len(completed)} completed tasks")
    rows: list[dict[str, float]] = []
    later: list[float] = []  # the overheads of the tasks claimed after the last create

    async def fetch(task_id: str) -> None:
        run, text = completed[task_id], await api.log(task_id)
        if text and (row := steps(text, epoch_ms(run["started"]), epoch_ms(run["resolved"]))):
            rows.append(row)
            if epoch_ms(run["started"]) > all_created:
                later.append(row["overhead (claim to report - command)"])

    fetch_started = time.monotonic()
    await bounded(list(completed), 16, fetch)
    print(f"    {len(rows)} logs read in {time.monotonic() - fetch_started:.1f} s")
    if api.errors:
        print(f"  unexpected responses: {dict(api.errors)}")
    await api.http.aclose()
    per = 1000 / max(len(completed), 1)
    print(f"\n{'':<42}{'p50':>9}{'p99':>9}{'max':>9}")
    rate = len(completed) / (last - first_sent) * 1000 if last > first_sent else float("nan")
    print(f"{f'tasks/s ({len(completed)}/{len(created)} completed)':<42}{rate:>9.1f}")
    for key in rows[0] if rows else ():
        values = [r[key] for r in rows]
        cells = "".join(f"{percentile(values, p):>9.1f}" for p in (50, 99)) + f"{max(values):>9.1f}"
        print(f"{key + ', ms':<42}{cells}")
    refills = slot_refills([r for r in runs.values() if r.get("started")], args.capacity)
    if refills:
        cells = "".join(f"{percentile(refills, p):>9.1f}" for p in (50, 99)) + f"{max(refills):>9.1f}"
        print(f"{'slot refill (a report to the next claim), ms':<42}{cells}")
    if later:  # without the createTask calls beside them: what the worker and its calls cost alone
        cells = "".join(f"{percentile(later, p):>9.1f}" for p in (50, 99)) + f"{max(later):>9.1f}"
        print(f"{f'overhead after the last create ({len(later)}), ms':<42}{cells}")
    print(f"{'server CPU ms per task':<42}{own * per:>9.1f}")
    print(f"{'worker CPU ms per task':<42}{worker_own * per:>9.1f}")
    print(f"{'  its `true` commands, CPU ms per task':<42}{children * per:>9.1f}")
    print(f"{'server CPU, % of one core':<42}{100 * own / span:>9.0f}")
    print(f"(steps from the logs of {len(rows)} tasks; CPU from the first create until all were resolved)")
    overheads = [r["overhead (claim to report - command)"] for r in rows]
    summary = summary_of(args, overheads, rate)
    if rows:
        print()
        for what, value, aim, unit in (
            ("overhead p50", percentile(overheads, 50), AIM_OVERHEAD_P50_MS, "<= {:.0f} ms"),
            ("overhead p99", percentile(overheads, 99), AIM_OVERHEAD_P99_MS, "<= {:.0f} ms"),
            ("tasks/s", rate, AIM_TASKS_PER_S, ">= {:.0f} at capacity 4"),
        ):
            print(f"{what} {value:.1f} vs aim {unit.format(aim)}: {value / aim:.2f}x the aim")
    return summary


def slot_refills(runs: list[Any], capacity: int) -> list[float]:
    """How long a freed slot waited for its next claim: the k-th report (in time) frees the slot
    that the (k + capacity)-th claim fills, while the queue holds work. Server clock, ms."""
    starts = sorted(epoch_ms(r["started"]) for r in runs)
    ends = sorted(epoch_ms(r["resolved"]) for r in runs if r.get("resolved"))
    return [start - end for end, start in zip(ends, starts[capacity:], strict=False) if start >= end]


def summary_of(args: argparse.Namespace, overheads: list[float], rate: float) -> dict[str, Any]:
    """What `--json` writes: null for a figure the run could not give."""

    def figure(value: float) -> float | None:
        return round(value, 2) if math.isfinite(value) else None

    return {
        "overhead_p50_ms": figure(percentile(overheads, 50)),
        "overhead_p99_ms": figure(percentile(overheads, 99)),
        "tasks_per_s": figure(rate),
        "capacity": args.capacity,
        "tasks": args.tasks,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=None, help="tasks to run (default 1000)")
    p.add_argument("--capacity", type=int, default=4, help="the worker's capacity (default 4)")
    p.add_argument("--sleep", type=float, default=0.0, help="run `sleep SECONDS` instead of `true`")
    p.add_argument("--quick", action="store_true", help="a fast sanity run: 200 tasks")
    p.add_argument("--keep", action="store_true", help="keep the temporary data directory (server.log)")
    p.add_argument("--timeout", type=float, default=600, help="seconds to wait for the tasks (default 600)")
    p.add_argument("--log-level", default="INFO", help="the server's TASKYARD_LOG_LEVEL (default INFO)")
    p.add_argument(
        "--taskyard",
        default="",
        help="command that runs taskyard, for another checkout's server and worker "
        "(default: this venv's); e.g. /other/checkout/.venv/bin/taskyard",
    )
    p.add_argument(
        "--json",
        metavar="PATH",
        default="",
        help="also write overhead_p50_ms, overhead_p99_ms, tasks_per_s, capacity and tasks to PATH",
    )
    args = p.parse_args(argv)
    args.tasks = args.tasks or (200 if args.quick else 1000)
    return args


async def main_async(args: argparse.Namespace) -> int:
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"taskyard worker bench: {os.cpu_count()} CPUs, load average {load}")
    data_dir = Path(tempfile.mkdtemp(prefix="taskyard-bench-worker-"))
    server = Server(data_dir, args.capacity, args.log_level, args.taskyard)
    try:
        try:
            await server.start()
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        print(f"  taskyard up pid {server.proc.pid if server.proc else '?'} on {server.root_url}")
        summary = summary_of(args, [], float("nan"))
        try:
            summary = await measure(server, args)
        except Exception as exc:  # a finding, not a crash: say what happened and what the server said
            print(f"  the bench failed: {exc!r}\n  server log tail:\n{server.log_tail()}")
        if server.proc is not None and server.proc.poll() is not None:
            print(f"  the server died (exit {server.proc.returncode}):\n{server.log_tail()}")
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
        return 0
    finally:
        server.stop()
        if args.keep:
            print(f"  kept {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # like Ctrl-C: the server is stopped
    try:
        return asyncio.run(main_async(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        for proc in RUNNING:
            if proc.poll() is None:
                proc.kill()
                with contextlib.suppress(Exception):
                    proc.wait(5)


if __name__ == "__main__":
    sys.exit(main())
