"""The worker protocol: claimWork's long poll, claimTask, reclaimTask and task credentials
(docs/protocol.md, The worker protocol)."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest
import requests
import taskcluster

from tests.e2e.conftest import CLAIM_TIMEOUT, CLAIM_WORK_TIMEOUT, Server
from tests.e2e.helpers import (
    OTHER_WORKER,
    WORKER,
    claim_one,
    create,
    definition,
    now,
    parse,
    refused,
    signed,
    slug,
)


class Poll(threading.Thread):
    """One claimWork call in a thread of its own, with its own client; remembers what and when."""

    def __init__(self, server: Server, task_queue: str, worker: dict[str, str], tasks: int = 1) -> None:
        super().__init__(daemon=True)
        self.client = server.client()
        self.task_queue = task_queue
        self.body = {**worker, "tasks": tasks}
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.elapsed = 0.0

    def run(self) -> None:
        started = time.monotonic()
        try:
            self.result = self.client.claimWork(self.task_queue, self.body)
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc
        self.elapsed = time.monotonic() - started

    def outcome(self) -> dict[str, Any]:
        self.join(CLAIM_WORK_TIMEOUT + 30)
        assert not self.is_alive(), "claimWork did not return at all"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def test_claim_work_claims_a_pending_task(queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq, scopes=["e2e:some-scope", "e2e:other/*"])
    before = now()
    claim = claim_one(queue, tq)
    after = now()
    assert claim["runId"] == 0
    assert (claim["workerGroup"], claim["workerId"]) == (WORKER["workerGroup"], WORKER["workerId"])
    taken_until = parse(claim["takenUntil"])
    assert taken_until >= before
    assert before + timedelta(seconds=CLAIM_TIMEOUT - 1) <= taken_until
    assert taken_until <= after + timedelta(seconds=CLAIM_TIMEOUT + 1)
    assert claim["task"] == queue.task(task_id)
    status = claim["status"]
    assert status["taskId"] == task_id and status["state"] == "running"
    run = status["runs"][0]
    assert run["state"] == "running"
    assert (run["workerGroup"], run["workerId"]) == (WORKER["workerGroup"], WORKER["workerId"])
    assert run["takenUntil"] == claim["takenUntil"]
    assert "started" in run
    assert queue.status(task_id)["status"] == status
    credentials = claim["credentials"]
    assert set(credentials) >= {"clientId", "accessToken", "certificate"}
    prefix = f"task-client/{task_id}/0/on/{WORKER['workerGroup']}/{WORKER['workerId']}/until/"
    assert credentials["clientId"].startswith(prefix)
    certificate = json.loads(credentials["certificate"])
    assert certificate["scopes"] == [
        f"queue:reclaim-task:{task_id}/0",
        f"queue:resolve-task:{task_id}/0",
        f"queue:create-artifact:{task_id}/0",
        "e2e:some-scope",
        "e2e:other/*",
    ]
    assert certificate["expiry"] == int(taken_until.timestamp() * 1000)
    assert certificate["issuer"] and certificate["issuer"] != credentials["clientId"]
    # The queue has nothing left for a second worker.
    assert queue.pendingTasks(tq)["pendingTasks"] == 0


def test_claim_credentials_can_reclaim_and_report_completed(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    first = create(queue, tq)
    claim = claim_one(queue, tq)
    assert claim["status"]["taskId"] == first
    worker = server.client(claim["credentials"])
    reclaim = worker.reclaimTask(first, "0")
    assert set(reclaim) >= {"status", "runId", "workerGroup", "workerId", "takenUntil", "credentials"}
    assert reclaim["runId"] == 0
    assert (reclaim["workerGroup"], reclaim["workerId"]) == (WORKER["workerGroup"], WORKER["workerId"])
    assert parse(reclaim["takenUntil"]) >= parse(claim["takenUntil"])
    assert reclaim["status"]["runs"][0]["takenUntil"] == reclaim["takenUntil"]
    assert reclaim["status"]["state"] == "running"
    # The credentials that came with the reclaim resolve the run.
    reclaimed = server.client(reclaim["credentials"])
    done = reclaimed.reportCompleted(first, "0")["status"]
    assert done["state"] == "completed"
    assert done["runs"][0]["reasonResolved"] == "completed"

    second = create(queue, tq)
    claim = claim_one(queue, tq)
    assert claim["status"]["taskId"] == second
    done = server.client(claim["credentials"]).reportCompleted(second, "0")["status"]
    assert done["state"] == "completed"
    assert queue.status(second)["status"] == done


def test_higher_priority_is_claimed_before_older_lower_priority(queue: taskcluster.Queue, tq: str) -> None:
    low = create(queue, tq)  # priority lowest, and older
    high = create(queue, tq, priority="high")
    medium = create(queue, tq, priority="medium")
    order = [claim_one(queue, tq)["status"]["taskId"] for _ in range(3)]
    assert order == [high, medium, low]


def test_same_priority_is_claimed_oldest_first(queue: taskcluster.Queue, tq: str) -> None:
    made = [create(queue, tq) for _ in range(3)]
    claims = queue.claimWork(tq, {**WORKER, "tasks": 3})["tasks"]
    assert [c["status"]["taskId"] for c in claims] == made


def test_claim_work_with_room_for_two_answers_the_one_pending(queue: taskcluster.Queue, tq: str) -> None:
    task_id = slug()
    body = definition(tq)
    queue.createTask(task_id, body)
    queue.createTask(task_id, body)  # idempotent: still one task, one pending run
    started = time.monotonic()
    claims = queue.claimWork(tq, {**WORKER, "tasks": 2})["tasks"]
    assert [(c["status"]["taskId"], c["runId"]) for c in claims] == [(task_id, 0)]
    assert time.monotonic() - started < CLAIM_WORK_TIMEOUT, "it waited to fill the second place"


def test_claim_work_refuses_more_than_32_tasks(queue: taskcluster.Queue, tq: str) -> None:
    with refused(400, "InputValidationError"):
        queue.claimWork(tq, {**WORKER, "tasks": 33})
    with refused(400, "InputValidationError"):
        queue.claimWork(tq, {**WORKER, "tasks": 0})
    with refused(400, "InputValidationError"):
        queue.claimWork(tq, {"workerGroup": "wg"})


@pytest.mark.slow
def test_claim_work_on_an_empty_queue_answers_nothing_after_the_timeout_and_records_the_worker(
    queue: taskcluster.Queue, tq: str
) -> None:
    started = time.monotonic()
    assert queue.claimWork(tq, {**WORKER, "tasks": 4}) == {"tasks": []}
    assert time.monotonic() - started >= CLAIM_WORK_TIMEOUT - 0.05
    # Even a worker that got nothing was seen polling its task queue: TaskCluster's claimWork
    # records the task queue and the worker whatever the outcome (workerInfo.seen), so that
    # idle workers show up in getTaskQueue / listWorkers / getWorker.
    provisioner_id, worker_type = tq.split("/")
    assert queue.getTaskQueue(tq)["taskQueueId"] == tq
    worker = queue.getWorker(provisioner_id, worker_type, WORKER["workerGroup"], WORKER["workerId"])
    assert worker["recentTasks"] == []
    listed = queue.listWorkers(provisioner_id, worker_type)["workers"]
    assert [w["workerId"] for w in listed] == [WORKER["workerId"]]


def test_worker_that_hangs_up_while_waiting_is_given_nothing(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    url = f"{server.api}/claim-work/{quote(tq, safe='')}"
    with pytest.raises(requests.ReadTimeout):
        signed("POST", url, {**WORKER, "tasks": 1}, server.credentials, timeout=0.5)
    time.sleep(0.3)  # the worker is gone; its long poll must not claim anything for it now
    task_id = create(queue, tq)
    time.sleep(0.3)
    assert queue.status(task_id)["status"]["state"] == "pending"
    claim = claim_one(queue, tq, OTHER_WORKER)
    assert (claim["status"]["taskId"], claim["workerId"]) == (task_id, OTHER_WORKER["workerId"])


def test_claim_work_skips_canceled_tasks(queue: taskcluster.Queue, tq: str) -> None:
    first, canceled, last = (create(queue, tq) for _ in range(3))
    queue.cancelTask(canceled)
    claims = queue.claimWork(tq, {**WORKER, "tasks": 3})["tasks"]
    assert [c["status"]["taskId"] for c in claims] == [first, last]


def test_waiting_worker_gets_a_task_as_soon_as_it_is_created(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    poll = Poll(server, tq, WORKER)
    poll.start()
    time.sleep(0.3)  # let the worker start waiting
    assert poll.is_alive(), "claimWork returned before any task existed"
    task_id = create(queue, tq)
    claims = poll.outcome()["tasks"]
    assert [c["status"]["taskId"] for c in claims] == [task_id]
    assert poll.elapsed < CLAIM_WORK_TIMEOUT, "claimWork only answered when its long poll ran out"


def test_two_waiting_workers_each_get_one_of_two_new_tasks(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    polls = [Poll(server, tq, WORKER), Poll(server, tq, OTHER_WORKER)]
    for poll in polls:
        poll.start()
    time.sleep(0.3)
    made = {create(queue, tq), create(queue, tq)}
    got = [c["status"]["taskId"] for poll in polls for c in poll.outcome()["tasks"]]
    assert sorted(got) == sorted(made)
    assert all(poll.elapsed < CLAIM_WORK_TIMEOUT for poll in polls)


def test_waiting_worker_wakes_for_a_rerun(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq)
    claim_one(queue, tq)
    queue.reportFailed(task_id, "0")
    poll = Poll(server, tq, WORKER)
    poll.start()
    time.sleep(0.3)
    queue.rerunTask(task_id)
    claims = poll.outcome()["tasks"]
    assert [(c["status"]["taskId"], c["runId"]) for c in claims] == [(task_id, 1)]
    assert poll.elapsed < CLAIM_WORK_TIMEOUT


def test_claim_task_equals_status_and_is_idempotent_for_the_same_worker(
    queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create(queue, tq)
    claim = queue.claimTask(task_id, "0", WORKER)
    assert claim["runId"] == 0
    assert claim["status"] == queue.status(task_id)["status"]
    assert claim["status"]["state"] == "running"
    assert claim["task"] == queue.task(task_id)
    again = queue.claimTask(task_id, "0", WORKER)
    assert again["status"] == claim["status"]
    with refused(409, "RequestConflict"):
        queue.claimTask(task_id, "0", OTHER_WORKER)
    with refused(404, "ResourceNotFound"):
        queue.claimTask(task_id, "1", WORKER)
    with refused(404, "ResourceNotFound"):
        queue.claimTask(slug(), "0", WORKER)
    # A claimed task is no longer handed out by claimWork.
    assert queue.pendingTasks(tq)["pendingTasks"] == 0


def test_chained_reclaims_never_move_taken_until_back(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create(queue, tq)
    claim = queue.claimTask(task_id, "0", WORKER)
    taken_until = parse(claim["takenUntil"])
    credentials = claim["credentials"]
    for _ in range(3):
        reclaim = server.client(credentials).reclaimTask(task_id, "0")
        assert parse(reclaim["takenUntil"]) >= taken_until
        taken_until, credentials = parse(reclaim["takenUntil"]), reclaim["credentials"]
    assert queue.status(task_id)["status"]["runs"][0]["takenUntil"] == reclaim["takenUntil"]


def test_reclaim_of_missing_task_or_run_is_404_and_of_a_resolved_run_409(
    queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create(queue, tq)
    with refused(404, "ResourceNotFound"):
        queue.reclaimTask(slug(), "0")
    with refused(409, "RequestConflict"):
        queue.reclaimTask(task_id, "0")  # pending, not claimed
    claim_one(queue, tq)
    with refused(404, "ResourceNotFound"):
        queue.reclaimTask(task_id, "1")
    queue.reportCompleted(task_id, "0")
    with refused(409, "RequestConflict"):
        queue.reclaimTask(task_id, "0")
