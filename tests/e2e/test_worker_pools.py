"""Worker pools on a real `taskyard serve`, driven by TaskCluster's `taskcluster.WorkerManager`:
a static worker registers and claims with the credentials it got; a local pool starts a worker
for a task created while it had none, never runs more than its maxCapacity, lets surplus workers
go after their idle timeout, reports a crashed worker and replaces it, and stops a removed one.
On SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import taskcluster

from tests.e2e.conftest import Server, start_server
from tests.e2e.helpers import (
    create,
    definition,
    iso,
    now,
    refused,
    state_is,
    wait_for,
    wait_for_status,
    worker_pids,
)

SECRET = "x" * 44


@pytest.fixture(scope="module")
def wm(server: Server) -> taskcluster.WorkerManager:
    return taskcluster.WorkerManager(server.options())


def local_pool(wm: taskcluster.WorkerManager, pool_id: str, **config: Any) -> dict[str, Any]:
    body = {
        "providerId": "local",
        "description": "e2e",
        "config": {"minCapacity": 0, "maxCapacity": 2, **config},
        "owner": "e2e@example.com",
        "emailOnError": False,
    }
    return dict(wm.createWorkerPool(pool_id, body))


def live(wm: taskcluster.WorkerManager, pool_id: str) -> list[dict[str, Any]]:
    workers = wm.listWorkersForWorkerPool(pool_id)["workers"]
    return [w for w in workers if w["state"] != "stopped"]


def sleeper(seconds: float) -> dict[str, Any]:
    return {"payload": {"command": [["sh", "-c", f"sleep {seconds}"]], "maxRunTime": 120}}


def pid_of(worker_id: str) -> int:
    """The process id of the `taskyard worker` whose command line names `worker_id`."""
    (pid,) = worker_pids(worker_id)
    return pid


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def test_a_static_worker_registers_and_claims_with_its_own_credentials(
    server: Server, wm: taskcluster.WorkerManager, queue: taskcluster.Queue, tq: str
) -> None:
    wm.createWorkerPool(
        tq,
        {
            "providerId": "static",
            "description": "rack",
            "config": {},
            "owner": "e2e@example.com",
            "emailOnError": False,
        },
    )
    expires = iso(now() + timedelta(days=1))
    worker = wm.createWorker(tq, "rack", "w1", {"expires": expires, "providerInfo": {"staticSecret": SECRET}})
    assert worker["state"] == "running"
    anonymous = taskcluster.WorkerManager({"rootUrl": server.root_url})
    body = {
        "workerPoolId": tq,
        "providerId": "static",
        "workerGroup": "rack",
        "workerId": "w1",
        "workerIdentityProof": {"staticSecret": SECRET},
    }
    registered = anonymous.registerWorker(body)
    mine = taskcluster.Queue({"rootUrl": server.root_url, "credentials": registered["credentials"]})
    task_id = create(queue, tq)
    claims = mine.claimWork(tq, {"workerGroup": "rack", "workerId": "w1", "tasks": 1})["tasks"]
    assert [c["status"]["taskId"] for c in claims] == [task_id]
    with refused(403, "InsufficientScopes"):
        mine.createTask(taskcluster.slugId(), definition(tq))
    with refused(400, "InputError"):
        anonymous.registerWorker({**body, "workerIdentityProof": {"staticSecret": "y" * 44}})
    wm.removeWorker(tq, "rack", "w1")
    assert wm.worker(tq, "rack", "w1")["state"] == "stopped"


def test_a_task_in_an_idle_pool_gets_a_worker(
    wm: taskcluster.WorkerManager, queue: taskcluster.Queue, tq: str
) -> None:
    local_pool(wm, tq, idleTimeoutSeconds=1)
    assert live(wm, tq) == []  # minCapacity 0: nothing runs while nothing waits
    task_id = create(queue, tq, **sleeper(0))
    done = wait_for_status(
        queue, task_id, state_is("completed"), what="a worker the pool started", timeout=60
    )
    run = done["runs"][-1]
    assert run["workerGroup"] == "local"
    worker = wm.worker(tq, "local", run["workerId"])
    assert worker["providerId"] == "local"
    # It found no more work for a second: it exits, and is recorded stopped.
    wait_for(
        lambda: wm.worker(tq, "local", run["workerId"])["state"] == "stopped",
        what="the idle worker to stop",
        timeout=60,
    )
    assert live(wm, tq) == []


def test_a_burst_never_gets_more_than_max_capacity(
    wm: taskcluster.WorkerManager, queue: taskcluster.Queue, tq: str
) -> None:
    local_pool(wm, tq, maxCapacity=2, idleTimeoutSeconds=30)
    task_ids = [create(queue, tq, **sleeper(1)) for _ in range(6)]
    most = 0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        most = max(most, len(live(wm, tq)))
        if all(queue.status(t)["status"]["state"] == "completed" for t in task_ids):
            break
        time.sleep(0.1)
    assert all(queue.status(t)["status"]["state"] == "completed" for t in task_ids)
    assert most == 2
    pool = wm.workerPool(tq)
    assert pool["currentCapacity"] <= 2


def test_a_crashed_worker_is_reported_and_replaced(wm: taskcluster.WorkerManager, tq: str) -> None:
    local_pool(wm, tq, minCapacity=1, maxCapacity=1)
    (first,) = wait_for(
        lambda: [w for w in live(wm, tq) if w["state"] == "running"],
        what="the pool's first worker",
        timeout=60,
    )
    os.kill(pid_of(first["workerId"]), signal.SIGKILL)
    errors = wait_for(
        lambda: wm.listWorkerPoolErrors(tq)["workerPoolErrors"], what="the crash's error", timeout=30
    )
    assert errors[0]["kind"] == "worker-crashed" and first["workerId"] in errors[0]["title"]
    assert "signal 9" in errors[0]["title"]
    replacement = wait_for(
        lambda: [w for w in live(wm, tq) if w["workerId"] != first["workerId"]],
        what="a replacement",
        timeout=60,
    )
    assert len(replacement) == 1
    assert wm.worker(tq, "local", first["workerId"])["state"] == "stopped"


def test_a_removed_local_worker_stops_and_a_deleted_pool_lets_its_workers_go(
    wm: taskcluster.WorkerManager, tq: str
) -> None:
    local_pool(wm, tq, minCapacity=1, maxCapacity=1)
    (first,) = wait_for(
        lambda: [w for w in live(wm, tq) if w["state"] == "running"], what="the first worker", timeout=60
    )
    pid = pid_of(first["workerId"])
    wm.removeWorker(tq, "local", first["workerId"])
    wait_for(lambda: not alive(pid), what="the removed worker's process to exit", timeout=30)
    wait_for(
        lambda: wm.worker(tq, "local", first["workerId"])["state"] == "stopped", what="stopped", timeout=30
    )
    second = wait_for(
        lambda: [w for w in live(wm, tq) if w["state"] == "running"], what="a new worker", timeout=60
    )
    pid = pid_of(second[0]["workerId"])
    assert wm.deleteWorkerPool(tq)["providerId"] == "null-provider"
    wait_for(lambda: not alive(pid), what="the deleted pool's worker to exit", timeout=30)
    assert wm.listWorkerPoolErrors(tq)["workerPoolErrors"] == []  # stopping on request is no crash


@pytest.fixture
def own_server(db_url: str, tmp_path: Path) -> Iterator[Server]:
    running = start_server(db_url, tmp_path / "data", name="killed")
    yield running
    running.stop()


def test_a_killed_server_leaves_no_worker_running(own_server: Server, tmp_path: Path) -> None:
    wm = taskcluster.WorkerManager(own_server.options())
    pool = "e2e-killed/wlocal"
    local_pool(wm, pool, minCapacity=1, maxCapacity=1)
    (first,) = wait_for(
        lambda: [w for w in live(wm, pool) if w["state"] == "running"], what="a worker", timeout=60
    )
    pid = pid_of(first["workerId"])
    own_server.process.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
    own_server.process.wait()  # type: ignore[union-attr]
    wait_for(lambda: not alive(pid), what="the worker to die with its server", timeout=30)
    own_server.start()
    wm = taskcluster.WorkerManager(own_server.options())
    wait_for(
        lambda: wm.worker(pool, "local", first["workerId"])["state"] == "stopped",
        what="the dead server's worker recorded stopped",
        timeout=30,
    )
    (second,) = wait_for(lambda: live(wm, pool), what="a new worker", timeout=60)
    assert second["workerId"] != first["workerId"]
