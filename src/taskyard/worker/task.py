"""One claimed run, from claim to report: payload, commands, artifacts, log, outcome.

Every call made for the run uses the temporary credentials of its claim, renewed by reclaimTask
halfway to takenUntil, whatever the claim timeout. If a reclaim fails, or the worker learns the
task was cancelled, the commands are killed at once and the run is not reported: the queue has
already settled it. A completed or failed run is reported last, after the artifacts and the log
are uploaded (the queue takes none after). A run that ends in an internal error (internal-error,
resource-unavailable) is reported exception first and its log uploaded after, which the queue
allows for a while: a worker in trouble resolves the run before anything else can go wrong, and a
slow upload does not hold back the retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskyard.config import WorkerConfig
from taskyard.model import dates
from taskyard.model.client_errors import Refused
from taskyard.worker import mounts as mounting
from taskyard.worker import payload as payloads
from taskyard.worker import uploads
from taskyard.worker.client import Credentials, QueueClient
from taskyard.worker.runner import Abort, Result, run_commands
from taskyard.worker.tasklog import TaskLog

log = logging.getLogger(__name__)
LOG_TYPE = "text/plain; charset=utf-8"
CANCELED = "canceled"
CLAIM_LOST = "claim-lost"
SHUTDOWN = "worker-shutdown"
# Variables of the worker's own environment a task must never see: its credentials, and a proxy
# URL that would sign the task's calls with someone else's scopes.
_PRIVATE_ENV = (
    "TASKCLUSTER_CLIENT_ID", "TASKCLUSTER_ACCESS_TOKEN", "TASKCLUSTER_CERTIFICATE", "TASKCLUSTER_PROXY_URL",
)  # fmt: skip
# TASKCLUSTER_WORKER_LOCATION as worker-runner's static provider describes a worker on its own host.
WORKER_LOCATION = '{"cloud":"static"}'
MAX_DOWNLOAD = 4 * 1024**3  # bytes one mount's content may have
# Exception reasons of the worker's own trouble: such a run is reported before its log is uploaded.
INTERNAL_ERRORS = ("internal-error", "resource-unavailable")
# The writable caches of each work directory: shared by its runs, one borrower per cache at a time.
_CACHES: dict[Path, mounting.Caches] = {}


@dataclass(frozen=True)
class Outcome:
    state: str  # completed | failed | exception
    reason: str = ""  # the exception's reason


def _now_ms() -> int:
    return int(time.time() * 1000)


class TaskRun:
    """Runs one claim; `abort` stops it early (cancelled, claim lost, worker shutting down)."""

    def __init__(self, claim: Any, config: WorkerConfig, client: QueueClient) -> None:
        self.task_id: str = claim["status"]["taskId"]
        self.run_id: int = claim["runId"]
        self.definition: Any = claim["task"]
        self.creds = Credentials.from_claim(claim["credentials"])
        self.taken_until = dates.parse_iso(claim["takenUntil"])
        self.config = config
        self.client = client
        self.abort = Abort()
        self.last_result: Result | None = None  # how the commands ended, for purgeCaches
        self._reclaimer: asyncio.Task[None] | None = None
        self._reported: Outcome | None = None  # set once the run is reported (early, or last)
        self._report_done = False
        self.started = time.monotonic()
        base = Path(config.work_dir)
        self.name = f"{self.task_id}-{self.run_id}"
        self.task_dir = base / "tasks" / self.name
        self.scratch = base / "tmp" / self.name
        self.log_path = base / "logs" / f"{self.name}.log"

    def __repr__(self) -> str:
        return f"<TaskRun {self.task_id}/{self.run_id}>"

    # The whole run -------------------------------------------------------------------------

    async def run(self) -> Outcome | None:
        """Run the task and report it; the outcome reported (None: not ours to report). Its files
        stay until `clean_up`."""
        reclaimer = asyncio.create_task(self._reclaim_forever(), name=f"reclaim {self}")
        self._reclaimer = reclaimer
        try:
            try:
                self._make_dirs()
            except OSError as exc:
                log.error("%s: cannot prepare the task directory: %s", self, exc)
                return await self._report(Outcome("exception", "internal-error"), reclaimer)
            tasklog = TaskLog(self.log_path)
            outcome = await self._run_logged(tasklog)
            return await self._report(outcome, reclaimer)
        except Exception:
            log.exception("%s: the worker failed running the task", self)
            return await self._report(Outcome("exception", "internal-error"), reclaimer)
        finally:
            reclaimer.cancel()

    def _make_dirs(self) -> None:
        """The task directory and the log's. The scratch directory is made only if an upload
        needs it (a file too large to compress in memory): a task that makes none saves a mkdir
        and an rmtree."""
        for d in (self.task_dir, self.log_path.parent):
            d.mkdir(parents=True, exist_ok=True)

    def clean_up(self) -> None:
        """Remove the run's directories and log file (blocking: the worker calls it in a thread,
        once the run is reported and its slot is free for the next claim)."""
        for d in (self.task_dir, self.scratch):
            shutil.rmtree(d, ignore_errors=True)
        self.log_path.unlink(missing_ok=True)

    async def _run_logged(self, tasklog: TaskLog) -> Outcome | None:
        """Everything between the claim and the report, written to the task log."""
        self._log_header(tasklog)
        spec = self._parse_payload(tasklog)
        if spec is not None and spec.live_log_enabled:
            tasklog.stream_to(self._appender(spec.live_log), self.config.live_log_interval)
        backing = self._log_item(spec, tasklog)
        announced = uploads.Announced(backing, self._create_artifact) if spec is not None else None
        mounter = self._mounter(tasklog)
        try:
            outcome: Outcome | None = Outcome("exception", "malformed-payload") if spec is None else None
            if spec is not None:
                outcome = await self._mount(spec, mounter, tasklog)
                if outcome is None:
                    outcome = await self._run_commands(spec, tasklog)
                    problem = await self._upload_artifacts(spec, tasklog)
                    if problem is not None and (outcome is None or outcome.state == "completed"):
                        outcome = Outcome(problem.state, "" if problem.state == "failed" else problem.reason)
                    self._unmount(spec, mounter, outcome)
            outcome = self._settle(outcome, tasklog)
            await tasklog.close()
            if outcome is not None and outcome.state == "exception" and outcome.reason in INTERNAL_ERRORS:
                assert self._reclaimer is not None
                await self._report(outcome, self._reclaimer)  # first; the log is uploaded after
            create = announced.create if announced is not None else self._create_artifact
            problem = await self._upload_log(spec, backing, create)
        finally:
            mounter.unmount(purge=True)  # what an error left borrowed; nothing if it was put back
            if announced is not None:
                announced.cancel()
        if problem is not None and outcome is not None and outcome.state == "completed":
            outcome = Outcome("exception", "resource-unavailable")
        return outcome

    def _log_header(self, tasklog: TaskLog) -> None:
        c = self.config
        tasklog.info(
            f"Worker: {c.worker_group}/{c.worker_id} on task queue {c.task_queue_id}\n"
            f"Task ID: {self.task_id}\nRun ID: {self.run_id}\n=== Task Starting ==="
        )

    def _parse_payload(self, tasklog: TaskLog) -> payloads.Payload | None:
        try:
            return payloads.parse(
                self.definition.get("payload"),
                task_id=self.task_id,
                deadline=dates.parse_iso(self.definition["deadline"]),
                expires=dates.parse_iso(self.definition["expires"]),
                max_run_time_limit=self.config.max_run_time_limit,
                task_queue_id=self.config.task_queue_id,
            )
        except payloads.MalformedPayload as exc:
            tasklog.raw_lines(exc.lines)
            return None

    def _settle(self, outcome: Outcome | None, tasklog: TaskLog) -> Outcome | None:
        """The outcome to report, the log's footer written; None if the run is no longer ours."""
        if tasklog.write_error is not None and (outcome is None or outcome.state == "completed"):
            tasklog.error(f"the worker could not write the task log: {tasklog.write_error}")
            outcome = Outcome("exception", "internal-error")
        lost = self.abort.reason not in ("", SHUTDOWN)  # cancelled, claim lost: the queue settled it
        report = None if lost else outcome or Outcome("completed")
        said = f"not reported: {self.abort.reason}" if report is None else report.state
        if self.abort.reason == CANCELED:
            said = "canceled (the queue resolved the run exception/canceled)"
        tasklog.info(
            f"=== Task Finished ===\nTask Duration: {time.monotonic() - self.started:.3f}s\n"
            f"Outcome: {said}{f' ({report.reason})' if report and report.reason else ''}"
        )
        return report

    # Mounts --------------------------------------------------------------------------------

    def _mounter(self, tasklog: TaskLog) -> mounting.Mounter:
        root = Path(self.config.work_dir).absolute() / "caches"
        caches = _CACHES.setdefault(root, mounting.Caches(root))
        return mounting.Mounter(self.task_dir.absolute(), self.scratch, caches, self._fetch, tasklog.info)

    async def _fetch(self, content: mounting.Content, dest: Path) -> str:
        if content.kind in ("taskId", "namespace"):
            task_id = content.task_id
            if content.kind == "namespace":
                task_id = await self.client.find_indexed_task(content.namespace, self.creds)
            return await self.client.download_artifact(
                task_id, content.artifact, dest, self.creds, MAX_DOWNLOAD
            )
        return await self.client.download(content.url, dest, MAX_DOWNLOAD)

    async def _mount(
        self, spec: payloads.Payload, mounter: mounting.Mounter, tasklog: TaskLog
    ) -> Outcome | None:
        """Make the mounts; the outcome if the run ends here (the commands don't run)."""
        if not spec.mounts:
            return None
        problems = mounting.requirement_problems(
            spec.mounts,
            list(self.definition.get("scopes", [])),
            list(self.definition.get("dependencies", [])),
        )
        if problems:
            tasklog.raw_lines([payloads.ERROR_PREFIX + line for line in problems])
            return Outcome("exception", "malformed-payload")
        try:
            await mounter.mount_all(spec.mounts)
        except mounting.MountFailed as exc:
            tasklog.error(f"[mounts] {exc.message}")
            return Outcome("exception", exc.reason)
        return None

    def _unmount(self, spec: payloads.Payload, mounter: mounting.Mounter, outcome: Outcome | None) -> None:
        """Caches go back for the next task, unless the run was stopped or its exit code asks to purge."""
        result = self.last_result
        why = ""
        if self.abort.reason or (outcome is not None and outcome.reason == SHUTDOWN):
            why = "the task was stopped and may have left them inconsistent"
        elif result is not None and result.kind in ("max-run-time", "aborted"):
            why = "the task was aborted and may have left them inconsistent"
        elif result is not None:
            code = 0 if result.ok else result.exit_code
            if code is not None and code in spec.purge_caches_exit_codes:
                why = f"the last command's exit code {code} is in onExitStatus.purgeCaches"
        if why and mounter.borrowed:
            mounter.say(f"[mounts] Purging caches since {why}")
        mounter.unmount(purge=bool(why))

    # Commands ------------------------------------------------------------------------------

    def _environment(self, spec: payloads.Payload, proxy_url: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _PRIVATE_ENV and not k.startswith("TASKYARD_")}
        env.update(spec.env)
        env.update(
            TASK_ID=self.task_id,
            RUN_ID=str(self.run_id),
            TASK_GROUP_ID=self.definition.get("taskGroupId", self.task_id),
            TASK_WORKDIR=str(self.task_dir.absolute()),
            TASKCLUSTER_ROOT_URL=self.config.root_url,
            TASKCLUSTER_WORKER_GROUP=self.config.worker_group,
            TASKCLUSTER_WORKER_LOCATION=WORKER_LOCATION,
        )
        if proxy_url is not None:
            env["TASKCLUSTER_PROXY_URL"] = proxy_url
        return env

    async def _run_commands(self, spec: payloads.Payload, tasklog: TaskLog) -> Outcome | None:
        proxy = None
        if spec.taskcluster_proxy:
            # Imported here: aiohttp's server costs a worker's every start 20 ms of CPU, and
            # most tasks don't ask for the proxy.
            from taskyard.worker.proxy import TaskProxy, authorized_scopes

            scopes = authorized_scopes(self.task_id, self.run_id, self.definition)
            proxy = TaskProxy(self.config.root_url, lambda: self.creds, scopes)
        try:
            proxy_url = await proxy.start() if proxy is not None else None
            result = await run_commands(
                spec.command,
                cwd=self.task_dir.absolute(),
                env=self._environment(spec, proxy_url),
                max_run_time=spec.max_run_time,
                abort=self.abort,
                log=tasklog,
            )
        finally:
            if proxy is not None:
                await proxy.stop()
        return self._judge(result, spec, tasklog)

    def _judge(self, result: Result, spec: payloads.Payload, tasklog: TaskLog) -> Outcome | None:
        self.last_result = result
        if result.ok:
            return None
        if result.kind == "aborted":  # cancelled or lost runs are not reported at all (_settle)
            return Outcome("exception", SHUTDOWN) if result.message == SHUTDOWN else None
        if result.exit_code is not None and result.exit_code in spec.retry_exit_codes:
            tasklog.error(
                "task appears to have failed intermittently - exit code "
                f"{result.exit_code} found in task payload.onExitStatus list"
            )
            return Outcome("exception", "intermittent-task")
        tasklog.error(f"TASK FAILURE: {result.message}")
        return Outcome("failed")

    # Artifacts and the log -----------------------------------------------------------------

    async def _create_artifact(self, name: str, body: dict[str, Any]) -> Any:
        return await self.client.create_artifact(self.task_id, self.run_id, name, body, self.creds)

    async def _upload_artifacts(self, spec: payloads.Payload, tasklog: TaskLog) -> uploads.Problem | None:
        if not spec.artifacts:
            return None
        items = await asyncio.to_thread(uploads.collect, spec.artifacts, self.task_dir.absolute())
        for item in items:
            if isinstance(item, uploads.FileUpload):
                tasklog.info(f"Uploading artifact {item.name} from {item.path.name}")
        problem = await uploads.upload_all(items, self._create_artifact, self.client.upload, self.scratch)
        if problem is not None:
            tasklog.error(problem.message)
        return problem

    def _appender(self, name: str) -> Any:
        async def append(offset: int, text: str, final: bool) -> int:
            answer = await self.client.append_live_log(
                self.task_id, self.run_id, name, offset, text, final, self.creds
            )
            return int(answer["length"])

        return append

    def _log_item(self, spec: payloads.Payload | None, tasklog: TaskLog) -> uploads.FileUpload:
        backing = spec.backing_log if spec is not None else payloads.DEFAULT_BACKING_LOG
        expires = dates.parse_iso(self.definition["expires"])
        return uploads.FileUpload(backing, tasklog.path, expires, LOG_TYPE, "gzip")

    async def _upload_log(
        self, spec: payloads.Payload | None, item: uploads.FileUpload, create: uploads.CreateArtifact
    ) -> uploads.Problem | None:
        """The backing log (its createArtifact made while the commands ran: `uploads.Announced`),
        with the live log's name turned into a link to it during the PUT."""
        live = spec.live_log if spec is not None else payloads.DEFAULT_LIVE_LOG

        async def link() -> None:
            if spec is None or spec.live_log_enabled:
                body = {
                    "storageType": "link",
                    "artifact": item.name,
                    "contentType": LOG_TYPE,
                    "expires": dates.to_iso(item.expires),
                }
                with contextlib.suppress(Refused):  # a convenience; the backing log is there
                    await self._create_artifact(live, body)

        problem = await uploads.upload_one(item, create, self.client.upload, self.scratch, link)
        if problem is not None:
            log.warning("%s: %s", self, problem.message)
        else:
            log.debug("%s: uploaded the task log %s", self, item.name)
        return problem

    # Claim and report ----------------------------------------------------------------------

    async def _reclaim_forever(self) -> None:
        """Reclaim halfway to takenUntil; on any failure, stop the task: the run is no longer ours."""
        while True:
            await asyncio.sleep(max(0.2, (self.taken_until - _now_ms()) / 2000))
            try:
                answer = await self.client.reclaim(self.task_id, self.run_id, self.creds)
            except Exception as exc:
                log.warning("%s: reclaim failed, stopping the task: %s", self, exc)
                self.abort.set(CLAIM_LOST)
                return
            self.taken_until = dates.parse_iso(answer["takenUntil"])
            self.creds = Credentials.from_claim(answer["credentials"])

    async def _report(self, outcome: Outcome | None, reclaimer: asyncio.Task[None]) -> Outcome | None:
        """Report `outcome` (None: not ours to report); once only, the first outcome standing (an
        internal error reported before the log's upload stays what the run reported)."""
        if self._report_done:
            return self._reported
        self._report_done = True
        reclaimer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reclaimer
        self._reported = await self._send_report(outcome)
        return self._reported

    async def _send_report(self, outcome: Outcome | None) -> Outcome | None:
        if outcome is None:
            log.info("%s: not reported (%s)", self, self.abort.reason)
            return None
        try:
            await self.client.report(
                self.task_id, self.run_id, outcome.state, outcome.reason or None, self.creds
            )
        except Exception as exc:
            log.warning("%s: reporting %s failed: %s", self, outcome.state, exc)
            return None
        log.info("%s: %s%s", self, outcome.state, f" ({outcome.reason})" if outcome.reason else "")
        return outcome
