"""`taskyard serve --processes N` on PostgreSQL and RabbitMQ: N API processes behind one port that
hand each task out once, publish each event, replace a process that dies, and keep the sweeps
going in whichever process leads them (docs/operations.md, Scale-out)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import taskcluster

from tests.e2e.bus import EVENTS_URL, Listener
from tests.e2e.conftest import Server, start_server
from tests.e2e.helpers import create, task_queue_id, worker_pids

pytestmark = [pytest.mark.postgres, pytest.mark.parametrize("db_url", ["postgres"], indirect=True)]
PROCESSES = 3


def api_processes(server: Server) -> list[int]:
    assert server.process is not None
    pid = server.process.pid
    return sorted(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())


def wait_until(condition: object, what: str, timeout: float = 60) -> None:
    give_up = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture
def fleet(db_url: str, tmp_path: Path) -> Iterator[Server]:
    server = start_server(
        db_url,
        tmp_path / "fleet",
        name="fleet",
        claim_timeout=2,
        extra_args=["--processes", str(PROCESSES), "--events", EVENTS_URL],
    )
    yield server
    server.stop()


class Worker(threading.Thread):
    """Claims one task at a time through its own connection and completes it."""

    def __init__(self, server: Server, task_queue: str, worker_id: str) -> None:
        super().__init__(daemon=True)
        self.server, self.task_queue, self.worker_id = server, task_queue, worker_id
        self.stop = threading.Event()
        self.done: list[tuple[str, int]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        queue = self.server.client()
        body = {"workerGroup": "fleet", "workerId": self.worker_id, "tasks": 1}
        try:
            while not self.stop.is_set():
                for claim in queue.claimWork(self.task_queue, body)["tasks"]:
                    task_id, run_id = claim["status"]["taskId"], claim["runId"]
                    queue.reportCompleted(task_id, str(run_id))
                    self.done.append((task_id, run_id))
        except BaseException as exc:  # reported by the test
            self.error = exc


def test_the_processes_share_one_port_and_hand_each_task_out_once(fleet: Server) -> None:
    assert len(api_processes(fleet)) == PROCESSES
    task_queue = task_queue_id("fleet")
    provisioner, worker_type = task_queue.split("/")
    completed = "exchange/taskcluster-queue/v1/task-completed"
    with Listener([(completed, f"primary.*.*.*.*.{provisioner}.{worker_type}.#")]) as listener:
        workers = [Worker(fleet, task_queue, f"w{n}") for n in range(6)]
        for worker in workers:
            worker.start()
        made: list[str] = []

        def creator() -> None:  # a connection of its own: the kernel may give it to any process
            queue = fleet.client()
            made.extend(create(queue, task_queue) for _ in range(15))

        creators = [threading.Thread(target=creator) for _ in range(4)]
        for thread in creators:
            thread.start()
        for thread in creators:
            thread.join(120)
        wait_until(
            lambda: sum(len(w.done) for w in workers) >= len(made) or any(w.error for w in workers),
            "the workers to complete every task",
        )
        for worker in workers:
            worker.stop.set()
        for worker in workers:
            worker.join(30)
        assert not [w.error for w in workers if w.error]
        done = [item for w in workers for item in w.done]
        assert sorted(done) == sorted((task_id, 0) for task_id in made), "a task was run twice or not at all"
        events = listener.wait_for(
            lambda events: {e.task_id for e in events} >= set(made), what="task-completed of every task"
        )
        assert sorted(e.task_id for e in events) == sorted(made)


def test_a_killed_process_is_replaced_and_the_sweeps_go_on(fleet: Server) -> None:
    first = api_processes(fleet)
    for pid in first:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: len(set(api_processes(fleet)) - set(first)) == PROCESSES, "three new API processes")
    wait_until(lambda: requests.get(f"{fleet.api}/ping", timeout=5).status_code == 200, "ping")
    assert fleet.log_tail().count("starting it again") == PROCESSES

    # The claim resolver's leader died with its process: one of the new ones leads it now.
    task_queue = task_queue_id("sweep")
    queue = fleet.client()
    task_id = create(queue, task_queue)
    claims = queue.claimWork(task_queue, {"workerGroup": "fleet", "workerId": "gone", "tasks": 1})["tasks"]
    assert [c["status"]["taskId"] for c in claims] == [task_id]
    wait_until(lambda: len(queue.status(task_id)["status"]["runs"]) == 2, "the expired claim to be resolved")
    runs = queue.status(task_id)["status"]["runs"]
    assert (runs[0]["state"], runs[0]["reasonResolved"]) == ("exception", "claim-expired")
    assert runs[1]["state"] == "pending"


def test_a_local_pool_is_provisioned_by_one_process_of_many(fleet: Server) -> None:
    pool_id = task_queue_id("local-fleet")
    wm = taskcluster.WorkerManager(fleet.options())
    config = {"minCapacity": 0, "maxCapacity": 2, "idleTimeoutSeconds": 30}
    body = {
        "providerId": "local",
        "description": "-",
        "config": config,
        "owner": "e@x.test",
        "emailOnError": False,
    }
    wm.createWorkerPool(pool_id, body)
    queue = fleet.client()
    sleeper = {"payload": {"command": [["sh", "-c", "sleep 1"]], "maxRunTime": 60}}
    task_ids = [create(queue, pool_id, **sleeper) for _ in range(8)]  # through every process, round robin
    most = 0
    give_up = time.monotonic() + 90
    while time.monotonic() < give_up:
        most = max(most, len(worker_pids("--register", pool_id)))
        if all(queue.status(t)["status"]["state"] == "completed" for t in task_ids):
            break
        time.sleep(0.05)
    assert all(queue.status(t)["status"]["state"] == "completed" for t in task_ids)
    assert most == 2
