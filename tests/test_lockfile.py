"""The lock that gives a directory one live owner: refused while held, free once its holders are gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from taskyard import lockfile
from tests.conftest import until


def hold(path: Path) -> lockfile.Lock:
    return lockfile.acquire(
        path, what="the data directory", flag="--data-dir", process="test", url="http://x:1"
    )


def free(path: Path) -> bool:
    try:
        hold(path).release()
    except lockfile.InUse:
        return False
    return True


def holder(path: Path, then: str) -> list[str]:
    """The command line of a Python process that takes the lock on `path`, then runs `then`."""
    code = f"""
        import os, subprocess, time
        from pathlib import Path
        from taskyard import lockfile
        lock = lockfile.acquire(Path({str(path)!r}), what="the work directory", flag="--work-dir")
        {then}
        """
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_a_held_lock_is_refused_with_its_holder_named(tmp_path: Path) -> None:
    path = tmp_path / "data" / "taskyard.lock"
    with hold(path):
        with pytest.raises(lockfile.InUse) as refused:
            hold(path)
        assert refused.value.pid == os.getpid()
        assert refused.value.message.splitlines() == [
            f"the data directory {path.parent} is in use by test (pid {os.getpid()}, at http://x:1)",
            "stop that one first, or give this one another --data-dir",
        ]
    assert free(path)


def test_a_holder_killed_outright_lets_go(tmp_path: Path) -> None:
    path = tmp_path / "worker.lock"
    command = holder(path, 'print("held", flush=True); time.sleep(600)')
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None and child.stdout.readline() == "held\n"
            with pytest.raises(lockfile.InUse) as refused:
                hold(path)
            assert refused.value.pid == child.pid
            assert f"(pid {child.pid})" in refused.value.message
        finally:
            child.send_signal(signal.SIGKILL)
    assert free(path)


async def test_a_child_given_the_lock_holds_it_once_its_parent_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "taskyard.lock"
    # The sleeper gets the lock's descriptor and nothing else: not the pipe its parent prints to.
    spawn = (
        "sleeper = subprocess.Popen(['sleep', '600'], pass_fds=(lock.fileno(),), start_new_session=True, "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"
    )
    said = subprocess.run(
        holder(path, f"{spawn}; print(os.getpid(), sleeper.pid)"),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    parent, sleeper = map(int, said.stdout.split())
    try:
        with pytest.raises(lockfile.InUse) as refused:
            hold(path)
        assert refused.value.pid == parent
        assert refused.value.message.splitlines() == [
            f"the data directory {tmp_path} is in use by another process (pid {parent}), which has exited, "
            "but a process it started still holds the lock",
            "wait for that one to end, or give this one another --data-dir",
        ]
    finally:
        os.kill(sleeper, signal.SIGKILL)
    await until(lambda: free(path))  # the sleeper is not our child: its end is not ours to wait for
