"""Running a task's commands: in order, each in its own process group, output into the task log.

The first failure stops the rest. `maxRunTime` bounds all the commands together. An abort (the
task was cancelled, its claim lost, or the worker is shutting down) or the run time running out
kills the whole process group at once, children included, and no later command starts.

A command is started with `subprocess.Popen` (vfork and exec, as asyncio's own subprocess support
does underneath) and its end is awaited through a pidfd on the event loop; its output pipe is read
there too. asyncio's subprocess transport would add, per command, a thread that waits for the
child (Python 3.11's default child watcher) and a transport and protocol for each pipe: about
0.5 ms of the worker's CPU per command, a fifth of what running `true` cost it. Where pidfds are
missing (not Linux, or a kernel before 5.3) a thread waits for the child instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from taskyard.worker.tasklog import TaskLog

READ_SIZE = 64 * 1024


@dataclass(frozen=True)
class Result:
    """How the commands ended: `ok`, or the first failure's kind and message."""

    ok: bool
    kind: str = ""  # "exit" | "not-executable" | "max-run-time" | "aborted"
    message: str = ""
    exit_code: int | None = None


class Abort:
    """Set once with a reason; every command of the task watches it."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.reason = ""

    def set(self, reason: str) -> None:
        if not self.event.is_set():
            self.reason = reason
            self.event.set()


async def run_commands(
    commands: list[list[str]],
    *,
    cwd: Path,
    env: dict[str, str],
    max_run_time: float,
    abort: Abort,
    log: TaskLog,
) -> Result:
    """Run `commands` in order; stop at the first that fails, at `max_run_time` or at `abort`."""
    deadline = time.monotonic() + max_run_time
    for index, argv in enumerate(commands):
        log.info(f"Executing command {index}: {shlex.join(argv)}")
        started = time.monotonic()
        result = await _run_one(argv, cwd, env, deadline, abort, log)
        elapsed = time.monotonic() - started
        if result.exit_code is not None:
            log.info(f"Exit Code: {result.exit_code}")
        log.info(f"Elapsed Time: {elapsed:.3f}s")
        log.info(f"Result: {_verdict(result)}")
        if not result.ok:
            return result
    return Result(ok=True, exit_code=0)


def _verdict(result: Result) -> str:
    if result.ok:
        return "SUCCEEDED"
    return "ABORTED" if result.kind in ("max-run-time", "aborted") else "FAILED"


async def _run_one(
    argv: list[str], cwd: Path, env: dict[str, str], deadline: float, abort: Abort, log: TaskLog
) -> Result:
    if abort.event.is_set():
        return Result(False, "aborted", abort.reason)
    # The output pipe is read apart from the process: the command has ended when the process has,
    # even if a background child still holds the pipe open.
    read_fd, write_fd = os.pipe()
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,  # its own process group, so a kill reaches its children too
        )
    except OSError as exc:  # not there, not executable, a bad cwd...
        os.close(read_fd)
        message = f"could not run command {shlex.join(argv)}: {exc.strerror or exc}"
        log.error(message)
        return Result(False, "not-executable", message)
    finally:
        os.close(write_fd)
    pump = asyncio.create_task(_pump(read_fd, log))
    ended = asyncio.create_task(_exited(process))
    stopped = asyncio.create_task(abort.event.wait())
    try:
        timeout = max(0.0, deadline - time.monotonic())
        done, _ = await asyncio.wait({ended, stopped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        # Whatever happened, nothing of this command may outlive it: background children included.
        _kill_group(process.pid)
        code = await ended
        await _finish_pump(pump)
    if ended not in done and stopped in done:
        log.error(f"Aborting task: {abort.reason}")
        return Result(False, "aborted", abort.reason)
    if ended not in done:
        log.error("Aborting task...")
        return Result(False, "max-run-time", "max run time exceeded")
    if code != 0:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return Result(False, "exit", f"command {shlex.join(argv)} {how}", code)
    return Result(True, exit_code=0)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _exited(process: subprocess.Popen[bytes]) -> int:
    """The process's exit status (negative: the signal that killed it), once it has exited."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # no pidfds here: a thread waits instead
        return await asyncio.to_thread(process.wait)
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def readable() -> None:  # a pidfd reads as ready once its process has exited
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(pidfd, readable)
    try:
        await exited
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    return process.wait()  # it has exited: this reaps it at once


async def _pump(read_fd: int, log: TaskLog) -> None:
    """Copy the command's output into the log until every writer has closed the pipe."""
    loop = asyncio.get_running_loop()
    os.set_blocking(read_fd, False)
    closed: asyncio.Future[None] = loop.create_future()

    def readable() -> None:  # one read per wake-up, as asyncio's pipe transport: output can't hog the loop
        try:
            chunk = os.read(read_fd, READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            if not closed.done():
                closed.set_exception(exc)
            return
        if chunk:
            log.write(chunk)
        elif not closed.done():
            closed.set_result(None)

    loop.add_reader(read_fd, readable)
    try:
        await closed
    finally:
        loop.remove_reader(read_fd)
        os.close(read_fd)


async def _finish_pump(pump: asyncio.Task[None]) -> None:
    """Drain what the killed group left in the pipe; a grandchild that escaped the group and holds
    the pipe open must not hold the task, so give up after a moment."""
    done, _ = await asyncio.wait({pump}, timeout=2.0)
    if not done:
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump
