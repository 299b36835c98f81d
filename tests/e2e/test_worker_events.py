"""`taskyard worker --events amqp://...`: a cancellation heard from RabbitMQ stops the task at once,
without waiting for a status check; without the broker the worker falls back to checking.

Evidence comes from the worker's log (run at DEBUG): the line that stops a task says whether the
bus told it, and each status check logs a line, so a test can tell which of the two stopped it and
that no status check came in between. The status checks are spaced far apart where the bus should
win, so that a check could not have done it instead.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
import taskcluster

from tests.e2e.bus import EVENTS_URL, server, sqlite_only
from tests.e2e.conftest import Server, free_port, start_server
from tests.e2e.helpers import wait_for
from tests.e2e.workers import WorkerProcess, create, resolved, running, sh
from tests.events.rabbit import PrivateRabbit

__all__ = ["server", "sqlite_only"]  # the events fixtures, for pytest

HEARD = "(heard from RabbitMQ); stopping it"
CHECK = "checking the status of"
DEBUG = {"TASKYARD_LOG_LEVEL": "DEBUG"}


def start_worker(server: Server, tq: str, work: Path, *args: str) -> WorkerProcess:
    return WorkerProcess(server, tq, work, args=list(args), env=DEBUG).start()


def long_task(queue: taskcluster.Queue, tq: str, marker: Path) -> tuple[str, int]:
    """A task whose shell waits on a child; answers its taskId and the child's pid once it runs."""
    task_id = create(queue, tq, {"command": sh(f"sleep 300 & echo $! > {marker}; wait")})
    running(queue, task_id)
    pid = wait_for(
        lambda: marker.exists() and marker.read_text().strip(), what="the task's child", timeout=60
    )
    return task_id, int(pid)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def stopped(pid: int, timeout: float = 60) -> None:
    give_up = time.monotonic() + timeout
    while alive(pid):
        assert time.monotonic() < give_up, "the cancelled task's process is still running"
        time.sleep(0.05)


def lines_between(log: str, first: str, last: str) -> list[str]:
    """The log's lines from the first containing `first` to the first after it containing `last`."""
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if first in line)
    end = next(i for i, line in enumerate(lines) if i > start and last in line)
    return lines[start : end + 1]


def test_a_cancellation_heard_from_rabbitmq_stops_the_task_before_any_status_check(
    server: Server, queue: taskcluster.Queue, tq: str, tmp_path: Path
) -> None:
    # A status check only every 60 s: had the bus not told it, nothing would stop the task for a minute.
    worker = start_worker(server, tq, tmp_path / "work", "--events", EVENTS_URL, "--status-interval", "60")
    try:
        give_up = time.monotonic() + 60
        while "hearing of cancelled tasks from RabbitMQ" not in worker.log_tail():
            assert time.monotonic() < give_up, worker.log_tail()
            time.sleep(0.05)
        task_id, child = long_task(queue, tq, tmp_path / "child.pid")
        queue.cancelTask(task_id)
        stopped(child)
        run = resolved(queue, task_id)
        assert (run["state"], run["reasonResolved"]) == ("exception", "canceled")
        log = worker.log_tail(1000)
        story = lines_between(log, f"{task_id}/0>: claimed", "stopping it")
        assert story[-1].endswith(f"the run is exception/canceled {HEARD}"), story
        assert [line for line in story if CHECK in line] == []
        assert "hunter2" not in log and "guest:guest" not in log
        # It goes on claiming and running tasks.
        assert resolved(queue, create(queue, tq, {"command": sh("true")}))["state"] == "completed"
    finally:
        worker.stop()


def test_without_a_reachable_broker_the_worker_checks_statuses_as_before(
    server: Server, queue: taskcluster.Queue, tq: str, tmp_path: Path
) -> None:
    nobody = f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F"
    worker = start_worker(server, tq, tmp_path / "work", "--events", nobody, "--status-interval", "0.5")
    try:
        task_id, child = long_task(queue, tq, tmp_path / "child.pid")
        queue.cancelTask(task_id)
        stopped(child)
        log = worker.log_tail(1000)
        story = lines_between(log, f"{task_id}/0>: claimed", "stopping it")
        assert story[-1].endswith("the run is exception/canceled; stopping it"), story
        assert any(CHECK in line for line in story)
        assert log.count("is unavailable") == 1
        assert "Traceback" not in log
    finally:
        worker.stop()


@pytest.mark.slow
def test_a_broker_outage_falls_back_to_status_checks_and_back(
    tmp_path: Path, tq: str, private_rabbit: PrivateRabbit, request: pytest.FixtureRequest
) -> None:
    db = tmp_path / "taskyard.sqlite3"
    shutil.copy(request.getfixturevalue("sqlite_template"), db)
    url = private_rabbit.url()
    own = start_server(f"sqlite:///{db}", tmp_path / "server", extra_args=["--events", url])
    queue = own.client()
    worker = start_worker(own, tq, tmp_path / "work", "--events", url, "--status-interval", "0.5")
    try:

        def logged(words: str, count: int = 1) -> None:
            give_up = time.monotonic() + 120
            while worker.log_tail(1000).count(words) < count:
                assert time.monotonic() < give_up, f"never logged {words!r}:\n{worker.log_tail()}"
                time.sleep(0.05)

        logged("hearing of cancelled tasks from RabbitMQ")
        try:
            private_rabbit.stop()
            logged("is unavailable")
            # While the broker is away, the status check stops the task.
            during, child = long_task(queue, tq, tmp_path / "during.pid")
            queue.cancelTask(during)
            stopped(child)
            story = lines_between(worker.log_tail(1000), f"{during}/0>: claimed", "stopping it")
            assert story[-1].endswith("the run is exception/canceled; stopping it"), story
        finally:
            private_rabbit.start()
        logged("is back after")
        give_up = time.monotonic() + 120
        while "is back after" not in own.log_tail():  # the server publishes again too
            assert time.monotonic() < give_up, own.log_tail()
            time.sleep(0.05)
        after, child = long_task(queue, tq, tmp_path / "after.pid")
        queue.cancelTask(after)
        stopped(child)
        log = worker.log_tail(1000)
        story = lines_between(log, f"{after}/0>: claimed", "stopping it")
        assert story[-1].endswith(f"the run is exception/canceled {HEARD}"), story
        assert log.count("is unavailable") == 1 and log.count("is back after") == 1
        assert "Traceback" not in log
    finally:
        worker.stop()
        own.stop()
