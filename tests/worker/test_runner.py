"""`run_commands` with real processes: order, environment, failures, time limits, aborts and the
processes a command leaves behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from taskyard.worker.runner import Abort, Result, run_commands
from taskyard.worker.tasklog import TaskLog

GENEROUS = 30.0  # seconds: only to stop a hung test, never a performance claim


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[TaskLog]:
    task_log = TaskLog(tmp_path / "live_backing.log")
    yield task_log
    await task_log.close()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "task"
    path.mkdir()
    return path


ENV = {"PATH": "/usr/bin:/bin"}


async def run(
    commands: list[list[str]],
    work: Path,
    log: TaskLog,
    *,
    max_run_time: float = GENEROUS,
    abort: Abort | None = None,
    env: dict[str, str] | None = None,
) -> Result:
    return await asyncio.wait_for(
        run_commands(
            commands,
            cwd=work,
            env=ENV if env is None else env,
            max_run_time=max_run_time,
            abort=abort or Abort(),
            log=log,
        ),
        GENEROUS,
    )


def sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


def text(log: TaskLog) -> str:
    return log.path.read_text()


def alive(pid: int) -> bool:
    """Running, that is: neither gone nor a zombie waiting for its parent."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def wait_until_dead(pid: int) -> bool:
    give_up = time.monotonic() + GENEROUS
    while alive(pid):
        if time.monotonic() > give_up:
            return False
        await asyncio.sleep(0.02)
    return True


async def wait_for_file(path: Path) -> str:
    while not path.exists() or not path.read_text().strip():
        await asyncio.sleep(0.01)
    return path.read_text()


# Order, directory, environment --------------------------------------------------------------


async def test_commands_run_in_order_in_the_task_directory(work: Path, log: TaskLog) -> None:
    result = await run([sh("echo first; pwd"), sh("echo second")], work, log)
    assert result == Result(ok=True, exit_code=0)
    lines = text(log).splitlines()
    assert lines.index("first") < lines.index(str(work.resolve())) < lines.index("second")


async def test_a_command_sees_exactly_the_environment_it_is_given(work: Path, log: TaskLog) -> None:
    env = {"ONLY": "this", "SPACED": "two words"}
    await run([["/usr/bin/env"]], work, log, env=env)
    printed = [line for line in text(log).splitlines() if not line.startswith("[taskcluster")]
    assert printed == ["ONLY=this", "SPACED=two words"]


async def test_the_log_has_each_command_its_output_and_its_result(work: Path, log: TaskLog) -> None:
    await run([sh("echo to stdout; echo to stderr >&2"), ["/bin/true"]], work, log)
    lines = text(log).splitlines()
    assert "to stdout" in lines and "to stderr" in lines
    worker_lines = [line.split("] ", 1)[1] for line in lines if line.startswith("[taskcluster ")]
    assert worker_lines[0] == "Executing command 0: /bin/sh -c 'echo to stdout; echo to stderr >&2'"
    assert worker_lines[1:4:2] == ["Exit Code: 0", "Result: SUCCEEDED"]
    assert worker_lines[2].startswith("Elapsed Time: ")
    assert worker_lines[4:] == [
        "Executing command 1: /bin/true",
        "Exit Code: 0",
        worker_lines[6],
        "Result: SUCCEEDED",
    ]


# Failures ----------------------------------------------------------------------------------


async def test_the_first_failing_command_stops_the_rest(work: Path, log: TaskLog) -> None:
    result = await run([sh("exit 3"), sh("echo should not run")], work, log)
    assert result == Result(False, "exit", "command /bin/sh -c 'exit 3' exited with code 3", 3)
    log_text = text(log)
    assert "Exit Code: 3" in log_text and "Result: FAILED" in log_text
    assert "Executing command 1" not in log_text and "should not run" not in log_text


async def test_a_command_killed_by_a_signal_says_which(work: Path, log: TaskLog) -> None:
    result = await run([sh("kill -TERM $$")], work, log)
    assert (result.ok, result.kind, result.exit_code) == (False, "exit", -signal.SIGTERM)
    assert result.message == "command /bin/sh -c 'kill -TERM $$' was killed by signal 15"
    assert "Result: FAILED" in text(log)


def _missing(work: Path) -> str:
    return str(work / "no-such-program")


def _not_executable(work: Path) -> str:
    script = work / "script.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    return str(script)


