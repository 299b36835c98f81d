"""The worker: claim up to free capacity, run each claim, watch for cancellations, shut down cleanly.

Exit codes follow generic-worker's: 0 after `drain(EXIT_DONE)`, 71 after SIGINT (running
tasks finished, nothing more claimed), 72 after SIGTERM (running tasks resolved
exception/worker-shutdown so the queue retries them, their logs and artifacts uploaded first).
A second SIGINT acts as SIGTERM. The CLI exits 3 when the work directory is another's (below),
and 77 when the queue refused the worker's credentials (401) or scopes (403): at its first claim,
or, once a claim was answered, on REFUSALS claims in a row.

Cancellations: every `status_interval` one call asks the status of every running task, and a run
that is no longer running here is stopped. With `events` (amqp://...) the worker also hears of
its runs' ends from RabbitMQ (cancellations.py) and stops them the moment the message arrives;
while it is bound there the status check slows to a safety net (every `SAFETY_INTERVAL`), runs
once each time it binds again (to catch what was published while it was not), and returns to
`status_interval` whenever the broker is unreachable or refuses it.

One work directory, one worker. Before it touches anything in its work directory, a worker
takes an exclusive `flock` on `<work-dir>/worker.lock` and holds it until it exits; if a live
worker holds it, this one refuses to start (`lockfile.InUse`, naming the holder's pid) rather
than share. So whatever a starting worker finds under `tasks/`, `tmp/` and `logs/` belongs to no
live worker, and it removes all of it: the kernel releases a dead worker's lock whatever killed
it, so a crashed worker's leftovers are cleared by the next one, and a live worker's files are
never touched. A lock per task directory instead would let two workers share a directory, at
the price of a lock to check for every leftover and a race between creating one and clearing
it; nothing needs two workers in one directory, and capacity already runs tasks side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskyard.config import WorkerConfig
from taskyard.lockfile import acquire
from taskyard.model.client_errors import Refused
from taskyard.worker.client import Credentials, QueueClient
from taskyard.worker.poll import Poller
from taskyard.worker.registration import Registered, keep_registered
from taskyard.worker.task import CANCELED, SHUTDOWN, TaskRun

if TYPE_CHECKING:
    from taskyard.worker.cancellations import CancellationListener

log = logging.getLogger(__name__)
EXIT_DONE = 0
EXIT_INTERRUPTED = 71
EXIT_SHUTDOWN = 72
# The queue refused the worker's credentials (401), or their scopes for claimWork (403), on
# REFUSALS claims in a row: retrying will not fix them (77 is sysexits' EX_NOPERM).
EXIT_REFUSED = 77
REFUSALS = 3
MAX_CLAIM = 32  # the queue hands out at most 32 tasks per claimWork
MAX_BACKOFF = 30.0
LOCK_FILE = "worker.lock"
# Seconds between status checks while RabbitMQ tells the worker of its runs' ends.
SAFETY_INTERVAL = 30.0
HEARD_FROM_BUS = "heard from RabbitMQ"
# How many tasks heard of on the bus are remembered, for a claim whose answer comes after its end.
RECENT = 256
RESOLVED = ("completed", "failed", "exception")


class Worker:
    def __init__(
        self,
        config: WorkerConfig,
        client: QueueClient | None = None,
        *,
        registration: Registered | None = None,
    ) -> None:
        self.config = config
        self.registration = registration  # registered with the worker-manager: register again in time
        self._idle_since = time.monotonic()  # since when no task has run (while none does)
        self.client = client or QueueClient(config.root_url)
        self._own_client = client is None
        self.creds = Credentials(config.client_id, config.access_token, config.certificate or None)
        self.running: dict[tuple[str, int], TaskRun] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._changed = asyncio.Event()  # a task finished, or the worker was told to stop
        self._draining = False
        self._exit_code = EXIT_DONE
        self._check_now = asyncio.Event()  # the status check should run at its next tick
        self._recent: OrderedDict[str, Any] = OrderedDict()  # taskId -> status heard on the bus
        self.poller = Poller(config, self.client, self.creds) if config.protocol == "poll" else None
        self.cancellations: CancellationListener | None = None
        self.refused = ""  # why the worker stopped claiming, when the queue refused its credentials
        self._claimed = False  # a claimWork has been answered: a refusal from now on may be a blip
        if config.events.startswith(("amqp://", "amqps://")):
            # Imported here: aio_pika costs a worker's every start 50 ms of CPU, and only a
            # worker told of a broker needs it.
            from taskyard.worker.cancellations import CancellationListener

            c = config
            self.cancellations = CancellationListener(
                c.events, c.worker_group, c.worker_id, self._heard, on_bound=self._check_now.set
            )

    # Stopping ------------------------------------------------------------------------------

    def drain(self, exit_code: int = EXIT_INTERRUPTED) -> None:
        """Claim nothing more; exit once the running tasks are done."""
        if self._draining:
            self.shut_down()
            return
        log.info(
            "finishing %d running task(s), then exiting; interrupt again to stop them now", len(self.running)
        )
        self._draining = True
        self._exit_code = exit_code
        self._changed.set()

    def shut_down(self) -> None:
        """Stop every running task now (exception/worker-shutdown, logs uploaded), then exit."""
        log.info("stopping %d running task(s): they will be resolved worker-shutdown", len(self.running))
        self._draining = True
        self._exit_code = EXIT_SHUTDOWN
        for run in self.running.values():
            run.abort.set(SHUTDOWN)
        self._changed.set()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self.drain)
        loop.add_signal_handler(signal.SIGTERM, self.shut_down)

    # Running -------------------------------------------------------------------------------

    async def run(self) -> int:
        """Claim and run tasks until told to stop; answer the exit code.

        lockfile.InUse, before anything is claimed or removed, if a live worker owns the work directory.
        """
        c = self.config
        try:
            with acquire(
                Path(c.work_dir) / LOCK_FILE,
                what="the work directory",
                flag="--work-dir",
                process=f"taskyard worker {c.worker_group}/{c.worker_id} on {c.task_queue_id}",
            ):
                await asyncio.to_thread(clear_leftovers, Path(c.work_dir))
                return await self._run_owning_work_dir()
        finally:
            if self._own_client:
                await self.client.close()

    async def _run_owning_work_dir(self) -> int:
        c = self.config
        log.info(
            "worker %s/%s claiming from %s (%s), capacity %d",
            c.worker_group,
            c.worker_id,
            c.task_queue_id,
            c.protocol,
            c.capacity,
        )
        watchers = [asyncio.create_task(self._watch_statuses(), name="status-watcher")]
        if self.registration is not None:
            renewal = keep_registered(c, self.client, self.registration, lambda: self.creds, self._swap)
            watchers.append(asyncio.create_task(renewal, name="registration"))
        if self.cancellations is not None:
            watchers.append(asyncio.create_task(self.cancellations.run(), name="cancellation-listener"))
        try:
            await self._claim_loop()
            while self.running:
                self._changed.clear()
                await self._changed.wait()
            await asyncio.gather(*self._tasks)  # the last runs' files removed
        finally:
            for watcher in watchers:
                watcher.cancel()
            for watcher in watchers:
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
        return self._exit_code

    async def _claim_loop(self) -> None:
        failures = refusals = 0
        while not self._draining:
            free = self.config.capacity - len(self.running)
            if free <= 0:
                self._changed.clear()
                await self._changed.wait()
                continue
            started = time.monotonic()
            try:
                claims = await self._claim(min(free, MAX_CLAIM))
            except Exception as exc:  # the queue is down or refused: wait, then ask again
                refusals = refusals + 1 if credentials_refused(exc) else 0
                # At start-up a refusal is a mistake to fix, not a blip: stop at the first.
                if refusals >= (REFUSALS if self._claimed else 1):
                    self._give_up(exc, refusals)
                    return
                failures += 1
                delay = min(MAX_BACKOFF, 0.5 * 2**failures)
                what = "claimWork" if self.poller is None else "polling"
                said = refusal_reason(exc) if refusals else str(exc)
                log.warning("%s failed (%s); trying again in %.1f s", what, said, delay)
                await self._pause(delay)
                continue
            failures = 0
            self._claimed = self._claimed or claims is not None
            for claim in claims or []:
                self._start(claim)
            if claims == [] and self._idle_for_long():
                log.info("no task for %.0f s (--idle-timeout): exiting", self.config.idle_timeout)
                self._draining = True
                self._exit_code = EXIT_DONE
                return
            if claims is not None and not claims and time.monotonic() - started < 1.0:
                await self._pause(1.0)  # the queue answered at once with nothing: don't spin

    def _idle_for_long(self) -> bool:
        timeout = self.config.idle_timeout
        return timeout > 0 and not self.running and time.monotonic() - self._idle_since >= timeout

    def _swap(self, creds: Credentials) -> None:
        """Use the credentials of a new registration from now on."""
        self.creds = creds
        if self.poller is not None:
            self.poller.creds = creds

    def _give_up(self, exc: Exception, tries: int) -> None:
        """Claim no more: the queue refused these credentials `tries` times in a row."""
        self.refused = refused_text(exc, self.config, tries)  # `taskyard worker` prints it, once
        log.debug("the queue's refusal: %s", exc)
        self._draining = True
        self._exit_code = EXIT_REFUSED
        self._changed.set()

    async def _claim(self, count: int) -> list[Any] | None:
        """claimWork (or a round of polling), abandoned if the worker is told to stop (None then)."""
        c = self.config
        if self.poller is not None:
            call = asyncio.create_task(self.poller.claim(count))
        else:
            call = asyncio.create_task(
                self.client.claim_work(c.task_queue_id, c.worker_group, c.worker_id, count, self.creds)
            )
        while not call.done():
            self._changed.clear()
            stop = asyncio.create_task(self._changed.wait())
            try:
                await asyncio.wait({call, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
            if self._draining and not call.done():
                # Claims the server makes as this hangs up are lost until their claims expire.
                call.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await call
                return None
        return call.result()

    async def _pause(self, seconds: float) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._changed.wait()

    def _start(self, claim: Any) -> None:
        run = TaskRun(claim, self.config, self.client)
        key = (run.task_id, run.run_id)
        self.running[key] = run
        log.info("%s: claimed", run)

        async def go() -> None:
            try:
                await run.run()
            finally:
                self.running.pop(key, None)
                if not self.running:
                    self._idle_since = time.monotonic()
                self._changed.set()  # the slot is free: the claim loop claims again at once
                await asyncio.to_thread(run.clean_up)

        task = asyncio.create_task(go(), name=repr(run))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if self._exit_code == EXIT_SHUTDOWN:  # the claim's answer came after the worker was stopped
            run.abort.set(SHUTDOWN)
        elif run.task_id in self._recent:  # its end was heard before the claim's answer came
            _stop_if_not_running(run, self._recent[run.task_id], HEARD_FROM_BUS)

    # Cancellation --------------------------------------------------------------------------

    def _heard(self, task_id: str, status: Any) -> None:
        """A message from the bus about one of this worker's runs: stop it if it is over."""
        self._recent[task_id] = status
        self._recent.move_to_end(task_id)
        while len(self._recent) > RECENT:
            self._recent.popitem(last=False)
        for run in list(self.running.values()):
            if run.task_id == task_id and not run.abort.event.is_set():
                _stop_if_not_running(run, status, HEARD_FROM_BUS)

    def _status_check_due(self, last: float) -> bool:
        """Whether the status check runs now: always without a bus, as a safety net with one."""
        if self._check_now.is_set() or self.cancellations is None or not self.cancellations.bound:
            return True
        return time.monotonic() - last >= max(SAFETY_INTERVAL, self.config.status_interval)

    async def _watch_statuses(self) -> None:
        """One call asks the status of every running task; a run that is no longer running here
        (cancelled, expired, resolved elsewhere) is stopped at once. Every status_interval, or
        every SAFETY_INTERVAL while the bus tells of cancellations."""
        warned = False
        last = time.monotonic()
        while True:
            await asyncio.sleep(self.config.status_interval)
            if not self._status_check_due(last):
                continue
            runs = {run.task_id: run for run in self.running.values() if not run.abort.event.is_set()}
            self._check_now.clear()
            last = time.monotonic()
            if not runs:
                continue
            log.debug("checking the status of %d running task(s)", len(runs))
            try:
                statuses = await self.client.statuses(sorted(runs), self.creds)
            except Exception as exc:
                if not warned:
                    log.warning("cannot check running tasks' status (%s); relying on reclaims", exc)
                    warned = True
                continue
            for task_id, status in statuses.items():
                run = runs[task_id]
                if (run.task_id, run.run_id) in self.running:  # not reported while we asked
                    _stop_if_not_running(run, status)


