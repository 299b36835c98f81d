"""End-to-end benchmark of the task lifecycle against a real `taskyard serve` process.

For each backend (SQLite in a temporary data directory, PostgreSQL in a scratch database) it starts
the server as a subprocess and drives it over HTTP with Hawk-signed requests, signed the way
TaskCluster's Python client signs them (mohawk, sha256, payload hash, `ext` carrying the certificate
of temporary credentials). The measurements:

1. throughput      K workers loop claimWork(tasks=1) -> reportCompleted (signed with the claim's
                   temporary credentials) while a creator creates N tasks with a bounded number in
                   flight; lifecycles/s = tasks completed / (last completion - first create sent);
                   each task's queue wait, and how much of it the backlog ahead of it leaves
                   unexplained (see queue_wait). `--shape waiting` creates with 4 in flight
                   instead of 16, so that the workers wait in long polls and are woken as tasks
                   arrive rather than find a backlog.
2. dispatch        W workers wait in claimWork on an empty task queue; tasks are created one at a
                   time; latency from the createTask response (the commit) to the waiting worker's
                   claimWork response, and from the createTask request being sent.
3. claim cost      p50 of claimWork(tasks=1) with 1,000 pending tasks, then with 100,000 (the bulk is
                   copied in SQL from a task created over HTTP), and their ratio.
4. auth cost      the server's CPU per signed call (Hawk, role expansion, scope check) less per
                   unsigned ping, as bench/edge.py measures it, and its share of a lifecycle's
                   server CPU (three signed calls).
5. poll protocol   with --protocol poll, beside claimWork in the same run: K workers loop
                   pollTaskUrls' queues (Get Messages, numofmessages=1) -> claimTask quoting the
                   message -> Delete Message -> reportCompleted; and the delay from createTask's
                   response until a polling worker (1 s sleep after an empty round) has the message.

Timings are printed, never asserted; --json FILE also writes them (for bench/aims.py). See
bench/README.md. Run: .venv/bin/python bench/lifecycle.py
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import random
import re
import secrets
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

# httpcore tries `import sniffio` on every request; without sniffio installed each failed import
# searches sys.path again (~0.15 ms of bench CPU per request). Recording it as absent makes it instant.
if "sniffio" not in sys.modules:
    try:
        import sniffio  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        sys.modules["sniffio"] = None  # type: ignore[assignment]

import httpx
import mohawk  # type: ignore[import-untyped]
import orjson

sys.path.insert(0, str(Path(__file__).parent / "peers"))  # bench/peers/cpu.py, as the peers import it
import cpu

ROOT_CLIENT_ID = "static/taskyard/root"
PG_ADMIN_URL = os.environ.get("TASKYARD_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
CLK_TCK = os.sysconf("SC_CLK_TCK")
CPUS = os.cpu_count() or 1
TARGETS = {  # the project's targets, for PostgreSQL unless named for SQLite
    "lifecycles_per_s": ">= 500",
    "lifecycles_per_s_sqlite": ">= 600",
    "queue_wait_excess_s": "<= 2",
    "dispatch_commit_p50": "<= 5",
    "dispatch_commit_p99": "<= 50",
    "server_cpu_ms": "<= 1.5",
    "claim_ratio": "<= 1.5",
}
now = time.perf_counter
CALL_KINDS = {("PUT", "task"): "createTask", ("POST", "claim-work"): "claimWork", ("POST", "task"): "report"}


# --------------------------------------------------------------------------- Hawk, as taskcluster-client


def slugid() -> str:
    """A "nice" slugid (first bit clear), as taskcluster's slugid.nice()."""
    raw = bytearray(uuid.uuid4().bytes)
    raw[0] &= 0x7F
    return base64.urlsafe_b64encode(bytes(raw)).decode()[:22]


def hawk_ext(certificate: str | None) -> str:
    """The Hawk `ext` as taskcluster.client.BaseClient.makeHawkExt builds it (no authorizedScopes)."""
    ext: dict[str, Any] = {}
    if certificate:
        ext["certificate"] = json.loads(certificate)
    encoded = base64.encodebytes(json.dumps(ext, separators=(",", ":")).encode())
    return encoded.strip().replace(b"\n", b"").replace(b"+", b"-").replace(b"/", b"_").decode()


@dataclass(frozen=True)
class Creds:
    client_id: str
    access_token: str = field(repr=False)
    ext: str = ""

    @classmethod
    def permanent(cls, client_id: str, access_token: str) -> Creds:
        return cls(client_id, access_token, hawk_ext(None))

    @classmethod
    def from_claim(cls, credentials: dict[str, str]) -> Creds:
        """The temporary credentials of a claim: clientId, accessToken and the certificate in `ext`."""
        return cls(
            credentials["clientId"],
            credentials["accessToken"],
            hawk_ext(credentials.get("certificate")),
        )


class Api:
    """The queue API; each actor (worker, creator) gets its own `Session`, as separate machines would."""

    def __init__(self, root_url: str, client_kind: str = "httpx") -> None:
        self.client_kind = client_kind
        self.root_url = root_url
        self.base = root_url + "/api/queue/v1"
        self.errors: Counter[str] = Counter()
        self.error_samples: list[str] = []
        self._sessions: list[Session] = []
        self.latencies: dict[str, list[float]] | None = None  # per call kind, while recording

    def session(self) -> Session:
        """A connection-reusing client of its own: one keep-alive connection, no shared pool to scan."""
        session = RawSession(self) if self.client_kind == "raw" else Session(self)
        self._sessions.append(session)
        return session

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self._sessions), return_exceptions=True)
        self._sessions.clear()