def _directory(work: Path) -> str:
    (work / "subdir").mkdir()
    return str(work / "subdir")


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (_missing, "No such file or directory"),
        (_not_executable, "Permission denied"),
        (_directory, "Permission denied"),
    ],
    ids=["missing", "not-executable", "directory"],
)
async def test_a_command_that_cannot_run_is_not_executable_and_says_why(
    work: Path, log: TaskLog, make: Callable[[Path], str], why: str
) -> None:
    program = make(work)
    result = await run([[program, "--flag"], sh("echo should not run")], work, log)
    assert (result.ok, result.kind, result.exit_code) == (False, "not-executable", None)
    assert result.message == f"could not run command {program} --flag: {why}"
    log_text = text(log)
    assert f"[taskcluster:error] {result.message}" in log_text
    assert "Result: FAILED" in log_text and "should not run" not in log_text


# Time limits and aborts ----------------------------------------------------------------------


async def test_max_run_time_kills_a_long_command_and_no_later_command_runs(work: Path, log: TaskLog) -> None:
    result = await run([sh("echo started; sleep 30"), sh("echo later")], work, log, max_run_time=0.5)
    assert result == Result(False, "max-run-time", "max run time exceeded")
    lines = text(log).splitlines()
    assert "started" in lines and "later" not in lines
    assert any(line.endswith("] Result: ABORTED") for line in lines)
    assert "[taskcluster:error] Aborting task..." in lines


async def test_max_run_time_bounds_all_the_commands_together(work: Path, log: TaskLog) -> None:
    # Each command alone fits in the limit; both together do not.
    commands = [sh("sleep 1"), sh("sleep 0.9; echo finished")]
    result = await run(commands, work, log, max_run_time=1.3)
    assert result.kind == "max-run-time"
    assert "finished" not in text(log).splitlines()


async def test_an_abort_kills_the_running_command_at_once(work: Path, log: TaskLog) -> None:
    abort = Abort()
    started = work / "started"
    commands = [sh(f"echo $$ > {started}; exec sleep 30"), sh("echo later")]
    running = asyncio.create_task(run(commands, work, log, abort=abort))
    pid = int(await asyncio.wait_for(wait_for_file(started), GENEROUS))
    abort.set("task cancelled")
    abort.set("a later reason does not replace the first")
    result = await running
    assert result == Result(False, "aborted", "task cancelled")
    assert not alive(pid)
    lines = text(log).splitlines()
    assert "[taskcluster:error] Aborting task: task cancelled" in lines
    assert any(line.endswith("] Result: ABORTED") for line in lines)
    assert "later" not in lines and not any("Executing command 1" in line for line in lines)


async def test_an_abort_before_the_start_runs_nothing(work: Path, log: TaskLog) -> None:
    abort = Abort()
    abort.set("worker shutting down")
    result = await run([["/usr/bin/touch", "marker"]], work, log, abort=abort)
    assert result == Result(False, "aborted", "worker shutting down")
    assert not (work / "marker").exists()


# What a command leaves behind ----------------------------------------------------------------


async def test_a_background_child_dies_with_its_command_and_the_task_goes_on(
    work: Path, log: TaskLog
) -> None:
    # The shell is done at once; the limit is far beyond it and is only there so a hold fails fast.
    result = await run([sh("sleep 100 & echo $! > child.pid")], work, log, max_run_time=10)
    assert result == Result(ok=True, exit_code=0)
    child = int((work / "child.pid").read_text())
    assert await wait_until_dead(child), f"background child {child} outlived its command"


async def test_a_grandchild_that_escaped_and_holds_the_output_open_does_not_hold_the_task(
    work: Path, log: TaskLog
) -> None:
    # It leaves the process group (setsid), so the group kill misses it, and it keeps stdout.
    escape = "setsid sh -c 'echo $$ > escaped.pid; echo escaped; exec sleep 100' &"
    wait = "while [ ! -s escaped.pid ]; do sleep 0.01; done; echo parent done"
    running = asyncio.create_task(
        run_commands(
            [sh(f"{escape} {wait}"), sh("echo next command")],
            cwd=work,
            env=ENV,
            max_run_time=GENEROUS,
            abort=Abort(),
            log=log,
        )
    )
    try:
        done, _ = await asyncio.wait({running}, timeout=GENEROUS)
    finally:
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            os.kill(int((work / "escaped.pid").read_text()), signal.SIGKILL)
        result = await running
    assert done, "run_commands waited for a process outside the task's process group"
    assert result.ok
    lines = text(log).splitlines()
    assert "escaped" in lines and "parent done" in lines and "next command" in lines