def _stop_if_not_running(run: TaskRun, status: Any, source: str = "") -> None:
    runs = status.get("runs", [])
    mine = runs[run.run_id] if run.run_id < len(runs) else None
    if not isinstance(mine, dict) or mine.get("state") not in RESOLVED or run.abort.event.is_set():
        return  # still running; or, in a message older than the claim, not even started
    why = f"{mine.get('state')}/{mine.get('reasonResolved')}"
    log.info("%s: the run is %s%s; stopping it", run, why, f" ({source})" if source else "")
    run.abort.set(CANCELED if mine.get("reasonResolved") == "canceled" else f"run {why}")


def credentials_refused(exc: Exception) -> bool:
    """A refusal no retry will change: unknown or wrong credentials, or scopes they lack."""
    return isinstance(exc, Refused) and (
        exc.status == 401 or (exc.status == 403 and exc.code == "InsufficientScopes")
    )


def refusal_reason(exc: Exception) -> str:
    """The refusal's first line, or for a 403 the scopes missing: never TaskCluster's 20 lines."""
    if isinstance(exc, Refused):
        missing = exc.missing_scopes()
        if missing is not None:
            return f"{exc.status}: the client lacks {missing}"
        return f"{exc.status}: {exc.message.split(chr(10), 1)[0].strip().rstrip(':')}"
    return str(exc)