class Session:
    """One async httpx client; requests signed with mohawk exactly as taskcluster-client signs them."""

    def __init__(self, api: Api) -> None:
        self.api = api
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        self.client = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(120.0, connect=10.0))

    def signed(self, method: str, url: str, payload: bytes, creds: Creds) -> dict[str, str]:
        sender = mohawk.Sender(
            credentials={"id": creds.client_id, "key": creds.access_token, "algorithm": "sha256"},
            ext=creds.ext,
            url=url,
            method=method,
            content=payload,
            content_type="application/json" if payload else "",
        )
        headers = {"Authorization": sender.request_header}
        if payload:
            headers["Content-Type"] = "application/json"
        return headers

    async def call(self, method: str, path: str, body: Any, creds: Creds) -> tuple[int, Any]:
        url = self.api.base + path
        payload = orjson.dumps(body) if body is not None else b""
        headers = self.signed(method, url, payload, creds)
        sent = now()
        status, content = await self.send(method, url, payload, headers)
        took = now() - sent
        data = orjson.loads(content) if content else None
        self.record(method, path, status, data, content, took)
        return status, data

    async def send(self, method: str, url: str, payload: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        response = await self.client.request(method, url, content=payload, headers=headers)
        return response.status_code, response.content

    async def unsigned(self, kind: str, method: str, url: str) -> tuple[int, bytes]:
        """A request to a signed URL (the poll queues'): no Hawk; timed under `kind`."""
        sent = now()
        status, content = await self.send(method, url, b"", {})
        api = self.api
        if api.latencies is not None:
            api.latencies.setdefault(kind, []).append(now() - sent)
        if status >= 300:
            api.errors[f"{method} {kind} -> {status}"] += 1
            if len(api.error_samples) < 5:
                api.error_samples.append(f"{kind}: {content[:300].decode(errors='replace')}")
        return status, content

    def record(self, method: str, path: str, status: int, data: Any, content: bytes, took: float) -> None:
        api = self.api
        if api.latencies is not None:
            kind = CALL_KINDS.get((method, path.split("/")[1]), path)
            if kind == "claimWork" and not (data or {}).get("tasks"):
                kind = "claimWork (empty)"
            api.latencies.setdefault(kind, []).append(took)
        if status >= 300:
            key = f"{method} {path.split('/')[1]} -> {status}"
            api.errors[key] += 1
            if len(api.error_samples) < 5:
                api.error_samples.append(f"{key}: {content[:300].decode(errors='replace')}")

    async def close(self) -> None:
        await self.client.aclose()


class RawSession(Session):
    """The same signed requests over one kept-alive asyncio stream: HTTP/1.1 by hand, a fraction of
    httpx's CPU per request (this machine's cores are shared with the server and the database)."""

    IDLE_LIMIT = 4.0  # uvicorn closes connections idle for 5 s; reconnect before that

    def __init__(self, api: Api) -> None:
        self.api = api
        host_port = api.root_url.split("://", 1)[1]
        self.host, port = host_port.rsplit(":", 1)
        self.port = int(port)
        self.host_header = host_port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.last_used = 0.0

    async def send(self, method: str, url: str, payload: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if self.writer is None or now() - self.last_used > self.IDLE_LIMIT:
            await self.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None and self.writer is not None
        target = url.split(self.host_header, 1)[1]
        lines = [
            f"{method} {target} HTTP/1.1",
            f"Host: {self.host_header}",
            f"Content-Length: {len(payload)}",
        ]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        try:
            self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
            head = await self.reader.readuntil(b"\r\n\r\n")
            status_line, *header_lines = head.decode("latin-1").split("\r\n")
            fields = dict(h.split(":", 1) for h in header_lines if ":" in h)
            fields = {k.strip().lower(): v.strip() for k, v in fields.items()}
            if "transfer-encoding" in fields:
                raise RuntimeError("the raw client reads Content-Length bodies only; use --client httpx")
            content = await self.reader.readexactly(int(fields.get("content-length", "0")))
        except BaseException:
            await self.close()  # mid-request (a cancelled long poll, an error): the stream is unusable
            raise
        if fields.get("connection", "").lower() == "close":
            await self.close()
        self.last_used = now()
        return int(status_line.split(" ", 2)[1]), content

    async def close(self) -> None:
        writer, self.reader, self.writer = self.writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def iso(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"


def task_definition(task_queue_id: str, task_group_id: str) -> dict[str, Any]:
    """A small task. The dates are fixed per phase, as a decision task creating a graph does."""
    start = datetime.now(UTC)
    return {
        "taskQueueId": task_queue_id,
        "schedulerId": "bench",
        "taskGroupId": task_group_id,
        "created": iso(start),
        "deadline": iso(start + timedelta(hours=2)),
        "expires": iso(start + timedelta(days=1)),
        "priority": "lowest",
        "retries": 5,
        "payload": {"command": ["true"], "maxRunTime": 600},
        "metadata": {
            "name": "bench task",
            "description": "a task of bench/lifecycle.py",
            "owner": "bench@example.com",
            "source": "https://example.com/taskyard/bench",
        },
        "tags": {"purpose": "bench"},
    }


def new_queue(kind: str) -> str:
    return f"bench/{kind}-{secrets.token_hex(4)}"


# --------------------------------------------------------------------------- processes and CPU


# The /proc accounting is bench/peers/cpu.py's (standard library only, so the peers' own scripts,
# in their own virtual environment, use it too).
proc_cpu_seconds = cpu.process
tree_cpu_seconds = cpu.tree  # `serve --processes N`: the parent and its API processes
postgres_cpu_seconds = cpu.postgres  # the scratch database's backends and PostgreSQL's shared ones


def machine_busy_seconds() -> float:
    """CPU time every core of the machine spent busy (not idle, not waiting for I/O), summed."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK  # all but idle and iowait


@dataclass
class CpuSnapshot:
    at: float
    server: float
    client: float
    postgres: float
    machine: float


def cpu_snapshot(server: Server) -> CpuSnapshot:
    database = server.db_url.rsplit("/", 1)[1] if server.db_url else None
    return CpuSnapshot(
        now(),
        tree_cpu_seconds(server.pid),
        time.process_time(),
        postgres_cpu_seconds(database) if database else 0.0,
        machine_busy_seconds(),
    )


def cpu_usage(a: CpuSnapshot, b: CpuSnapshot) -> dict[str, float]:
    """Percent of one core used by each party between two snapshots; `other` is everything else."""
    wall = max(b.at - a.at, 1e-9)
    usage = {
        "server": 100 * (b.server - a.server) / wall,
        "client": 100 * (b.client - a.client) / wall,
        "postgres": 100 * (b.postgres - a.postgres) / wall,
        "machine": 100 * (b.machine - a.machine) / wall,
    }
    usage["other"] = max(0.0, usage["machine"] - usage["server"] - usage["client"] - usage["postgres"])
    return usage


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def taskyard_command() -> list[str]:
    script = Path(sys.executable).parent / "taskyard"
    return [str(script)] if script.exists() else [sys.executable, "-m", "taskyard.cli.main"]


RUNNING: list[subprocess.Popen[bytes]] = []  # killed on any exit, even an unexpected one


def kill_leftovers() -> None:
    for proc in RUNNING:
        if proc.poll() is None:
            proc.kill()
            with contextlib.suppress(Exception):
                proc.wait(5)


class Server:
    """One `taskyard serve` subprocess."""

    def __init__(
        self,
        data_dir: Path,
        db_url: str | None,
        token: str,
        command: list[str],
        *,
        serve_args: Sequence[str] = (),
    ) -> None:
        self.serve_args = list(serve_args)
        self.command = command
        self.data_dir = data_dir
        self.db_url = db_url
        self.token = token
        self.port = free_port()
        self.root_url = f"http://127.0.0.1:{self.port}"
        self.log_path = data_dir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        cmd = [*self.command, "serve", "--port", str(self.port), "--data-dir", str(self.data_dir)]
        if self.db_url:
            cmd += ["--db", self.db_url]
        cmd += self.serve_args
        env = {k: v for k, v in os.environ.items() if not k.startswith("TASKYARD_")}
        env.update(TASKYARD_ROOT_ACCESS_TOKEN=self.token, TASKYARD_LOG_LEVEL="WARNING")
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        RUNNING.append(self.proc)
        give_up = now() + 30
        async with httpx.AsyncClient(timeout=2) as client:
            while now() < give_up:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"taskyard serve exited with {self.proc.returncode}:\n{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    r = await client.get(f"{self.root_url}/api/queue/v1/ping")
                    if r.status_code == 200:
                        return
                await asyncio.sleep(0.1)
        raise RuntimeError(f"taskyard serve did not answer ping within 30 s:\n{self.log_tail()}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


class Profiler:
    """py-spy recording the server during one phase, if asked for and available."""

    def __init__(self, out_dir: Path | None, pid: int, name: str) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.path: Path | None = None
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if out_dir is None or not Path(spy).exists():
            if out_dir is not None:
                print("  (py-spy not found; not profiling)")
            return
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path = out_dir / f"{name}.txt"
        cmd = [
            spy,
            "record",
            "--pid",
            str(pid),
            "--rate",
            "250",
            "--gil",
            "--format",
            "raw",
            "-o",
            str(self.path),
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        RUNNING.append(self.proc)
        time.sleep(0.5)  # let it attach

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if self.path is not None and self.path.exists():
            print(f"  py-spy profile of the server: {self.path}")
            summarise_profile(self.path)


def summarise_profile(path: Path, top: int = 15) -> None:
    """The hottest frames of a py-spy raw (collapsed stacks) profile, by self and inclusive time."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    if not total:
        return
    print(f"    top frames by self time ({total} samples):")
    for frame, n in own.most_common(top):
        print(f"      {100 * n / total:5.1f}%  {frame[:150]}")
    print("    top taskyard/starlette/uvicorn/h11/db frames by inclusive time:")
    keep = ("taskyard", "starlette", "uvicorn", "h11", "asyncpg", "aiosqlite", "sqlite3", "orjson")
    shown = 0
    for frame, n in inclusive.most_common():
        if any(k in frame for k in keep):
            print(f"      {100 * n / total:5.1f}%  {frame[:150]}")
            shown += 1
            if shown >= top:
                break


# --------------------------------------------------------------------------- statistics


def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def ms(seconds: float) -> float:
    return seconds * 1000


# --------------------------------------------------------------------------- 1. throughput


async def create_many(
    api: Api,
    root: Creds,
    definition: dict[str, Any],
    n: int,
    inflight: int,
    answered: dict[str, float] | None = None,
) -> tuple[list[str], float, float]:
    """Create `n` tasks with at most `inflight` requests in flight; (ids created, first send, last done).
    `answered`, if given, gets each created task's moment of createTask's answer (its commit)."""
    ids = iter(range(n))
    answered = {} if answered is None else answered
    created: list[str] = []
    first = now()
    # The group's first task alone, as a decision task would, then the rest concurrently. (Before
    # commit 40b4b83, concurrent first createTasks into a new group raced and some answered 409.)
    task_id = slugid()
    status, _ = await api.session().call("PUT", f"/task/{task_id}", definition, root)
    if status == 200:
        created.append(task_id)
        answered[task_id] = now()
    next(ids, None)

    async def creator() -> None:
        session = api.session()
        for _ in ids:
            task_id = slugid()
            status, _ = await session.call("PUT", f"/task/{task_id}", definition, root)
            if status == 200:
                created.append(task_id)
                answered[task_id] = now()

    await asyncio.gather(*(creator() for _ in range(inflight)))
    return created, first, now()


async def complete_claim(session: Session, claim: dict[str, Any]) -> bool:
    creds = Creds.from_claim(claim["credentials"])
    task_id, run_id = claim["status"]["taskId"], claim["runId"]
    status, _ = await session.call("POST", f"/task/{task_id}/runs/{run_id}/completed", None, creds)
    return status == 200


async def drain(api: Api, root: Creds, definition: dict[str, Any], workers: list[asyncio.Task[None]]) -> None:
    """Let workers that were told to stop leave gracefully: one last task wakes each parked long poll,
    which claims it, reports it and exits. Cancelling the polls instead would hang up on claimWork
    mid-flight, and the server does not always survive that (see README)."""
    session = api.session()
    give_up = now() + 60
    while alive := [w for w in workers if not w.done()]:
        if now() > give_up:
            for w in alive:
                w.cancel()
            break
        await session.call("PUT", f"/task/{slugid()}", definition, root)
        await asyncio.wait(alive, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
    await asyncio.gather(*workers, return_exceptions=True)


async def phase_throughput(api: Api, root: Creds, server: Server, args: argparse.Namespace) -> dict[str, Any]:
    n, k = args.tasks, args.workers
    print(
        f"  throughput: {k} workers claimWork(tasks=1) -> reportCompleted; creating {n} tasks, "
        f"{args.create_inflight} in flight"
    )
    task_queue_id = new_queue("tput")
    definition = task_definition(task_queue_id, slugid())
    target = n
    completed = 0
    last_completion = 0.0
    done = asyncio.Event()
    body_base = {"workerGroup": "bench", "tasks": 1}
    answered: dict[str, float] = {}  # taskId: createTask's answer
    claimed: dict[str, float] = {}  # taskId: the claimWork answer that handed it out

    async def worker(i: int) -> None:
        nonlocal completed, last_completion
        body = {**body_base, "workerId": f"tput-{i}"}
        session = api.session()
        while not done.is_set():
            status, reply = await session.call("POST", f"/claim-work/{task_queue_id}", body, root)
            arrived = now()
            if status != 200:
                await asyncio.sleep(0.05)
                continue
            for claim in reply["tasks"]:
                claimed[claim["status"]["taskId"]] = arrived
                if await complete_claim(session, claim) and not done.is_set():
                    completed += 1
                    last_completion = now()
                    if completed >= target:
                        done.set()

    workers = [asyncio.create_task(worker(i)) for i in range(k)]
    await asyncio.sleep(0.3)  # let the workers park in claimWork
    profiler = Profiler(args.profile, server.pid, f"{args.backend_name}-throughput")
    before = cpu_snapshot(server)
    api.latencies = {}
    created, first, created_at = await create_many(api, root, definition, n, args.create_inflight, answered)
    target = len(created)
    if completed >= target:
        done.set()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), args.phase_timeout)
    after = cpu_snapshot(server)
    latencies, api.latencies = api.latencies, None
    profiler.stop()
    done.set()
    await drain(api, root, definition, workers)
    wall = (last_completion or now()) - first
    result: dict[str, Any] = {
        "lifecycles_per_s": completed / wall if wall > 0 else 0.0,
        "creates_per_s": len(created) / (created_at - first),
        "completed": completed,
        "created": len(created),
        "wall_s": wall,
        "cpu": cpu_usage(before, after),
    }
    cpu = result["cpu"]
    span = after.at - before.at
    per = {party: 10 * cpu[party] * span / max(completed, 1) for party in ("server", "client", "postgres")}
    result["cpu_ms_per_lifecycle"] = per
    # The bench client does the same work for every lifecycle in every round, so its CPU per
    # lifecycle moves only with the machine's speed: the others' relative to it cancel that drift.
    result["cpu_relative_to_client"] = {
        party: per[party] / per["client"] for party in ("server", "postgres") if per["client"]
    }
    result["one_core_ceiling"] = 1000 / per["server"] if per["server"] else None
    result["queue_wait"] = queue_wait(answered, claimed)
    print(
        f"    {completed}/{len(created)} tasks completed in {wall:.2f} s: "
        f"{result['lifecycles_per_s']:.0f} lifecycles/s (creates alone: {result['creates_per_s']:.0f}/s)"
    )
    print(
        f"    CPU (% of one core): server {cpu['server']:.0f}, bench client {cpu['client']:.0f}"
        + (f", postgres {cpu['postgres']:.0f}" if args.backend_name == "postgres" else "")
        + f", other processes {cpu['other']:.0f}; machine busy {cpu['machine']:.0f} of {100 * CPUS}"
    )
    print(
        f"    CPU ms per lifecycle: server {per['server']:.2f}, bench client {per['client']:.2f}"
        + (f", postgres {per['postgres']:.2f}" if args.backend_name == "postgres" else "")
        + f"; one server core at this cost tops out at {result['one_core_ceiling'] or 0:.0f} lifecycles/s"
    )
    if relative := result["cpu_relative_to_client"]:
        print(
            "    CPU per lifecycle relative to the bench client's (its work is the same every round, so"
            f" this cancels the machine's drift): server {relative['server']:.2f}"
            + (f", postgres {relative['postgres']:.2f}" if args.backend_name == "postgres" else "")
        )
    if cpu["other"] > 20:
        print("    warning: other processes used a good share of the CPUs; figures are pessimistic")
    print(
        "    client-side latency, p50/p99 ms: "
        + ", ".join(
            f"{kind} {ms(percentile(v, 50)):.1f}/{ms(percentile(v, 99)):.1f} (n={len(v)})"
            for kind, v in sorted(latencies.items())
            if kind != "claimWork (empty)"
        )
    )
    if wait := result["queue_wait"]:
        print(
            f"    queue wait (createTask's answer -> claimWork's): p50 {wait['p50_s']:.2f} s,"
            f" max {wait['max_s']:.2f} s; beyond draining the backlog ahead of it:"
            f" p99 {wait['excess_p99_s']:.2f} s, max {wait['excess_max_s']:.2f} s"
        )
    if cpu["client"] > 85:
        print("    warning: the load generator was near one full core; the figure may be client-bound")
    return result


def queue_wait(answered: dict[str, float], claimed: dict[str, float]) -> dict[str, float] | None:
    """How long the tasks waited in the queue under load, and how much of it the backlog explains.

    A task's wait runs from createTask's answer to the answer of the claimWork that handed it out.
    The tasks answered before it are the backlog ahead of it: had the queue served them first, it
    would have been handed out with the next claim after they all were, the claim whose rank equals
    its own rank by creation, at whatever pace the workers drained the queue. `excess` is how much
    later than that it came: a fair queue keeps it near zero, a task passed over again and again
    shows it, however slow the phase."""
    pairs = sorted((answered[t], claimed[t]) for t in answered if t in claimed)
    if not pairs:
        return None
    claims = sorted(k for _, k in pairs)
    waits = [k - c for c, k in pairs]
    excess = [k - max(c, claims[i]) for i, (c, k) in enumerate(pairs)]
    return {
        "p50_s": percentile(waits, 50),
        "max_s": max(waits),
        "excess_p99_s": percentile(excess, 99),
        "excess_max_s": max(excess),
        "tasks": len(pairs),
    }


# --------------------------------------------------------------------------- 2. dispatch latency


async def phase_dispatch(api: Api, root: Creds, server: Server, args: argparse.Namespace) -> dict[str, Any]:
    w, samples, warmup = args.dispatch_workers, args.dispatch_samples, 10
    print(f"  dispatch: {w} workers waiting in claimWork; {samples} tasks created one at a time")
    task_queue_id = new_queue("dispatch")
    definition = task_definition(task_queue_id, slugid())
    expected: dict[str, tuple[asyncio.Future[float], asyncio.Future[None]]] = {}
    stop = False

    async def worker(i: int) -> None:
        body = {"workerGroup": "bench", "workerId": f"dispatch-{i}", "tasks": 1}
        session = api.session()
        while not stop:
            status, reply = await session.call("POST", f"/claim-work/{task_queue_id}", body, root)
            arrived = now()
            if status != 200:
                await asyncio.sleep(0.05)
                continue
            for claim in reply["tasks"]:
                claimed, reported = expected.get(claim["status"]["taskId"], (None, None))
                if claimed is not None and not claimed.done():
                    claimed.set_result(arrived)
                await complete_claim(session, claim)
                if reported is not None and not reported.done():
                    reported.set_result(None)

    workers = [asyncio.create_task(worker(i)) for i in range(w)]
    await asyncio.sleep(0.5)
    loop = asyncio.get_running_loop()
    from_commit: list[float] = []
    from_send: list[float] = []
    lost = 0
    creator = api.session()
    for i in range(warmup + samples):
        task_id = slugid()
        claimed, reported = loop.create_future(), loop.create_future()
        expected[task_id] = (claimed, reported)
        sent = now()
        status, _ = await creator.call("PUT", f"/task/{task_id}", definition, root)
        committed = now()
        if status != 200:
            continue
        try:
            arrived = await asyncio.wait_for(claimed, 30)
            await asyncio.wait_for(reported, 30)
        except TimeoutError:
            lost += 1
            continue
        if i >= warmup:
            from_commit.append(arrived - committed)
            from_send.append(arrived - sent)
        await asyncio.sleep(0.01)  # the worker that claimed is back in claimWork before the next create
    stop = True
    await drain(api, root, definition, workers)
    result = {
        "commit_p50": ms(percentile(from_commit, 50)),
        "commit_p99": ms(percentile(from_commit, 99)),
        "send_p50": ms(percentile(from_send, 50)),
        "send_p99": ms(percentile(from_send, 99)),
        "samples": len(from_commit),
        "lost": lost,
    }
    print(
        f"    from createTask's response: p50 {result['commit_p50']:.2f} ms,"
        f" p99 {result['commit_p99']:.2f} ms"
        f" (min {ms(min(from_commit, default=0)):.2f}, max {ms(max(from_commit, default=0)):.2f})"
    )
    print(
        f"    from createTask's request:  p50 {result['send_p50']:.2f} ms, p99 {result['send_p99']:.2f} ms"
        f"  [{len(from_commit)} samples{f', {lost} never claimed' if lost else ''}]"
    )
    return result


# --------------------------------------------------------------------------- 3. claim cost vs backlog


async def measure_claims(api: Api, root: Creds, task_queue_id: str, count: int) -> list[float]:
    """Latency of `count` sequential claimWork(tasks=1) calls that each find a task (after 10 warm-ups)."""
    body = {"workerGroup": "bench", "workerId": "backlog-0", "tasks": 1}
    latencies = []
    session = api.session()
    for i in range(count + 10):
        sent = now()
        status, reply = await session.call("POST", f"/claim-work/{task_queue_id}", body, root)
        took = now() - sent
        if status == 200 and reply["tasks"] and i >= 10:
            latencies.append(took)
    return latencies


class Backlog:
    """Copies a pending task's rows (tasks + pending_runs; its group row exists) under new task ids."""

    def __init__(self, server: Server) -> None:
        self.server = server

    async def fill(self, task_queue_id: str, count: int) -> None:
        raise NotImplementedError

    @staticmethod
    def copy_sql(table: str, columns: list[str], replace: dict[str, str], source: str) -> str:
        chosen = ", ".join(replace.get(c, f"s.{c}") for c in columns)
        return f"INSERT INTO {table} ({', '.join(columns)}) SELECT {chosen} FROM {table} s WHERE {source}"


class SQLiteBacklog(Backlog):
    async def fill(self, task_queue_id: str, count: int) -> None:
        await asyncio.to_thread(self._fill, task_queue_id, count)

    def _fill(self, task_queue_id: str, count: int) -> None:
        conn = sqlite3.connect(self.server.data_dir / "taskyard.sqlite3", timeout=30, isolation_level=None)
        try:
            template = conn.execute(
                "SELECT task_id, run_id FROM pending_runs WHERE task_queue_id = ? LIMIT 1", (task_queue_id,)
            ).fetchone()
            task_cols = [r[1] for r in conn.execute("PRAGMA table_info(tasks)")]
            pending_cols = [r[1] for r in conn.execute("PRAGMA table_info(pending_runs)")]
            insert_task = self.copy_sql("tasks", task_cols, {"task_id": "?1"}, "s.task_id = ?2")
            insert_pending = self.copy_sql(
                "pending_runs", pending_cols, {"task_id": "?1", "inserted": "?3"}, "s.task_id = ?2"
            )
            inserted = int(time.time() * 1000)
            ids = [slugid() for _ in range(count)]
            for start in range(0, count, 10_000):  # short write transactions: the server keeps working
                chunk = [(i, template[0], inserted) for i in ids[start : start + 10_000]]
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(insert_task, [c[:2] for c in chunk])
                conn.executemany(insert_pending, chunk)
                conn.execute("COMMIT")
        finally:
            conn.close()


class PostgresBacklog(Backlog):
    async def fill(self, task_queue_id: str, count: int) -> None:
        import asyncpg

        assert self.server.db_url is not None
        conn = await asyncpg.connect(self.server.db_url)
        try:
            template = await conn.fetchval(
                "SELECT task_id FROM pending_runs WHERE task_queue_id = $1 LIMIT 1", task_queue_id
            )
            columns = {}
            for table in ("tasks", "pending_runs"):
                rows = await conn.fetch(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = $1 "
                    "ORDER BY ordinal_position",
                    table,
                )
                columns[table] = [r["column_name"] for r in rows]
            source = "s.task_id = $2"
            ids_join = " CROSS JOIN unnest($1::text[]) AS ids(id)"
            insert_task = self.copy_sql("tasks", columns["tasks"], {"task_id": "ids.id"}, source)
            insert_task = insert_task.replace(" FROM tasks s", " FROM tasks s" + ids_join)
            insert_pending = self.copy_sql(
                "pending_runs", columns["pending_runs"], {"task_id": "ids.id", "inserted": "$3"}, source
            )
            insert_pending = insert_pending.replace(" FROM pending_runs s", " FROM pending_runs s" + ids_join)
            inserted = int(time.time() * 1000)
            ids = [slugid() for _ in range(count)]
            for start in range(0, count, 20_000):
                chunk = ids[start : start + 20_000]
                async with conn.transaction():
                    await conn.execute(insert_task, chunk, template)
                    await conn.execute(insert_pending, chunk, template, inserted)
            # What autovacuum would have done by the time a real backlog reached this size.
            await conn.execute("ANALYZE tasks")
            await conn.execute("ANALYZE pending_runs")
        finally:
            await conn.close()


async def phase_claim_cost(api: Api, root: Creds, server: Server, args: argparse.Namespace) -> dict[str, Any]:
    small, big, samples = args.small_backlog, args.backlog, args.claim_samples
    print(f"  claim cost: p50 of {samples} claimWork(tasks=1) with {small:,} then {big:,} pending tasks")
    task_queue_id = new_queue("backlog")
    definition = task_definition(task_queue_id, slugid())
    created, first, last = await create_many(api, root, definition, small, args.create_inflight)
    print(f"    created {len(created):,} tasks over HTTP in {last - first:.1f} s")
    small_latencies = await measure_claims(api, root, task_queue_id, samples)
    remaining = len(created) - len(small_latencies) - 10
    filler: Backlog = PostgresBacklog(server) if args.backend_name == "postgres" else SQLiteBacklog(server)
    started = now()
    await filler.fill(task_queue_id, big - remaining)
    print(f"    inserted {big - remaining:,} pending tasks in SQL in {now() - started:.1f} s")
    big_latencies = await measure_claims(api, root, task_queue_id, samples)
    result = {
        "small_p50": ms(percentile(small_latencies, 50)),
        "big_p50": ms(percentile(big_latencies, 50)),
        "small_p99": ms(percentile(small_latencies, 99)),
        "big_p99": ms(percentile(big_latencies, 99)),
        "big": big,
        "small": small,
    }
    result["ratio"] = result["big_p50"] / result["small_p50"]
    print(
        f"    {small:,} pending: p50 {result['small_p50']:.2f} ms (p99 {result['small_p99']:.2f});"
        f" {big:,} pending: p50 {result['big_p50']:.2f} ms (p99 {result['big_p99']:.2f});"
        f" ratio {result['ratio']:.2f}"
    )
    return result


# --------------------------------------------------------------------------- backends


async def pg_admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN_URL, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def database_url(url: str, database: str) -> str:
    """`url` naming `database` instead, its query (`?host=/run/postgresql` ...) kept."""
    return urlsplit(url)._replace(path="/" + database).geturl()


@contextlib.asynccontextmanager
async def scratch_database(name: str) -> Any:
    """Yield the URL of a fresh PostgreSQL database (None if PostgreSQL is unavailable); drop it after."""
    if name != "postgres":
        yield None
        return
    db_name = f"taskyard_bench_{secrets.token_hex(4)}"
    try:
        await pg_admin(f"CREATE DATABASE {db_name}")
    except Exception as exc:
        print(f"  PostgreSQL at {PG_ADMIN_URL} is unavailable ({exc}); skipping PostgreSQL")
        yield None
        return
    try:
        yield database_url(PG_ADMIN_URL, db_name)
    finally:
        try:
            await pg_admin(f"DROP DATABASE IF EXISTS {db_name} WITH (FORCE)")
        except Exception as exc:
            print(f"  could not drop scratch database {db_name}: {exc}")


@contextlib.asynccontextmanager
async def scratch_server(name: str, what: str) -> Any:
    """Yield a started `taskyard serve` on a fresh database of backend `name` (`sqlite` or
    `postgres`) and the options of TaskCluster's clients for its root client, or None if
    PostgreSQL is unavailable; stop it and remove its data directory after. `what` names the
    bench in the directory's name."""
    data_dir = Path(tempfile.mkdtemp(prefix=f"taskyard-bench-{what}-{name}-"))
    try:
        async with scratch_database(name) as pg_url:
            if name == "postgres" and pg_url is None:
                yield None
                return
            token = secrets.token_urlsafe(33)
            server = Server(
                data_dir, pg_url or f"sqlite:///{data_dir}/taskyard.sqlite3", token, taskyard_command()
            )
            await server.start()
            options = {
                "rootUrl": server.root_url,
                "credentials": {"clientId": ROOT_CLIENT_ID, "accessToken": token},
            }
            try:
                yield server, options
            finally:
                server.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


# --------------------------------------------------------------------------- 4. the poll protocol

MESSAGE = re.compile(
    rb"<MessageId>(.*?)</MessageId>.*?<PopReceipt>(.*?)</PopReceipt>.*?<MessageText>(.*?)</MessageText>", re.S
)
Message = tuple[str, str, dict[str, Any]]  # messageId, pop receipt, decoded text


async def poll_queues(session: Session, root: Creds, task_queue_id: str) -> list[dict[str, str]]:
    status, reply = await session.call("GET", f"/poll-task-url/{task_queue_id}", None, root)
    if status != 200:
        raise RuntimeError(f"pollTaskUrls answered {status}: {reply}")
    return list(reply["queues"])


async def poll_round(
    session: Session, queues: list[dict[str, str]], count: int
) -> tuple[dict[str, str] | None, list[Message]]:
    """One round as docs/poll.md says: the queues in order, up to the first that holds messages."""
    for entry in queues:
        _, content = await session.unsigned("poll", "GET", f"{entry['signedPollUrl']}&numofmessages={count}")
        found = MESSAGE.findall(content)
        if found:
            decoded = [(m.decode(), r.decode(), orjson.loads(base64.b64decode(t))) for m, r, t in found]
            return entry, decoded
    return None, []


async def claim_message(
    session: Session, root: Creds, entry: dict[str, str], message: Message, worker_id: str
) -> dict[str, Any] | None:
    """claimTask quoting the message, then delete the message (after a claim or a 4xx)."""
    message_id, receipt, text = message
    body = {
        "workerGroup": "bench",
        "workerId": worker_id,
        "messageId": message_id,
        "receipt": receipt,
        "signature": text["signature"],
    }
    status, claim = await session.call(
        "POST", f"/task/{text['taskId']}/runs/{text['runId']}/claim", body, root
    )
    url = entry["signedDeleteUrl"].replace("{{messageId}}", message_id)
    await session.unsigned("delete", "DELETE", url.replace("{{popReceipt}}", quote(receipt, safe="")))
    return claim if status == 200 else None


async def phase_poll_throughput(
    api: Api, root: Creds, server: Server, args: argparse.Namespace
) -> dict[str, Any]:
    """Throughput through pollTaskUrls, Get Messages, claimTask, Delete Message and reportCompleted."""
    n, k = args.tasks, args.workers
    print(f"  poll throughput: {k} poll workers (numofmessages=1, 50 ms after an empty round); {n} tasks")
    task_queue_id = new_queue("poll")
    definition = task_definition(task_queue_id, slugid())
    completed, last_completion, target = 0, 0.0, n
    done = asyncio.Event()

    async def worker(i: int) -> None:
        nonlocal completed, last_completion
        session = api.session()
        queues = await poll_queues(session, root, task_queue_id)
        while not done.is_set():
            entry, messages = await poll_round(session, queues, 1)
            if entry is None:
                await asyncio.sleep(0.05)
                continue
            for message in messages:
                claim = await claim_message(session, root, entry, message, f"poll-{i}")
                if claim and await complete_claim(session, claim) and not done.is_set():
                    completed += 1
                    last_completion = now()
                    if completed >= target:
                        done.set()

    workers = [asyncio.create_task(worker(i)) for i in range(k)]
    await asyncio.sleep(0.3)
    before = cpu_snapshot(server)
    api.latencies = {}
    created, first, _ = await create_many(api, root, definition, n, args.create_inflight)
    target = len(created)
    if completed >= target:
        done.set()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), args.phase_timeout)
    after = cpu_snapshot(server)
    latencies, api.latencies = api.latencies, None
    done.set()
    await asyncio.gather(*workers, return_exceptions=True)
    wall = (last_completion or now()) - first
    rate = completed / wall if wall > 0 else 0.0
    per_server = 10 * cpu_usage(before, after)["server"] * (after.at - before.at) / max(completed, 1)
    print(f"    {completed}/{len(created)} tasks completed in {wall:.2f} s: {rate:.0f} lifecycles/s")
    print(f"    server CPU ms per lifecycle: {per_server:.2f}")
    print(
        "    client-side latency, p50/p99 ms: "
        + ", ".join(
            f"{kind} {ms(percentile(v, 50)):.1f}/{ms(percentile(v, 99)):.1f} (n={len(v)})"
            for kind, v in sorted(latencies.items())
        )
    )
    return {"lifecycles_per_s": rate, "completed": completed, "server_cpu_ms": per_server}


async def phase_poll_dispatch(
    api: Api, root: Creds, server: Server, args: argparse.Namespace
) -> dict[str, Any]:
    """Delay from createTask's response until a polling worker (1 s sleep after an empty round, as
    docs/poll.md says) has the message."""
    w, samples = args.dispatch_workers, args.poll_samples
    print(f"  poll dispatch: {w} poll workers, 1 s after an empty round; {samples} tasks one at a time")
    task_queue_id = new_queue("polldispatch")
    definition = task_definition(task_queue_id, slugid())
    expected: dict[str, asyncio.Future[float]] = {}
    stop = False

    async def worker(i: int) -> None:
        session = api.session()
        queues = await poll_queues(session, root, task_queue_id)
        await asyncio.sleep(random.uniform(0, 1.0))  # workers that started at different times
        while not stop:
            entry, messages = await poll_round(session, queues, 1)
            arrived = now()
            if entry is None:
                await asyncio.sleep(1.0)
                continue
            for message in messages:
                waiting = expected.get(message[2]["taskId"])
                if waiting is not None and not waiting.done():
                    waiting.set_result(arrived)
                claim = await claim_message(session, root, entry, message, f"polldispatch-{i}")
                if claim:
                    await complete_claim(session, claim)

    workers = [asyncio.create_task(worker(i)) for i in range(w)]
    await asyncio.sleep(1.5)
    loop = asyncio.get_running_loop()
    delays: list[float] = []
    creator = api.session()
    for _ in range(samples):
        task_id = slugid()
        expected[task_id] = loop.create_future()
        status, _ = await creator.call("PUT", f"/task/{task_id}", definition, root)
        committed = now()
        if status != 200:
            continue
        with contextlib.suppress(TimeoutError):
            delays.append(await asyncio.wait_for(expected[task_id], 30) - committed)
        await asyncio.sleep(random.uniform(0, 0.2))  # not in step with the workers' sleeps
    stop = True
    await asyncio.gather(*workers, return_exceptions=True)
    result = {"p50": ms(percentile(delays, 50)), "p99": ms(percentile(delays, 99)), "samples": len(delays)}
    print(
        f"    createTask's response -> message received: p50 {result['p50']:.0f} ms,"
        f" p99 {result['p99']:.0f} ms"
    )
    return result


