"""A real `taskyard worker` process against a real server, and the task definitions it runs."""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import taskcluster

from tests.e2e import conftest
from tests.e2e.conftest import TASKYARD, Server
from tests.e2e.helpers import definition, iso, now, slug

RESOLVED = ("completed", "failed", "exception")


# The fixtures of the modules that run worker processes (import them there, and list them in the
# module's `__all__`): the module's server on SQLite alone (a worker's behaviour does not depend on
# the database), and a worker claiming from the test's own task queue.
@pytest.fixture(scope="module", name="module_db_url")
def sqlite_module_db_url(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> str:
    path = tmp_path_factory.mktemp("db") / "taskyard.sqlite3"
    shutil.copy(request.getfixturevalue("sqlite_template"), path)
    return f"sqlite:///{path}"


@pytest.fixture(name="worker")
def worker_process(server: Server, tq: str, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = WorkerProcess(server, tq, tmp_path / "work").start()
    yield process
    process.stop()


@dataclass
class WorkerProcess:
    """One `taskyard worker` process; its log joins the servers' in a failed test's report."""

    server: Server
    task_queue_id: str
    work_dir: Path
    args: list[str] = field(default_factory=list)
    name: str = "worker"
    max_file_bytes: int | None = None  # RLIMIT_FSIZE: a work directory that "fills up"
    env: dict[str, str] = field(default_factory=dict)  # more variables (TASKYARD_LOG_LEVEL, ...)
    process: subprocess.Popen[bytes] | None = None

    @property
    def db_url(self) -> str:  # the report hook names every process by this
        return f"worker on {self.task_queue_id}"

    @property
    def log_path(self) -> Path:
        """WORK_DIR.log beside the work directory; WORK_DIR-NAME.log for a worker given a name."""
        suffix = "" if self.name == "worker" else f"-{self.name}"
        return self.work_dir.parent / f"{self.work_dir.name}{suffix}.log"

    def start(self) -> WorkerProcess:
        command = [
            str(TASKYARD),
            "worker",
            "--task-queue-id",
            self.task_queue_id,
            "--worker-group",
            "e2e",
            "--worker-id",
            "w1",
            "--work-dir",
            str(self.work_dir),
            "--status-interval",
            "0.5",
            *self.args,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TASKYARD_", "TASKCLUSTER_"))}
        env.update(
            TASKCLUSTER_ROOT_URL=self.server.root_url,
            TASKCLUSTER_CLIENT_ID=conftest.ROOT_CLIENT_ID,
            TASKCLUSTER_ACCESS_TOKEN=self.server.access_token,
            PYTHONUNBUFFERED="1",
        )
        env.update(self.env)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=self._limit if self.max_file_bytes else None,
            )
        conftest.RUNNING.append(self)  # type: ignore[arg-type]
        return self

    def _limit(self) -> None:
        assert self.max_file_bytes is not None
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.max_file_bytes, self.max_file_bytes))

    def signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def wait(self, timeout: float = 60) -> int:
        assert self.process is not None
        return self.process.wait(timeout=timeout)

    def stop(self) -> None:
        if self in conftest.RUNNING:
            conftest.RUNNING.remove(self)  # type: ignore[arg-type]
        if self.process is None or self.process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def log_tail(self, lines: int = 200) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no log: {exc})"


def sh(script: str) -> list[list[str]]:
    """A payload's `command`: one shell script."""
    return [["/bin/sh", "-c", script]]


def task(task_queue: str, payload: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """A task for the worker: `payload` as given (maxRunTime defaults to 60 s)."""
    start = now()
    body = definition(task_queue, payload={"maxRunTime": 60, **payload}, **overrides)
    body.setdefault("expires", iso(start + timedelta(days=1)))
    return body


def create(queue: taskcluster.Queue, task_queue: str, payload: dict[str, Any], **overrides: Any) -> str:
    task_id = slug()
    queue.createTask(task_id, task(task_queue, payload, **overrides))
    return task_id


def wait_for(
    queue: taskcluster.Queue, task_id: str, until: Callable[[dict[str, Any]], bool], timeout: float = 60
) -> dict[str, Any]:
    """Poll the task's status until `until(status)`; fail with the last status after `timeout`."""
    give_up = time.monotonic() + timeout
    while True:
        status: dict[str, Any] = queue.status(task_id)["status"]
        if until(status):
            return status
        assert time.monotonic() < give_up, f"gave up waiting; the task is {status}"
        time.sleep(0.1)


def resolved(queue: taskcluster.Queue, task_id: str, run_id: int = 0, timeout: float = 60) -> dict[str, Any]:
    """The run once it is resolved."""

    def done(status: dict[str, Any]) -> bool:
        runs = status["runs"]
        return len(runs) > run_id and runs[run_id]["state"] in RESOLVED

    return wait_for(queue, task_id, done, timeout)["runs"][run_id]


def running(queue: taskcluster.Queue, task_id: str, timeout: float = 60) -> dict[str, Any]:
    return wait_for(queue, task_id, lambda s: s["state"] == "running", timeout)


def fetch(server: Server, task_id: str, name: str, run_id: int = 0) -> requests.Response:
    """The artifact's content, fetched as a user would: getArtifact's redirect, no credentials."""
    url = f"{server.api}/task/{task_id}/runs/{run_id}/artifacts/{name}"
    queue = server.client()
    signed = queue.buildSignedUrl("getArtifact", task_id, str(run_id), name)
    response = requests.get(signed if not name.startswith("public/") else url, timeout=30)
    return response


def log_text(server: Server, task_id: str, run_id: int = 0) -> str:
    response = fetch(server, task_id, "public/logs/live.log", run_id)
    assert response.status_code == 200, response.text
    return response.text
