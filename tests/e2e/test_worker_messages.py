"""What a worker and `taskyard task log` say when a task is canceled, unclaimed, or the worker is refused.

Real `taskyard serve` and `taskyard worker` processes on SQLite, as in test_worker.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import taskcluster

from tests.e2e.conftest import ROOT_CLIENT_ID, TASKYARD, Server
from tests.e2e.helpers import create as create_plain
from tests.e2e.workers import (
    WorkerProcess,
    create,
    fetch,
    resolved,
    sh,
    sqlite_module_db_url,
    wait_for,
    worker_process,
)

EXIT_REFUSED = 77  # a worker whose credentials the queue refuses (worker.EXIT_REFUSED, documented)


__all__ = ["sqlite_module_db_url", "worker_process"]  # the module's fixtures, from tests/e2e/workers.py


def cli_env(server: Server) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TASKCLUSTER_", "TASKYARD_"))},
        "TASKCLUSTER_ROOT_URL": server.root_url,
        "TASKCLUSTER_CLIENT_ID": ROOT_CLIENT_ID,
        "TASKCLUSTER_ACCESS_TOKEN": server.access_token,
    }


def test_a_canceled_task_s_log_ends_saying_so_without_a_409_block(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    # It writes all along, so its log streams to the server before and after the cancel.
    task_id = create(queue, tq, {"command": sh("while true; do echo tick; sleep 0.1; done")})
    follower = subprocess.Popen(
        [str(TASKYARD), "task", "log", task_id, "-f"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(server),
    )
    try:
        assert follower.stdout is not None
        while b"tick" not in follower.stdout.readline():  # the log streams live: cancel it then
            assert follower.poll() is None, "the log ended before the task wrote to it"
        queue.cancelTask(task_id)
        _, errors = follower.communicate(timeout=60)
    finally:
        follower.kill()
    assert follower.returncode == 1
    assert f"task {task_id} was canceled".encode() in errors, errors

    assert resolved(queue, task_id)["reasonResolved"] == "canceled"
    uploaded = wait_for(queue, task_id, lambda _: b"=== Task Finished ===" in _backing_log(server, task_id))
    assert uploaded["state"] == "exception"
    log = _backing_log(server, task_id).decode()
    # A 409 as a word: not the digits of a timestamp's milliseconds (03.409Z) or of the random
    # task queue's name, which the log's header shows.
    assert not re.search(r"\b409\b", log.replace(tq, "").replace(task_id, "")), log
    assert "RequestConflict" not in log and "statusCode" not in log, log
    assert "canceled" in log.rstrip().splitlines()[-1]


def _backing_log(server: Server, task_id: str) -> bytes:
    response = fetch(server, task_id, "public/logs/live.log")
    return response.content if response.status_code == 200 else b""


def test_task_log_of_an_unclaimed_task_says_it_waits_and_for_which_queue(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create_plain(queue, tq)
    env = cli_env(server)
    once = subprocess.run(
        [str(TASKYARD), "task", "log", task_id], capture_output=True, text=True, env=env, timeout=60
    )
    assert once.returncode == 1
    assert f"waiting for a worker to claim it from task queue {tq}" in once.stderr, once.stderr
    assert "no worker has been seen on it" in once.stderr

    queue.claimWork(tq, {"tasks": 1, "workerGroup": "g", "workerId": "seen"})  # a worker shows up
    other = create_plain(queue, tq)
    with subprocess.Popen(
        [str(TASKYARD), "task", "log", other, "-f"], stderr=subprocess.PIPE, text=True, env=env
    ) as follower:
        try:
            assert follower.stderr is not None
            said = follower.stderr.readline()
        finally:
            follower.kill()
    assert f"task {other} is pending: waiting for a worker" in said and tq in said, said
    assert "1 worker seen on it" in said


def test_a_worker_with_a_wrong_token_stops_with_a_clear_message(
    server: Server, tq: str, tmp_path: Path
) -> None:
    worker = WorkerProcess(server, tq, tmp_path / "work", env={"TASKCLUSTER_ACCESS_TOKEN": "wrong"}).start()
    try:
        assert worker.wait(timeout=120) == EXIT_REFUSED
    finally:
        worker.stop()
    said = worker.log_path.read_text()
    assert f"refused claimWork for client '{ROOT_CLIENT_ID}'" in said  # at start-up: the first refusal
    assert "TASKCLUSTER_ACCESS_TOKEN" in said.splitlines()[-1]


def test_a_worker_without_the_claim_scope_stops_naming_it(server: Server, tq: str, tmp_path: Path) -> None:
    auth = server.auth_client()
    client_id = f"no-claims/{tq}"
    token = auth.createClient(
        client_id, {"expires": "3000-01-01T00:00:00Z", "scopes": [], "description": "d"}
    )["accessToken"]
    env = {"TASKCLUSTER_CLIENT_ID": client_id, "TASKCLUSTER_ACCESS_TOKEN": token}
    worker = WorkerProcess(server, tq, tmp_path / "work", env=env).start()
    try:
        assert worker.wait(timeout=120) == EXIT_REFUSED
    finally:
        worker.stop()
    last = worker.log_path.read_text().splitlines()[-1]
    assert f"queue:claim-work:{tq}" in last and client_id in last, json.dumps(last)