def server_ticks(pid: int) -> tuple[int, int]:
    """The server's user and kernel CPU ticks so far (all its threads)."""
    fields = cpu._stat(pid)
    return int(fields[11]), int(fields[12])


async def edge_round(
    api: Api, server: Server, kind: str, requests: int, connections: int
) -> dict[str, float]:
    """`requests` of one kind over `connections` kept-alive connections, one kind at a time: `ping`
    (unsigned `GET /api/queue/v1/ping`: the server around a handler that does nothing) or `signed`
    (`GET /api/auth/v1/scopes/current` signed by the root client: the same plus Hawk, the role
    expansion and the scope check, around a handler that reads nothing from the database). The
    server's CPU per request (its user and kernel time apart) and the requests answered per second.
    `api.base` must be the auth service's."""
    creds = Creds.permanent(ROOT_CLIENT_ID, server.token)
    sessions = [api.session() for _ in range(connections)]
    each = max(1, requests // connections)
    ping = f"{server.root_url}/api/queue/v1/ping"

    async def send(session: Session) -> None:
        for _ in range(each):
            if kind == "ping":
                status, _ = await session.send("GET", ping, b"", {})
            else:
                status, _ = await session.call("GET", "/scopes/current", None, creds)
            if status != 200:
                raise RuntimeError(f"{kind}: answered {status}")

    user0, system0 = server_ticks(server.pid)
    started = time.perf_counter()
    await asyncio.gather(*(send(s) for s in sessions))
    took = time.perf_counter() - started
    user1, system1 = server_ticks(server.pid)
    await asyncio.gather(*(s.close() for s in sessions))
    done = each * len(sessions)
    seconds = (user1 - user0 + system1 - system0) / cpu.CLK_TCK
    return {
        "cpu_us": seconds / done * 1e6,
        "kernel_share": (system1 - system0) / max(1, user1 - user0 + system1 - system0),
        "per_s": done / took,
    }


AUTH_REQUESTS = 2000  # per kind per round
AUTH_ROUNDS = 3


async def phase_auth_cost(api: Api, root: Creds, server: Server, args: argparse.Namespace) -> dict[str, Any]:
    """What authentication and the scope check cost a signed call, on the server just measured:
    its CPU per signed call less per unsigned ping (`edge_round`, kinds alternating, the median of
    AUTH_ROUNDS rounds). No setting turns authentication off, so this is how its cost is measured;
    a lifecycle makes three signed calls (`run_backend` relates them to its server CPU)."""
    edge = Api(server.root_url, "raw")
    edge.base = server.root_url + "/api/auth/v1"
    try:
        await edge_round(edge, server, "signed", 200, 8)  # warm: caches, first imports
        rounds: dict[str, list[float]] = {"ping": [], "signed": []}
        for _ in range(AUTH_ROUNDS):
            for kind, found in rounds.items():
                found.append((await edge_round(edge, server, kind, AUTH_REQUESTS, 8))["cpu_us"])
    finally:
        await edge.close()
    ping, signed = (sorted(found)[len(found) // 2] for found in rounds.values())
    print(f"    server CPU per call: signed {signed:.0f} µs, unsigned ping {ping:.0f} µs")
    return {"ping_us": ping, "signed_us": signed, "us_per_call": signed - ping}


PHASES = (
    ("throughput", phase_throughput),
    ("auth", phase_auth_cost),
    ("poll", phase_poll_throughput),
    ("poll-dispatch", phase_poll_dispatch),
    ("dispatch", phase_dispatch),
    ("claim", phase_claim_cost),
)
POLL_PHASES = ("poll", "poll-dispatch")


async def run_phases(
    server: Server, token: str, args: argparse.Namespace, *, only: tuple[str, ...] = ()
) -> dict[str, Any]:
    root = Creds.permanent(ROOT_CLIENT_ID, token)
    api = Api(server.root_url, args.client)
    results: dict[str, Any] = {}
    for phase, run in PHASES:
        if phase in args.skip or (only and phase not in only):
            continue
        if phase in POLL_PHASES and args.protocol != "poll":
            continue
        try:
            results[phase] = await run(api, root, server, args)
        except Exception as exc:
            print(f"    {phase} failed: {exc!r}\n    server log tail:\n{server.log_tail()}")
        finally:
            await api.close()  # every client of the phase, long polls included
    if api.errors:
        print(f"  unexpected responses: {dict(api.errors)}")
        for sample in api.error_samples:
            print(f"    {sample}")
    if server.proc is not None and server.proc.poll() is not None:
        print(f"  the server died:\n{server.log_tail()}")
    return results


async def run_backend(name: str, args: argparse.Namespace) -> dict[str, Any] | None:
    print(f"\n== {name} ==")
    args.backend_name = name
    results = await run_server(name, args)
    if results is None:
        return results
    # Authentication's share of a lifecycle's server CPU: three signed calls (createTask, claimWork,
    # reportCompleted) at what the auth phase measured a signed call's checks to cost.
    per_call = (results.get("auth") or {}).get("us_per_call")
    server_ms = ((results.get("throughput") or {}).get("cpu_ms_per_lifecycle") or {}).get("server")
    if per_call is not None and server_ms:
        results["auth"]["overhead"] = 3 * per_call / 1000 / server_ms
        share = results["auth"]["overhead"] * 100
        print(f"    auth costs {share:.0f}% of a lifecycle's server CPU ({per_call:.0f} µs a signed call)")
    return results


async def run_server(
    name: str, args: argparse.Namespace, *, only: tuple[str, ...] = ()
) -> dict[str, Any] | None:
    data_dir = Path(tempfile.mkdtemp(prefix=f"taskyard-bench-{name}-"))
    try:
        async with scratch_database(name) as db_url:
            if name == "postgres" and db_url is None:
                return None
            token = secrets.token_urlsafe(33)
            command = shlex.split(args.taskyard) if args.taskyard else taskyard_command()
            serve_args = shlex.split(args.serve_args)
            if name == "sqlite" and "--processes" in serve_args:
                serve_args = _without_processes(serve_args)  # SQLite is served by one process
            server = Server(data_dir, db_url, token, command, serve_args=serve_args)
            try:
                await server.start()
                where = db_url or f"SQLite in {data_dir}"
                print(f"  taskyard serve pid {server.pid} on {server.root_url} ({where})")
                return await run_phases(server, token, args, only=only)
            finally:
                server.stop()
    finally:
        if args.keep:
            print(f"  kept {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


def _without_processes(serve_args: list[str]) -> list[str]:
    at = serve_args.index("--processes")
    return serve_args[:at] + serve_args[at + 2 :]


def fmt(value: Any, spec: str) -> str:
    if value is None:
        return "-"
    return format(value, spec)


def print_table(all_results: dict[str, dict[str, Any] | None], args: argparse.Namespace) -> None:
    backends = list(all_results)

    def get(backend: str, phase: str, key: str) -> Any:
        return ((all_results.get(backend) or {}).get(phase) or {}).get(key)

    big = f"{args.backlog // 1000}k"
    rows: list[tuple[str, Callable[[str], str], str]] = [
        (
            f"lifecycles/s ({args.workers} workers, {args.tasks} tasks)",
            lambda b: fmt(get(b, "throughput", "lifecycles_per_s"), ".0f"),
            TARGETS["lifecycles_per_s"],
        ),
        (
            "  auth's checks, server CPU µs per signed call",
            lambda b: fmt(get(b, "auth", "us_per_call"), ".0f"),
            "",
        ),
        (
            "  auth's cost, % of a lifecycle's server CPU",
            lambda b: fmt(
                (get(b, "auth", "overhead") or 0) * 100 if get(b, "auth", "overhead") is not None else None,
                ".0f",
            ),
            "<= 15",
        ),
        ("  createTask alone, tasks/s", lambda b: fmt(get(b, "throughput", "creates_per_s"), ".0f"), ""),
        (
            "  server CPU ms per lifecycle",
            lambda b: fmt((get(b, "throughput", "cpu_ms_per_lifecycle") or {}).get("server"), ".2f"),
            TARGETS["server_cpu_ms"],
        ),
        (
            "  postgres CPU ms per lifecycle",
            lambda b: (
                fmt((get(b, "throughput", "cpu_ms_per_lifecycle") or {}).get("postgres"), ".2f")
                if b == "postgres"
                else "-"
            ),
            "",
        ),
        (
            "  queue wait p50, s",
            lambda b: fmt((get(b, "throughput", "queue_wait") or {}).get("p50_s"), ".2f"),
            "",
        ),
        (
            "  queue wait beyond the backlog ahead, max s",
            lambda b: fmt((get(b, "throughput", "queue_wait") or {}).get("excess_max_s"), ".2f"),
            TARGETS["queue_wait_excess_s"],
        ),
        (
            "  one-core ceiling, lifecycles/s",
            lambda b: fmt(get(b, "throughput", "one_core_ceiling"), ".0f"),
            "",
        ),
        (
            "  server CPU % of a core",
            lambda b: fmt((get(b, "throughput", "cpu") or {}).get("server"), ".0f"),
            "",
        ),
        ("  bench client CPU %", lambda b: fmt((get(b, "throughput", "cpu") or {}).get("client"), ".0f"), ""),
        (
            "  other processes CPU % (noise)",
            lambda b: fmt((get(b, "throughput", "cpu") or {}).get("other"), ".0f"),
            "",
        ),
        (
            f"lifecycles/s via poll ({args.workers} workers)",
            lambda b: fmt(get(b, "poll", "lifecycles_per_s"), ".0f"),
            "",
        ),
        (
            "  poll / claimWork lifecycles/s",
            lambda b: fmt(
                (get(b, "poll", "lifecycles_per_s") or 0) / get(b, "throughput", "lifecycles_per_s")
                if get(b, "poll", "lifecycles_per_s") and get(b, "throughput", "lifecycles_per_s")
                else None,
                ".2f",
            ),
            ">= 0.5",
        ),
        (
            "poll: createTask -> message p50, ms",
            lambda b: fmt(get(b, "poll-dispatch", "p50"), ".0f"),
            "",
        ),
        (
            "dispatch p50 from commit, ms",
            lambda b: fmt(get(b, "dispatch", "commit_p50"), ".2f"),
            TARGETS["dispatch_commit_p50"],
        ),
        (
            "dispatch p99 from commit, ms",
            lambda b: fmt(get(b, "dispatch", "commit_p99"), ".2f"),
            TARGETS["dispatch_commit_p99"],
        ),
        ("dispatch p50 from send, ms", lambda b: fmt(get(b, "dispatch", "send_p50"), ".2f"), ""),
        ("dispatch p99 from send, ms", lambda b: fmt(get(b, "dispatch", "send_p99"), ".2f"), ""),
        (
            f"claimWork p50, {args.small_backlog // 1000}k pending, ms",
            lambda b: fmt(get(b, "claim", "small_p50"), ".2f"),
            "",
        ),
        (f"claimWork p50, {big} pending, ms", lambda b: fmt(get(b, "claim", "big_p50"), ".2f"), ""),
        (
            f"claim cost ratio {big}/{args.small_backlog // 1000}k",
            lambda b: fmt(get(b, "claim", "ratio"), ".2f"),
            TARGETS["claim_ratio"],
        ),
    ]
    width = max(len(r[0]) for r in rows) + 2
    header = "".join(f"{b:>12}" for b in backends) + f"{'target (pg)':>14}"
    print(f"\n{'':<{width}}{header}")
    for label, value, target in rows:
        cells = "".join(f"{value(b) if all_results.get(b) else 'skipped':>12}" for b in backends)
        print(f"{label:<{width}}{cells}{target:>14}")


# The throughput phase's shapes of load: createTasks in flight. With 16 a backlog builds and every
# claimWork finds a task at once; with 4 (a creator puts one task at a time, as a web app's requests
# do) the 8 workers wait in long polls and are woken one per new task.
SHAPES = {"backlog": 16, "waiting": 4}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick", action="store_true", help="a fast sanity run: 400 tasks, 10k backlog, fewer samples"
    )
    p.add_argument("--workers", type=int, default=8, help="throughput: simulated workers (default 8)")
    p.add_argument("--tasks", type=int, default=None, help="throughput: tasks to create (default 2000)")
    p.add_argument(
        "--shape",
        choices=tuple(SHAPES),
        default="backlog",
        help="throughput load: backlog (default; 16 createTasks in flight build a backlog the workers "
        "drain) or waiting (4 creators one task at a time, so the workers mostly wait in long polls "
        "and are woken as tasks arrive)",
    )
    p.add_argument(
        "--create-inflight", type=int, default=None, help="createTasks in flight (default: the shape's)"
    )
    p.add_argument("--dispatch-workers", type=int, default=4, help="dispatch: workers waiting (default 4)")
    p.add_argument("--dispatch-samples", type=int, default=None, help="dispatch: samples (default 300)")
    p.add_argument(
        "--claim-samples", type=int, default=None, help="claim cost: claims per backlog (default 200)"
    )
    p.add_argument("--small-backlog", type=int, default=1000, help="claim cost: small backlog (default 1000)")
    p.add_argument("--backlog", type=int, default=None, help="claim cost: big backlog (default 100000)")
    p.add_argument(
        "--client",
        choices=("httpx", "raw"),
        default="raw",
        help="load generator HTTP client: raw asyncio streams (default; a third of httpx's CPU per "
        "request, which matters when client and server share 2 cores) or httpx",
    )
    p.add_argument(
        "--taskyard",
        default="",
        help="command that runs taskyard (default: this venv's `taskyard`), e.g. another checkout's",
    )
    p.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite,postgres")
    p.add_argument(
        "--serve-args",
        default="",
        help="more flags for `taskyard serve`, e.g. '--events amqp://guest:guest@127.0.0.1:5672/ "
        "--processes 2' (--processes applies to PostgreSQL only)",
    )
    p.add_argument(
        "--skip",
        default="",
        help="comma-separated phases to skip: throughput,auth,poll,poll-dispatch,dispatch,claim",
    )
    p.add_argument(
        "--protocol",
        choices=("claim-work", "poll"),
        default="claim-work",
        help="poll: also measure the poll protocol (pollTaskUrls, Get Messages, claimTask, Delete "
        "Message, reportCompleted) beside claimWork in the same run, and createTask -> message p50",
    )
    p.add_argument("--poll-samples", type=int, default=None, help="poll dispatch: samples (default 60)")
    p.add_argument("--phase-timeout", type=float, default=240, help="seconds before a phase gives up")
    p.add_argument("--profile", type=Path, default=None, help="record the server with py-spy into this dir")
    p.add_argument("--keep", action="store_true", help="keep the temporary data directories (server logs)")
    p.add_argument(
        "--json", type=Path, default=None, help="also write the figures to this file (bench/aims.py)"
    )
    args = p.parse_args(argv)
    quick = args.quick
    args.tasks = args.tasks or (400 if quick else 2000)
    args.create_inflight = args.create_inflight or SHAPES[args.shape]
    args.dispatch_samples = args.dispatch_samples or (100 if quick else 300)
    args.claim_samples = args.claim_samples or (100 if quick else 200)
    args.poll_samples = args.poll_samples or (30 if quick else 60)
    args.backlog = args.backlog or (10_000 if quick else 100_000)
    args.skip = {s for s in args.skip.split(",") if s}
    if args.small_backlog < args.claim_samples + 20:
        p.error("--small-backlog must exceed --claim-samples by at least 20")
    return args


async def main_async(args: argparse.Namespace) -> None:
    started = now()
    load = Path("/proc/loadavg").read_text().split()[0]
    print(
        f"taskyard lifecycle bench ({'quick' if args.quick else 'full'}); {CPUS} CPUs, load average {load}; "
        f"client: {args.client} + mohawk in this process (pid {os.getpid()})"
    )
    all_results: dict[str, dict[str, Any] | None] = {}
    for name in (b.strip() for b in args.backends.split(",") if b.strip()):
        all_results[name] = await run_backend(name, args)
    print_table(all_results, args)
    print(f"\n(total {now() - started:.0f} s; timings are this machine's, printed, never asserted)")
    if args.json:
        sizes = {"workers": args.workers, "tasks": args.tasks, "backlog": args.backlog, "quick": args.quick}
        save_json(args.json, {"options": sizes, "backends": all_results})


def save_json(path: Path, figures: dict[str, Any]) -> None:
    """A bench's figures for bench/aims.py: JSON, with each dict's keys as strings."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    print(f"(figures written to {path})")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM ends the run like Ctrl-C does, so the servers and scratch databases are cleaned up.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        asyncio.run(main_async(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        kill_leftovers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
