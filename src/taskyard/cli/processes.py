"""`taskyard serve --processes N`: N API processes behind one port, on one PostgreSQL.

The parent binds the port and migrates the database once, so that a port in use or a database
out of reach is one clear line, as for one process. Then it forks N children. Each opens the
whole server (storage, auth, the bus, the relay, the resolvers: `serve.running`) and accepts
connections on the socket they share; the kernel hands each new connection to one of them.
What must happen once across the deployment is settled in the database: the relay and the
sweeps run in one process at a time, claims and resolutions are taken by one process each, and
wake-ups cross processes by notification.

The parent only watches. A child that dies is started again, with a log line; one that exits
with an error again and again within seconds of its start (its configuration, its database)
stops them all with its exit status. SIGTERM or SIGINT stops every child (each finishes its requests and
closes its deployment) and the parent exits once they are gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType

from taskyard.cli.startup import STARTUP_FAILURE

log = logging.getLogger(__name__)
QUICK_DEATH_SECONDS = 5.0  # a child that dies sooner than this after its start died of starting
QUICK_DEATHS_ALLOWED = 3  # exits with a status in a row, before the parent gives up
RESTART_PAUSE_SECONDS = 0.5  # before starting again a child that died soon after its start


def serve_processes(
    processes: int,
    child: Callable[[int], int],
) -> int:
    """Run `child(index)` in `processes` forked children (index 0 to N-1) until a signal; answer
    the exit status: 0 when stopped by a signal, else that of a child that kept failing. A child
    that died is forked again, so whatever it serves from (the listening socket) stays open here."""
    children: dict[int, tuple[int, float]] = {}  # pid: (index, started)
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if not stopping:
            log.info("stopping %d API processes", len(children))
        stopping = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def start(index: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            # Out of the terminal's process group: Ctrl-C reaches the parent alone, which sends
            # each child one SIGTERM (a second signal would make a child skip its clean stop).
            os.setpgid(0, 0)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            die_with_parent()
            code = STARTUP_FAILURE
            try:
                code = child(index)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        children[pid] = (index, time.monotonic())

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for index in range(processes):
            start(index)
        log.info("%d API processes serving, pids %s", processes, ", ".join(map(str, children)))
        return _watch(children, start, lambda: stopping, stop)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _watch(
    children: dict[int, tuple[int, float]],
    start: Callable[[int], None],
    stopping: Callable[[], bool],
    stop: Callable[[int, FrameType | None], None],
) -> int:
    """Wait for the children; start again each one that dies, unless the deployment is stopping
    or a child keeps failing to start (it exits with a status soon after its start, as it does
    when its configuration or database is wrong): then stop them all, with that status."""
    failed_starts: dict[int, int] = {}  # index: exits in a row soon after starting
    status = 0
    while children:
        pid, wait_status = os.wait()
        if pid not in children:
            continue
        index, started = children.pop(pid)
        code = os.waitstatus_to_exitcode(wait_status)
        if stopping():
            continue
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        quick = time.monotonic() - started < QUICK_DEATH_SECONDS
        failed_starts[index] = failed_starts.get(index, 0) + 1 if quick and code > 0 else 0
        if failed_starts[index] >= QUICK_DEATHS_ALLOWED:
            log.error(
                "API process %d %s %d times in a row as it started; stopping",
                index,
                how,
                QUICK_DEATHS_ALLOWED,
            )
            status = code
            stop(signal.SIGTERM, None)
            continue
        log.error("API process %d (pid %d) %s; starting it again", index, pid, how)
        if quick:
            time.sleep(RESTART_PAUSE_SECONDS)  # not a hot loop of forks
        start(index)
    return status


def die_with_parent() -> None:
    """In a child: ask Linux for SIGTERM when the parent dies, even by SIGKILL (else nothing)."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
