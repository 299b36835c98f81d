"""Ctrl-C and a closed pipe end a command quietly, as other command-line tools do: no traceback."""

from __future__ import annotations

import os
import select
import signal
import subprocess

import pytest

from taskyard.cli.main import EXIT_CLOSED_PIPE, EXIT_INTERRUPTED
from tests.cli.helpers import environment
from tests.e2e.conftest import TASKYARD, Server
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