def refused_text(exc: Exception, config: WorkerConfig, tries: int) -> str:
    """One line: whose credentials, what is missing or what the queue said, what to check."""
    times = f" {tries} times in a row" if tries > 1 else ""
    head = f"the queue refused claimWork{times} for client {config.client_id!r}"
    if isinstance(exc, Refused) and exc.status == 403:
        worker = f"{config.worker_group}/{config.worker_id}"
        missing = exc.missing_scopes() or (
            f"queue:claim-work:{config.task_queue_id} and queue:worker-id:{worker}"
        )
        return (
            f"{head}: it lacks {missing} (worker {worker} on task queue {config.task_queue_id}); "
            "grant it, or give the --worker-group and --worker-id its scopes allow"
        )
    said = exc.message if isinstance(exc, Refused) else str(exc)
    reason = said.split("\n", 1)[0].strip().rstrip(":")
    return f"{head} ({reason}): check TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN"


def clear_leftovers(work_dir: Path) -> None:
    """Remove what a worker that died mid-task left in its work directory: no task of this worker
    is running yet, and a disk filled by dead tasks would fail the live ones. Only for a worker
    holding the directory's lock: without it, these could be a live worker's running tasks."""
    for part in ("tasks", "tmp", "logs"):
        for leftover in sorted((work_dir / part).glob("*")):
            log.info("removing %s, left by a task that did not finish", leftover)
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
