"""The `local` provider: `taskyard worker` processes on the server's machine, started as work
waits in their pool's task queue and stopped when it is done.

The provisioner calls `provision` in the one process that leads it, whenever work was made
pending in a local pool, a pool or worker changed, or a worker exited; it never polls. For each
pool it compares the queue's pending and running counts with its workers' capacity
(`estimate.py`) and starts what is missing, never past `maxCapacity`. Each worker is recorded
(`requested`) before its process starts, with the digest of a secret handed to it in a file of
its own; it registers with that secret (`running`) and gets credentials for its pool and id
only. Workers above `minCapacity` are started with `--idle-timeout idleTimeoutSeconds`: one that
claimed nothing for that long exits by itself, between two claims, so no claim is lost.

A worker that exits on its own is recorded `stopped`; one that crashed (any exit status but the
worker's own 0, 71 and 72) is also reported as a pool error, and the next worker of that pool
starts only after a pause that doubles with each crash in a row (1 s to 60 s). `removeWorker`
marks a worker `stopping`, and the provisioner then stops its process (SIGTERM: its tasks are
resolved worker-shutdown, so they run again). A worker of a pool that is no longer local drains
(SIGINT: it finishes its tasks and claims no more).

Each process is a child of the server, started with the request that Linux send it SIGTERM if
the server dies, even by `kill -9`. A worker recorded live that no process of this provider owns
(its server was killed) is stopped for good when the next provisioner starts: its process, if it
still runs on this machine, is sent SIGTERM, then SIGKILL; its row becomes `stopped`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from taskyard.model import schema, slugid
from taskyard.model.errors import InputError, InputValidationError
from taskyard.model.types import JSONObject, Millis
from taskyard.pools import reports
from taskyard.pools.estimate import workers_to_start
from taskyard.pools.port import NewWorker, StoredPool, StoredWorker, WorkerRequest
from taskyard.pools.service import CHANNEL, WorkerManager
from taskyard.pools.workers import digest, stored_worker, worker_message, write_worker
from taskyard.queue import service as queue_service

log = logging.getLogger(__name__)

PROVIDER_ID = "local"
GROUP = "local"
MAX_CAPACITY = 1024
LOCAL_CONFIG = schema.obj(
    {
        "minCapacity": schema.integer(minimum=0, maximum=MAX_CAPACITY),
        "maxCapacity": schema.integer(minimum=0, maximum=MAX_CAPACITY),
        "capacityPerWorker": schema.integer(minimum=1, maximum=255),
        "idleTimeoutSeconds": schema.integer(minimum=1, maximum=30 * 24 * 3600),
        "workerConfig": schema.obj(
            {
                "maxRunTimeLimit": schema.integer(minimum=1, maximum=30 * 24 * 3600),
                "protocol": schema.enum("claim-work", "poll"),
            },
            additional=False,
        ),
    },
    required=["maxCapacity"],
    additional=False,
)
REGISTRATION_S = 4 * 24 * 3600  # a local worker's credentials last 96 hours; it registers again before
ROW_LIFETIME = 30 * 24 * 3_600_000  # a live worker's row expiry (a stopped one's is a week)
STOPPED_KEEP = 7 * 24 * 3_600_000
EXPECTED_EXITS = (0, 71, 72)  # idle or done, interrupted, shut down (the worker's own codes)
FIRST_PAUSE, MAX_PAUSE = 1.0, 60.0
KILL_AFTER = 10.0  # seconds an orphan is given to stop after SIGTERM
TAIL_LINES = 20


@dataclass
class Child:
    """One worker process this server started."""

    pool_id: str
    worker_id: str
    capacity: int
    core: bool  # started to keep minCapacity: no idle timeout
    process: asyncio.subprocess.Process
    home: Path
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=TAIL_LINES))
    signalled: int = 0  # the signal this server sent it (0: none)
    watcher: asyncio.Task[None] | None = None


def settings(config: JSONObject) -> tuple[int, int, int, int]:
    """(minCapacity, maxCapacity, capacityPerWorker, idleTimeoutSeconds or 0) of a checked config."""
    return (
        int(config.get("minCapacity", 0)),  # type: ignore[arg-type]
        int(config["maxCapacity"]),  # type: ignore[arg-type]
        int(config.get("capacityPerWorker", 1)),  # type: ignore[arg-type]
        int(config.get("idleTimeoutSeconds", 0)),  # type: ignore[arg-type]
    )


class LocalProvider:
    provider_type = "local"

    def __init__(
        self,
        *,
        root_url: str,
        data_dir: str,
        events: str = "",
        keep_fds: tuple[int, ...] = (),
        log_level: str = "",
    ) -> None:
        self.root_url = root_url
        self.home = Path(data_dir, "workers").absolute()
        self.events = events
        self.keep_fds = keep_fds
        self.log_level = log_level
        self.host = socket.gethostname()
        self.children: dict[tuple[str, str], Child] = {}
        self.crashes: dict[str, int] = {}  # crashes in a row, by pool
        self.not_before: dict[str, float] = {}  # no start before this monotonic time, by pool
        self.stopping = False  # release() has begun: start nothing more

    # The port -------------------------------------------------------------------------------

    def check_config(self, config: JSONObject) -> None:
        schema.validate(LOCAL_CONFIG, config, where="config")
        low, high, _, _ = settings(config)
        if low > high:
            raise InputValidationError(
                f"config.minCapacity ({low}) must be at most config.maxCapacity ({high})"
            )

    def new_worker(self, request: WorkerRequest) -> NewWorker:
        raise InputError("not supported for this provider: the local provider starts its own workers")

    def updated_worker(self, stored: StoredWorker, request: WorkerRequest) -> NewWorker:
        raise InputError("not supported for this provider: the local provider starts its own workers")

    def removed_state(self, stored: StoredWorker) -> str:
        return "stopping" if stored.state in ("requested", "running") else stored.state

    def registration_expiry(self, pool: StoredPool, now: Millis) -> Millis:
        return now + REGISTRATION_S * 1000

    # Provisioning ---------------------------------------------------------------------------

    def next_start(self) -> float | None:
        """The monotonic time a pool paused after a crash may start workers again (None: none is)."""
        return min(self.not_before.values(), default=None)

    async def provision(self, wm: WorkerManager, pools: list[StoredPool]) -> None:
        if self.stopping:
            return
        local = {pool.worker_pool_id: pool for pool in pools}
        async with wm.storage.reader() as session:
            rows = await session.fetch("live_workers_of_provider", PROVIDER_ID)
        live = [stored_worker(row) for row in rows]
        await self._settle_unowned(
            wm, [w for w in live if (w.worker_pool_id, w.worker_id) not in self.children]
        )
        for worker in live:
            child = self.children.get((worker.worker_pool_id, worker.worker_id))
            if child is None:
                continue
            if worker.state == "stopping":
                self._signal(child, signal.SIGTERM)  # removeWorker
            elif worker.worker_pool_id not in local:
                self._signal(child, signal.SIGINT)  # the pool is no longer local: drain
        for pool in local.values():
            await self._provision_pool(wm, pool)

    async def _provision_pool(self, wm: WorkerManager, pool: StoredPool) -> None:
        low, high, per_worker, idle_timeout = settings(pool.config)
        mine = [c for c in self.children.values() if c.pool_id == pool.worker_pool_id and not c.signalled]
        existing = sum(c.capacity for c in mine)
        if existing > high:  # maxCapacity was lowered: the newest drain
            for child in reversed(mine):
                if existing <= high:
                    break
                self._signal(child, signal.SIGINT)
                existing -= child.capacity
            return
        if time.monotonic() < self.not_before.get(pool.worker_pool_id, 0.0):
            return
        async with wm.storage.reader() as session:
            counts = await session.fetchrow("pool_queue_counts", pool.worker_pool_id)
        pending, claimed = (0, 0) if counts is None else (int(counts["pending"]), int(counts["claimed"]))
        count = workers_to_start(
            min_capacity=low,
            max_capacity=high,
            per_worker=per_worker,
            existing=existing,
            pending=pending,
            claimed=claimed,
        )
        core = sum(c.capacity for c in mine if c.core)
        for _ in range(count):
            is_core = core < low
            await self._start(
                wm,
                pool,
                per_worker,
                idle_timeout=0 if is_core or not idle_timeout else idle_timeout,
                core=is_core,
            )
            core += per_worker if is_core else 0

    async def _start(
        self, wm: WorkerManager, pool: StoredPool, capacity: int, *, idle_timeout: int, core: bool
    ) -> None:
        worker_type = pool.worker_pool_id.split("/", 1)[1]
        worker_id = f"{worker_type[:27]}-{slugid.nice()[:10].lower().replace('_', '0').replace('-', '0')}"
        secret = slugid.nice() + slugid.nice()
        now = wm.clock()
        home = self.home / pool.worker_pool_id / worker_id
        async with wm.storage.transaction() as tx:
            await tx.execute(
                "insert_pool_worker",
                worker_pool_id=pool.worker_pool_id,
                worker_group=GROUP,
                worker_id=worker_id,
                provider_id=PROVIDER_ID,
                state="requested",
                capacity=capacity,
                expires=now + ROW_LIFETIME,
                static_secret=digest(secret),
                provider_data="{}",
                now=now,
            )
            stored = StoredWorker(
                pool.worker_pool_id,
                GROUP,
                worker_id,
                PROVIDER_ID,
                "requested",
                capacity,
                now,
                now + ROW_LIFETIME,
                digest(secret),
                "",
                {},
            )
            await queue_service.publish_tx(wm.queue, tx, [worker_message("worker-requested", stored, now)])
        secret_file = await asyncio.to_thread(_write_secret, home, secret)
        command = self._command(pool, worker_id, capacity, home, secret_file, idle_timeout)
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                env=self._environment(),
                stdin=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_die_with_parent,
                pass_fds=self.keep_fds,
            )
        except OSError as exc:
            await self._stopped(wm, pool.worker_pool_id, worker_id, f"could not start: {exc}", crashed=True)
            return
        child = Child(pool.worker_pool_id, worker_id, capacity, core, process, home)
        self.children[(pool.worker_pool_id, worker_id)] = child
        child.watcher = asyncio.create_task(self._watch(wm, child), name=f"local-worker {worker_id}")
        async with wm.storage.transaction() as tx:
            row = await tx.fetchrow("lock_pool_worker", pool.worker_pool_id, GROUP, worker_id)
            if row is not None:
                data = {"host": self.host, "pid": process.pid}
                await write_worker(tx, stored_worker(row), provider_data=data, now=wm.clock())
        log.info(
            "started worker %s/%s for pool %s (pid %d, capacity %d%s)",
            GROUP,
            worker_id,
            pool.worker_pool_id,
            process.pid,
            capacity,
            f", idle timeout {idle_timeout} s" if idle_timeout else "",
        )

    def _command(
        self,
        pool: StoredPool,
        worker_id: str,
        capacity: int,
        home: Path,
        secret_file: Path,
        idle_timeout: int,
    ) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "taskyard.cli.main",
            "worker",
            "--register",
            self.root_url,
            "--secret-file",
            str(secret_file),
            "--provider-id",
            PROVIDER_ID,
            "--task-queue-id",
            pool.worker_pool_id,
            "--worker-group",
            GROUP,
            "--worker-id",
            worker_id,
            "--capacity",
            str(capacity),
            "--work-dir",
            str(home / "work"),
        ]
        if idle_timeout:
            command += ["--idle-timeout", str(idle_timeout)]
        settings_ = pool.config.get("workerConfig", {})
        if isinstance(settings_, dict):
            if "maxRunTimeLimit" in settings_:
                command += ["--max-run-time-limit", str(settings_["maxRunTimeLimit"])]
            if "protocol" in settings_:
                command += ["--protocol", str(settings_["protocol"])]
        return command

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TASKCLUSTER_", "TASKYARD_"))}
        if self.events:  # in the environment, not on the command line: `ps` shows command lines
            env["TASKYARD_EVENTS"] = self.events
        if self.log_level:
            env["TASKYARD_LOG_LEVEL"] = self.log_level
        return env

    async def _watch(self, wm: WorkerManager, child: Child) -> None:
        """Pass the worker's log on (stderr), keep its last lines, and record its exit."""
        stream = child.process.stderr
        assert stream is not None
        while line := await stream.readline():
            text = line.decode(errors="replace")
            child.tail.append(text.rstrip("\n"))
            sys.stderr.write(text)
        code = await child.process.wait()
        crashed = code not in EXPECTED_EXITS and not child.signalled  # not stopped by this server
        why = f"exited with status {code}" if code >= 0 else f"was killed by signal {-code}"
        await self._stopped(wm, child.pool_id, child.worker_id, why, crashed=crashed, tail=list(child.tail))
        self.children.pop((child.pool_id, child.worker_id), None)
        await asyncio.to_thread(shutil.rmtree, child.home, True)
        wm.poke()  # a replacement may be needed

    async def _stopped(
        self,
        wm: WorkerManager,
        pool_id: str,
        worker_id: str,
        why: str,
        *,
        crashed: bool,
        tail: list[str] | None = None,
    ) -> None:
        """Record a worker stopped (and, if it crashed, the pool's error and a pause)."""
        now = wm.clock()
        with contextlib.suppress(Exception) if self.stopping else contextlib.nullcontext():
            async with wm.storage.transaction() as tx:
                row = await tx.fetchrow("lock_pool_worker", pool_id, GROUP, worker_id)
                if row is not None and row["state"] != "stopped":
                    stored = stored_worker(row)
                    await write_worker(tx, stored, state="stopped", expires=now + STOPPED_KEEP, now=now)
                    await queue_service.publish_tx(
                        wm.queue, tx, [worker_message("worker-stopped", stored, now)]
                    )
                    tx.notify(CHANNEL, pool_id)
        if not crashed:
            self.crashes.pop(pool_id, None)
            self.not_before.pop(pool_id, None)
            log.info("worker %s/%s of pool %s %s", GROUP, worker_id, pool_id, why)
            return
        crashes = self.crashes[pool_id] = self.crashes.get(pool_id, 0) + 1
        pause = min(MAX_PAUSE, FIRST_PAUSE * 2 ** (crashes - 1))
        self.not_before[pool_id] = time.monotonic() + pause
        description = f"Worker {GROUP}/{worker_id} {why}."
        if tail:
            description += " Its last lines:\n" + "\n".join(tail)
        with contextlib.suppress(Exception):
            await reports.record(
                wm,
                pool_id,
                {
                    "workerGroup": GROUP,
                    "workerId": worker_id,
                    "kind": "worker-crashed",
                    "title": f"worker {worker_id} {why}",
                    "description": description[-10240:],
                    "extra": {"crashesInARow": crashes, "nextStartInSeconds": pause},
                },
                provider_id=PROVIDER_ID,
            )

    def _signal(self, child: Child, sig: int) -> None:
        if child.signalled == sig or (child.signalled == signal.SIGTERM and sig == signal.SIGINT):
            return
        child.signalled = sig
        with contextlib.suppress(ProcessLookupError):
            child.process.send_signal(sig)

    async def _settle_unowned(self, wm: WorkerManager, workers: list[StoredWorker]) -> None:
        """Workers recorded live that no process of this server started: a server that was killed
        left them. Stop what still runs of them here, and record each stopped."""
        for worker in workers:
            data = worker.provider_data
            pid = data.get("pid")
            if data.get("host") == self.host and isinstance(pid, int) and _is_worker(pid, worker.worker_id):
                log.warning(
                    "stopping worker %s (pid %d), left running by a server that stopped",
                    worker.worker_id,
                    pid,
                )
                await _stop_orphan(pid)
            await self._stopped(
                wm,
                worker.worker_pool_id,
                worker.worker_id,
                "was left by a server that stopped",
                crashed=False,
            )

    async def release(self, wm: WorkerManager, *, final: bool = False) -> None:
        """Stop every worker this server started (SIGTERM: running tasks are resolved
        worker-shutdown, so they run again) and wait for them to exit; `final`: start none after."""
        self.stopping = True
        children = list(self.children.values())
        if children:
            log.info(
                "stopping %d local worker(s): waiting for them to exit (a running task is resolved "
                "worker-shutdown, and runs again)",
                len(children),
            )
        for child in children:
            self._signal(child, signal.SIGTERM)
        watchers = [c.watcher for c in children if c.watcher is not None]
        if watchers:
            said = asyncio.create_task(self._say_what_it_waits_for(children))
            try:
                await asyncio.gather(*watchers, return_exceptions=True)
            finally:
                said.cancel()
        self.stopping = final

    async def _say_what_it_waits_for(self, children: list[Child]) -> None:
        """Every few seconds while stopping takes long: which workers are still running."""
        while True:
            await asyncio.sleep(2.0)
            left = [c for c in children if c.watcher is not None and not c.watcher.done()]
            if not left:
                return
            log.warning(
                "stopping: still waiting for local worker(s) %s to resolve their tasks and exit "
                "(Ctrl-C again stops the server at once)",
                ", ".join(f"{c.worker_id} (pid {c.process.pid})" for c in left),
            )

    def running(self) -> int:
        """Worker processes of this server that are still alive."""
        return len(self.children)


def _write_secret(home: Path, secret: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "secret"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret)
    return path


def _is_worker(pid: int, worker_id: str) -> bool:
    """Whether `pid` is a live `taskyard worker` process of `worker_id` (not a recycled pid)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"worker" in command and worker_id.encode() in command


async def _stop_orphan(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_AFTER
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return
        await asyncio.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _die_with_parent() -> None:
    """In a child: ask Linux for SIGTERM when the server dies, even by SIGKILL."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
