"""`taskyard worker --protocol poll` against a real server: it runs tasks found by polling, in order
of priority, and shares a task queue with a claimWork worker without any task running twice."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import taskcluster

from tests.e2e.conftest import Server
from tests.e2e.helpers import signed
from tests.e2e.workers import WorkerProcess, create, resolved, sh

POLL = ["--protocol", "poll"]


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def start(workers: list[WorkerProcess], worker: WorkerProcess) -> WorkerProcess:
    workers.append(worker.start())
    return worker


def pending_messages(server: Server, tq: str) -> int:
    """How many messages all the task queue's poll queues still hold, peeked."""
    urls = signed("GET", f"{server.api}/poll-task-url/{tq}", None, server.credentials).json()
    total = 0
    for entry in urls["queues"]:
        reply = requests.get(entry["signedPollUrl"] + "&peekonly=true&numofmessages=32", timeout=30)
        assert reply.status_code == 200, reply.text
        total += reply.text.count("<QueueMessage>")
    return total


def test_a_poll_worker_runs_a_task(
    server: Server, queue: taskcluster.Queue, tq: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    worker = start(workers, WorkerProcess(server, tq, tmp_path / "work", args=POLL))
    task_id = create(queue, tq, {"command": sh("echo polled and ran")})
    run = resolved(queue, task_id)
    assert (run["state"], run["reasonResolved"], run["workerId"]) == ("completed", "completed", "w1")
    assert pending_messages(server, tq) == 0  # the worker deleted its message
    assert "claimWork" not in worker.log_tail()


def test_priorities_come_out_in_order(
    server: Server, queue: taskcluster.Queue, tq: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    order = ["lowest", "high", "very-low", "highest", "medium"]
    made = {priority: create(queue, tq, {"command": sh("true")}, priority=priority) for priority in order}
    start(workers, WorkerProcess(server, tq, tmp_path / "work", args=[*POLL, "--capacity", "1"]))
    started = {p: resolved(queue, task_id)["started"] for p, task_id in made.items()}
    assert sorted(started, key=lambda p: started[p]) == ["highest", "high", "medium", "very-low", "lowest"]


def test_claim_work_and_poll_workers_share_a_queue(
    server: Server, queue: taskcluster.Queue, tq: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    start(
        workers,
        WorkerProcess(server, tq, tmp_path / "p", args=[*POLL, "--worker-id", "poller", "--capacity", "2"]),
    )
    start(
        workers, WorkerProcess(server, tq, tmp_path / "c", args=["--worker-id", "claimer", "--capacity", "2"])
    )
    task_ids = [create(queue, tq, {"command": sh("sleep 0.3")}) for _ in range(16)]
    ran_on = {}
    for task_id in task_ids:
        run = resolved(queue, task_id)
        assert (run["state"], run["reasonResolved"]) == ("completed", "completed")
        ran_on[task_id] = run["workerId"]
        assert len(queue.status(task_id)["status"]["runs"]) == 1  # claimed once, ran once
    assert set(ran_on.values()) == {"poller", "claimer"}
    assert pending_messages(server, tq) == 0
