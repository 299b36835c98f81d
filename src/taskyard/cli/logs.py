"""`taskyard task log ID [-f]`: print a task's log; with -f, follow it live until the task resolves.

The log is the artifact `public/logs/live.log` of the task's latest run. While the run is running
it leads to the server's live stream of the log; once the worker is done it is a link to the
uploaded backing log. Either way the bytes come from the server, never from the worker's machine.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.request
from typing import Any

from taskyard.cli import http
from taskyard.cli.tasks import (
    LIVE_STREAM,
    UNRESOLVED,
    Result,
    artifact_request,
    copy_content,
    location_of,
    open_url,
    status_of,
    task_id,
    unscheduled_text,
)
from taskyard.model import dates
from taskyard.model.client_errors import Refused

LIVE_LOG = "public/logs/live.log"
WAIT = 1.0  # seconds between looks for a run or its log to appear


def add_command(actions: Any, common: argparse.ArgumentParser) -> None:
    log = actions.add_parser(
        "log",
        parents=[common],
        help="print a task's log (-f: follow it until the task resolves)",
        description="Print the log of the task's latest run. With -f, wait for the task to start, "
        "follow its log live, and exit 0 if the task completed, 1 otherwise.",
    )
    log.add_argument("task_id", metavar="ID", type=task_id)
    log.add_argument("-f", "--follow", action="store_true", help="follow the log until the task resolves")
    log.add_argument("--name", default=LIVE_LOG, help=f"the log artifact (default {LIVE_LOG})")
    log.set_defaults(handler=task_log)


def task_log(connection: http.Connection, args: argparse.Namespace) -> Result:
    """Print the latest run's log; with --follow, every run's until the task resolves."""
    if not args.follow and not connection.client_id:
        # Anonymous: a public log can be read, though the task's status may not be.
        _print_log(connection, args, None)
        return Result(None, "")
    shown_run = -1
    waiting = ""
    while True:
        status = status_of(connection, args.task_id, "GET", "/status")
        runs = status.get("runs") or []
        if runs and len(runs) - 1 > shown_run and _has_log(connection, args, len(runs) - 1):
            run_id = len(runs) - 1
            if shown_run >= 0:
                print(f"\n--- run {run_id} ---", file=sys.stderr, flush=True)
            _print_log(connection, args, run_id)
            shown_run = run_id
            status = status_of(connection, args.task_id, "GET", "/status")
        if not args.follow:
            if shown_run < 0:
                raise http.Failed(f"task {args.task_id} has no log yet: {waiting_text(connection, status)}")
            return Result(None, "")
        if status["state"] not in UNRESOLVED:
            return _ending(status)
        if status["state"] != "running" and status["state"] != waiting:
            waiting = status["state"]  # said once per state, not once per look
            print(
                f"taskyard: task {args.task_id} {waiting_text(connection, status)}",
                file=sys.stderr,
                flush=True,
            )
        time.sleep(WAIT)


def waiting_text(connection: http.Connection, status: Any) -> str:
    """Why a task has no log: its dependencies, or no worker has claimed it (and whether one is about)."""
    state, queue = status["state"], status.get("taskQueueId", "?")
    if state == "unscheduled":
        return unscheduled_text(connection, status)
    if state != "pending":
        return f"is {state}"
    seen = workers_seen(connection, queue)
    return f"is pending: waiting for a worker to claim it from task queue {queue} ({seen})"


def workers_seen(connection: http.Connection, task_queue_id: str) -> str:
    """`no worker has been seen on it`, or how many and when the last one was active."""
    provisioner, _, worker_type = task_queue_id.partition("/")
    path = f"/provisioners/{http.segment(provisioner)}/worker-types/{http.segment(worker_type)}/workers"
    try:
        workers = http.call(connection, "GET", path, service="queue")["workers"]
    except Refused:  # a reader without queue:list-workers: say nothing of workers rather than fail
        return "whether a worker serves it is not visible to these credentials"
    if not workers:
        return "no worker has been seen on it"
    last = max(w.get("lastDateActive") or w.get("firstClaim") or "" for w in workers)
    ago = (dates.now_ms() - dates.parse_iso(last)) // 1000 if last else None
    when = f", the last active {ago} s ago" if ago is not None else ""
    return f"{len(workers)} worker{'s' if len(workers) != 1 else ''} seen on it{when}"


def _ending(status: Any) -> Result:
    last = (status.get("runs") or [{}])[-1]
    reason = last.get("reasonResolved")
    said = f"{status['state']}{f' ({reason})' if reason and reason != status['state'] else ''}"
    if reason == "canceled":
        said = f"was canceled ({status['state']}/{reason})"
    print(f"task {status['taskId']} {said}", file=sys.stderr, flush=True)
    return Result(status, "", 0 if status["state"] == "completed" else 1)


def _has_log(connection: http.Connection, args: argparse.Namespace, run_id: int) -> bool:
    """Whether the run's log artifact exists yet (a run's first seconds are before its log)."""
    try:
        location_of(
            artifact_request(connection, args.task_id, args.name, run_id), connection.timeout, args.name
        )
    except Refused as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _print_log(connection: http.Connection, args: argparse.Namespace, run_id: int | None) -> None:
    location = location_of(
        artifact_request(connection, args.task_id, args.name, run_id), connection.timeout, args.name
    )
    if location.startswith(connection.root_url + LIVE_STREAM) and not args.follow:
        location += "&follow=0"
    # A followed stream stays open as long as the run: no read timeout then.
    timeout = None if args.follow else connection.timeout
    with open_url(urllib.request.Request(location), timeout) as response:
        copy_content(response, sys.stdout.buffer)
