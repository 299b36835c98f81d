"""A real `taskyard serve` for the upgrade and backup tests, optionally living at another time.

An old release's fixture holds tasks whose deadlines fall a few days after the fixture was
made, and a task past its deadline can no longer be claimed or reported. So the tests run
today's server with the queue's clock (and the blob store's, which checks the URLs the queue
signs) set back to when the fixture was made: `serve(..., at=made)`. Everything else keeps the
wall clock, Hawk included, so TaskCluster's client signs requests as it always does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import taskcluster

from tests.e2e.conftest import free_port

ROOT_CLIENT_ID = "static/taskyard/root"
START_TIMEOUT = 30.0

# `python -c LAUNCHER <epoch ms> serve ...`: today's `taskyard serve`, with the clock that
# Queue and open_blob_store take by default moved to start at that instant.
LAUNCHER = """
import sys
from taskyard import artifacts
from taskyard.model import dates
from taskyard.queue.service import Queue

offset = dates.now_ms() - int(sys.argv[1])


def clock():
    return dates.now_ms() - offset


for function in (Queue.__init__, artifacts.open_blob_store):
    assert "clock" in (function.__kwdefaults__ or {}), f"{function.__qualname__} takes no clock"
    function.__kwdefaults__["clock"] = clock

from taskyard.cli.main import main

sys.exit(main(sys.argv[2:]))
"""


@dataclass
class Served:
    """A running server: where it is, and whom to act as."""

    root_url: str
    root_token: str
    log_path: Path
    process: subprocess.Popen[bytes]

    def options(self, credentials: dict[str, str] | None = None) -> dict[str, Any]:
        credentials = credentials or {"clientId": ROOT_CLIENT_ID, "accessToken": self.root_token}
        return {"rootUrl": self.root_url, "credentials": credentials, "maxRetries": 0}

    def queue(self, credentials: dict[str, str] | None = None) -> taskcluster.Queue:
        return taskcluster.Queue(self.options(credentials))

    def auth(self, credentials: dict[str, str] | None = None) -> taskcluster.Auth:
        return taskcluster.Auth(self.options(credentials))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def serve(
    db_url: str,
    data_dir: Path,
    *,
    secret_key: str,
    root_token: str,
    at: int | None = None,
    extra_args: tuple[str, ...] = (),
) -> Iterator[Served]:
    """`taskyard serve` on `db_url` until the block ends, then a clean stop (SIGINT, exit 0)."""
    port = free_port()
    flags = ["--port", str(port), "--data-dir", str(data_dir), "--db", db_url, *extra_args]
    if at is None:
        command = [str(Path(sys.executable).parent / "taskyard"), "serve", *flags]
    else:
        command = [sys.executable, "-c", LAUNCHER, str(at), "serve", *flags]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKYARD_")}
    env |= {"TASKYARD_SECRET_KEY": secret_key, "TASKYARD_ROOT_ACCESS_TOKEN": root_token}
    env |= {"TASKYARD_RESOLVER_INTERVAL": "0.1", "TASKYARD_CLAIM_WORK_TIMEOUT": "1", "PYTHONUNBUFFERED": "1"}
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir.parent / f"{data_dir.name}-serve-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    served = Served(f"http://127.0.0.1:{port}", root_token, log_path, process)
    try:
        _wait_until_up(served)
        yield served
    finally:
        stop(served)


def _wait_until_up(served: Served) -> None:
    give_up = time.monotonic() + START_TIMEOUT
    while True:
        if served.process.poll() is not None:
            raise AssertionError(f"taskyard serve exited with {served.process.returncode}:\n{served.log()}")
        try:
            if requests.get(f"{served.root_url}/api/queue/v1/ping", timeout=2).ok:
                return
        except requests.RequestException:
            pass
        if time.monotonic() > give_up:
            raise AssertionError(f"taskyard serve did not answer within {START_TIMEOUT}s:\n{served.log()}")
        time.sleep(0.05)


def stop(served: Served) -> None:
    """SIGINT, as Ctrl-C: the server stops cleanly and exits 0."""
    if served.process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(served.process.pid, signal.SIGINT)
    try:
        served.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(served.process.pid, signal.SIGKILL)
        served.process.wait(timeout=10)
