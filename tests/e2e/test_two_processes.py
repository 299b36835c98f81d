"""Two `taskyard serve` processes on one PostgreSQL database: wake-ups cross processes (LISTEN/NOTIFY)
and concurrent claims never hand one task to two workers (docs/architecture.md, How claimWork wakes)."""

from __future__ import annotations

import base64
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import CLAIM_WORK_TIMEOUT, Server, free_port, start_server
from tests.e2e.helpers import WORKER, create, task_queue_id

pytestmark = [pytest.mark.postgres, pytest.mark.parametrize("db_url", ["postgres"], indirect=True)]


class Worker(threading.Thread):
    """Claims from one server until told to stop; remembers every (taskId, runId) it was given."""

    def __init__(self, server: Server, task_queue: str, worker_id: str, start: threading.Barrier) -> None:
        super().__init__(daemon=True)
        self.client = server.client()
        self.task_queue = task_queue
        self.body = {"workerGroup": server.name, "workerId": worker_id, "tasks": 2}
        self.start_together = start
        self.stop = threading.Event()
        self.claimed: list[tuple[str, int]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.start_together.wait()
            while not self.stop.is_set():
                claims = self.client.claimWork(self.task_queue, self.body)["tasks"]
                self.claimed += [(c["status"]["taskId"], c["runId"]) for c in claims]
        except BaseException as exc:  # reported by the test
            self.error = exc


def claim_while_waiting(server: Server, task_queue: str) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def poll() -> None:
        started = time.monotonic()
        try:
            outcome["claims"] = server.client().claimWork(task_queue, {**WORKER, "tasks": 1})["tasks"]
        except BaseException as exc:
            outcome["error"] = exc
        outcome["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    return thread, outcome


def test_worker_waiting_on_one_process_gets_a_task_created_through_the_other(
    two_servers: tuple[Server, Server],
) -> None:
    first, second = two_servers
    for waiting, creating in ((first, second), (second, first)):
        task_queue = task_queue_id(f"wake-{waiting.name}")
        thread, outcome = claim_while_waiting(waiting, task_queue)
        time.sleep(0.3)  # let the worker start waiting
        assert thread.is_alive(), f"claimWork on {waiting.name} returned before any task existed: {outcome}"
        task_id = create(creating.client(), task_queue)
        thread.join(CLAIM_WORK_TIMEOUT + 30)
        assert not thread.is_alive()
        if "error" in outcome:
            raise outcome["error"]
        assert [c["status"]["taskId"] for c in outcome["claims"]] == [task_id]
        assert outcome["elapsed"] < CLAIM_WORK_TIMEOUT, (
            f"the worker on {waiting.name} only answered when its long poll ran out: "
            f"the task created on {creating.name} did not wake it"
        )


def test_concurrent_claims_on_both_processes_never_share_a_task(two_servers: tuple[Server, Server]) -> None:
    first, second = two_servers
    task_queue = task_queue_id("race")
    made = [create((first if n % 2 else second).client(), task_queue) for n in range(20)]
    start = threading.Barrier(6)
    workers = [Worker(server, task_queue, f"w{n}", start) for server in two_servers for n in range(3)]
    for worker in workers:
        worker.start()

    give_up = time.monotonic() + 30
    while sum(len(w.claimed) for w in workers) < len(made) and time.monotonic() < give_up:
        if any(w.error for w in workers):
            break
        time.sleep(0.05)
    for worker in workers:
        worker.stop.set()
    for worker in workers:
        worker.join(CLAIM_WORK_TIMEOUT + 30)
    errors = [w.error for w in workers if w.error is not None]
    assert not errors, errors

    claimed = [item for w in workers for item in w.claimed]
    assert len(claimed) == len(set(claimed)), "a task was handed to two workers"
    assert sorted(task_id for task_id, _ in claimed) == sorted(made)
    assert all(run_id == 0 for _, run_id in claimed)
    # Both processes handed out work, and each task records the worker that got it.
    assert {w.body["workerGroup"] for w in workers if w.claimed} == {first.name, second.name}
    queue = first.client()
    for worker in workers:
        for task_id, _ in worker.claimed:
            run = queue.status(task_id)["status"]["runs"][0]
            assert (run["state"], run["workerGroup"], run["workerId"]) == (
                "running",
                worker.body["workerGroup"],
                worker.body["workerId"],
            )
    assert queue.taskQueueCounts(task_queue)["claimedTasks"] == len(made)


def test_servers_on_postgresql_may_share_a_data_directory(db_url: str, tmp_path: Path) -> None:
    """Only `up` and servers on SQLite own their data directory; scale-out servers share theirs."""
    first = start_server(db_url, tmp_path / "data", name="A")
    try:
        second = replace(first, name="B", port=free_port(), log_file=tmp_path / "b.log", process=None).start()
        try:
            task_id = create(second.client(), task_queue_id("shared-data-dir"))
            assert first.client().status(task_id)["status"]["state"] == "pending"
        finally:
            second.stop()
    finally:
        first.stop()


def test_a_poll_queue_one_process_found_empty_shows_a_message_put_through_the_other(
    two_servers: tuple[Server, Server],
) -> None:
    import requests

    from tests.e2e.helpers import signed, wait_for

    first, second = two_servers
    tq = task_queue_id("two-processes-poll")
    urls = signed("GET", f"{second.api}/poll-task-url/{tq}", None, second.credentials).json()
    poll = urls["queues"][-1]["signedPollUrl"]
    assert "<QueueMessage>" not in requests.get(poll, timeout=30).text  # B now knows it empty
    task_id = create(first.client(), tq)

    def found() -> str | None:
        text = requests.get(poll + "&peekonly=true", timeout=30).text  # peeks ask the database
        return text if "<QueueMessage>" in text else None

    wait_for(found, what="the message in the database")

    def received() -> str | None:
        text = requests.get(poll, timeout=30).text
        return text if "<QueueMessage>" in text else None

    # Without hearing A's commit (LISTEN/NOTIFY), B would answer from memory that the queue is empty.
    text = wait_for(received, what="B to see the message")
    assert task_id in base64.b64decode(text.split("<MessageText>")[1].split("<")[0]).decode()
