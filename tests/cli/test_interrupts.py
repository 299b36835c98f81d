"""Ctrl-C and a closed pipe end a command quietly, as other command-line tools do: no traceback."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from taskyard.cli.main import EXIT_CLOSED_PIPE, EXIT_INTERRUPTED
from tests.cli.helpers import environment
from tests.e2e.conftest import TASKYARD, Server, start_server
from tests.e2e.helpers import create

pytestmark = pytest.mark.slow


def start(server: Server, *args: str, **popen: object) -> subprocess.Popen[bytes]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TASKCLUSTER_", "TASKYARD_"))}
    return subprocess.Popen(
        [str(TASKYARD), *args], env={**clean, **environment(server)}, stderr=subprocess.PIPE, **popen
    )  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "command", [("task", "log", "{task}", "-f"), ("group", "status", "{group}", "--wait")]
)
def test_ctrl_c_while_following_exits_130_without_a_traceback(
    server: Server, tq: str, command: tuple[str, ...]
) -> None:
    queue = server.client()
    task_id = create(queue, tq)  # pending: no worker takes it, so following never ends by itself
    group_id = queue.task(task_id)["taskGroupId"]
    args = [word.format(task=task_id, group=group_id) for word in command]
    follower = start(server, *args, stdout=subprocess.DEVNULL)
    # Each says on stderr what it waits for once it waits (a fixed sleep is not enough on a busy
    # machine: the interrupt came while Python was still importing). Ctrl-C must then end it
    # quietly wherever it is in its wait.
    assert follower.stderr is not None
    ready, _, _ = select.select([follower.stderr], [], [], 60)
    assert ready, "it never said what it waits for"
    said = follower.stderr.readline()
    follower.send_signal(signal.SIGINT)
    _, rest = follower.communicate(timeout=30)
    err = said + rest
    assert follower.returncode == EXIT_INTERRUPTED, err
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err


def test_a_reader_that_closed_the_pipe_ends_the_command_quietly(server: Server, tq: str) -> None:
    task_id = create(server.client(), tq)
    # `taskyard task status ID --json | head -0`: the reader is gone before anything is written.
    reader_gone = start(server, "task", "status", task_id, "--json", stdout=subprocess.PIPE)
    assert reader_gone.stdout is not None
    reader_gone.stdout.close()
    _, err = reader_gone.communicate(timeout=60)
    assert reader_gone.returncode == EXIT_CLOSED_PIPE
    assert err == b""


@pytest.mark.parametrize("command", ["serve", "up"])
def test_ctrl_c_ends_a_waiting_claimwork_at_once_rather_than_waiting_it_out(
    tmp_path: Path, command: str
) -> None:
    """An idle server stops at once: a claimWork long poll (here one of 10 minutes) answers no
    tasks when Ctrl-C comes, instead of holding the shutdown for the rest of its wait. (How long a
    stop takes is bench/stop.py's to measure; here, only that it ends.)"""
    db = f"sqlite:///{tmp_path / 'data' / 'taskyard.sqlite3'}"
    server = start_server(db, tmp_path / "data", claim_work_timeout=600, command=command)
    try:
        answered: list[object] = []
        queue = server.client()

        def poll() -> None:
            answered.append(queue.claimWork("idle/queue", {"workerGroup": "g", "workerId": "w", "tasks": 1}))

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        # claimWork records its worker before it waits.
        give_up = time.monotonic() + 30
        while not queue.listWorkers("idle", "queue")["workers"]:
            assert time.monotonic() < give_up, "the long poll never began"
            time.sleep(0.05)
        time.sleep(0.5)
        assert server.process is not None
        server.process.send_signal(signal.SIGINT)
        server.process.wait(timeout=60)  # the old server waited out the whole 600 s poll
        poller.join(timeout=10)
        assert answered == [{"tasks": []}]
    finally:
        server.stop()
