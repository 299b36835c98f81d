"""Reading the queue: tasks/statuses, counts, pending and claimed lists, priorities, task queues and
workers, quarantine (docs/protocol.md, Queue API)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
import taskcluster

from tests.e2e.conftest import CLAIM_WORK_TIMEOUT, Server
from tests.e2e.helpers import (
    OTHER_WORKER,
    WORKER,
    claim_one,
    create,
    definition,
    iso,
    now,
    parse,
    refused,
    signed,
    slug,
)


def collect(call: Any, key: str, *args: Any, limit: int) -> tuple[list[Any], list[int]]:
    """Every item of a paged list, and the size of each page."""
    items: list[Any] = []
    sizes: list[int] = []
    query: dict[str, Any] = {"limit": limit}
    for _ in range(50):
        page = call(*args, query=query)
        items += page[key]
        sizes.append(len(page[key]))
        if "continuationToken" not in page:
            return items, sizes
        query = {"limit": limit, "continuationToken": page["continuationToken"]}
    raise AssertionError("paging never ended")


def test_bulk_tasks_and_statuses_skip_unknown_ids(queue: taskcluster.Queue, tq: str) -> None:
    made = [create(queue, tq, tags={"n": str(n)}) for n in range(3)]
    unknown = slug()
    tasks = queue.tasks({"taskIds": [*made, unknown]})["tasks"]
    assert sorted(t["taskId"] for t in tasks) == sorted(made)
    for entry in tasks:
        assert entry["task"] == queue.task(entry["taskId"])
    statuses = queue.statuses({"taskIds": [unknown, *made]})["statuses"]
    assert sorted(s["taskId"] for s in statuses) == sorted(made)
    for entry in statuses:
        assert entry["status"] == queue.status(entry["taskId"])["status"]
    assert queue.tasks({"taskIds": [unknown]})["tasks"] == []
    with refused(400, "InputValidationError"):
        queue.statuses({"taskIds": ["not-a-slugid"]})


def test_pending_tasks_counts(queue: taskcluster.Queue, tq: str) -> None:
    assert queue.pendingTasks(tq)["pendingTasks"] == 0
    task_id = slug()
    body = definition(tq)
    queue.createTask(task_id, body)
    create(queue, tq)
    queue.createTask(task_id, body)  # an idempotent repeat adds nothing
    counted = queue.pendingTasks(tq)
    provisioner_id, worker_type = tq.split("/")
    assert counted == {
        "provisionerId": provisioner_id,
        "workerType": worker_type,
        "taskQueueId": tq,
        "pendingTasks": 2,
    }
    with refused(400, "InvalidRequestArguments"):
        queue.pendingTasks("1/1")


def test_task_queue_id_may_be_sent_with_a_literal_slash(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    create(queue, tq)
    claim_one(queue, tq)
    create(queue, tq)
    for route in (
        f"/pending/{tq}",
        f"/task-queues/{tq}/counts",
        f"/task-queues/{tq.replace('/', '%2F')}/counts",
    ):
        reply = signed("GET", server.api + route, None, server.credentials)
        assert reply.status_code == 200, (route, reply.text)
        assert reply.json()["taskQueueId"] == tq
        assert reply.json()["pendingTasks"] == 1
    reply = signed("GET", f"{server.api}/task-queues/{tq}", None, server.credentials)
    assert reply.status_code == 200, reply.text
    assert reply.json()["taskQueueId"] == tq


def test_task_queue_counts_follow_claims(queue: taskcluster.Queue, tq: str) -> None:
    create(queue, tq)
    create(queue, tq)

    def counts() -> tuple[int, int]:
        body = queue.taskQueueCounts(tq)
        assert body["taskQueueId"] == tq
        return body["pendingTasks"], body["claimedTasks"]

    assert counts() == (2, 0)
    first = claim_one(queue, tq)
    assert counts() == (1, 1)
    claim_one(queue, tq, OTHER_WORKER)
    assert counts() == (0, 2)
    queue.reportCompleted(first["status"]["taskId"], "0")
    assert counts() == (0, 1)


def test_list_pending_tasks_in_insertion_order_page_by_page(queue: taskcluster.Queue, tq: str) -> None:
    assert queue.listPendingTasks(tq) == {"tasks": []}
    made = [create(queue, tq) for _ in range(10)]
    whole = queue.listPendingTasks(tq)
    assert [t["taskId"] for t in whole["tasks"]] == made
    assert "continuationToken" not in whole
    first = whole["tasks"][0]
    assert first["runId"] == 0
    assert first["task"] == queue.task(first["taskId"])
    parse(first["inserted"])
    items, sizes = collect(queue.listPendingTasks, "tasks", tq, limit=6)
    assert sizes == [6, 4]
    assert [t["taskId"] for t in items] == made
    # Claiming takes a task off the list.
    claim_one(queue, tq)
    assert [t["taskId"] for t in queue.listPendingTasks(tq)["tasks"]] == made[1:]


def test_list_claimed_tasks(queue: taskcluster.Queue, tq: str) -> None:
    assert queue.listClaimedTasks(tq) == {"tasks": []}
    made = [create(queue, tq) for _ in range(3)]
    claims = [claim_one(queue, tq, worker) for worker in (WORKER, OTHER_WORKER, WORKER)]
    listed = queue.listClaimedTasks(tq)["tasks"]
    assert [t["taskId"] for t in listed] == made
    for entry, claim in zip(listed, claims, strict=True):
        assert entry["runId"] == 0
        assert (entry["workerGroup"], entry["workerId"]) == (claim["workerGroup"], claim["workerId"])
        assert entry["task"] == claim["task"]
        parse(entry["claimed"])
    items, sizes = collect(queue.listClaimedTasks, "tasks", tq, limit=2)
    assert sizes == [2, 1]
    assert [t["taskId"] for t in items] == made


def test_change_task_priority(queue: taskcluster.Queue, tq: str) -> None:
    older = create(queue, tq)
    newer = create(queue, tq)
    changed = queue.changeTaskPriority(newer, {"newPriority": "highest"})
    assert changed["status"]["priority"] == "highest"
    assert queue.task(newer)["priority"] == "highest"
    with refused(409, "RequestConflict"):
        queue.changeTaskPriority(newer, {"newPriority": "highest"})
    with refused(400):
        queue.changeTaskPriority(newer, {"newPriority": "normal"})
    with refused(404, "ResourceNotFound"):
        queue.changeTaskPriority(slug(), {"newPriority": "high"})
    # The higher priority is what claimWork goes by.
    assert claim_one(queue, tq)["status"]["taskId"] == newer
    queue.reportCompleted(newer, "0")
    with refused(409, "RequestConflict"):
        queue.changeTaskPriority(newer, {"newPriority": "low"})
    assert claim_one(queue, tq)["status"]["taskId"] == older
    # The new priority stays with the task when it runs again.
    assert queue.rerunTask(newer)["status"]["priority"] == "highest"
    assert queue.task(newer)["priority"] == "highest"


def test_claims_record_task_queues_and_workers(queue: taskcluster.Queue, tq: str) -> None:
    provisioner_id, worker_type = tq.split("/")
    with refused(404, "ResourceNotFound"):
        queue.getTaskQueue(tq)
    with refused(404, "ResourceNotFound"):
        queue.getWorker(provisioner_id, worker_type, WORKER["workerGroup"], WORKER["workerId"])
    made = [create(queue, tq) for _ in range(2)]
    for _ in made:
        claim_one(queue, tq)
    task_queue = queue.getTaskQueue(tq)
    assert task_queue["taskQueueId"] == tq
    assert parse(task_queue["expires"]) > now()
    assert tq in [q["taskQueueId"] for q in queue.listTaskQueues()["taskQueues"]]
    assert queue.getWorkerType(provisioner_id, worker_type)["workerType"] == worker_type
    assert worker_type in [w["workerType"] for w in queue.listWorkerTypes(provisioner_id)["workerTypes"]]
    assert queue.getProvisioner(provisioner_id)["provisionerId"] == provisioner_id

    worker = queue.getWorker(provisioner_id, worker_type, WORKER["workerGroup"], WORKER["workerId"])
    assert (worker["workerGroup"], worker["workerId"]) == (WORKER["workerGroup"], WORKER["workerId"])
    assert worker["recentTasks"] == [{"taskId": t, "runId": 0} for t in made]
    assert parse(worker["quarantineUntil"]) < now()
    listed = queue.listWorkers(provisioner_id, worker_type)["workers"]
    assert [(w["workerGroup"], w["workerId"]) for w in listed] == [
        (WORKER["workerGroup"], WORKER["workerId"])
    ]
    assert listed[0]["latestTask"] == {"taskId": made[-1], "runId": 0}


def test_declare_worker(queue: taskcluster.Queue, tq: str) -> None:
    provisioner_id, worker_type = tq.split("/")
    expires = iso(now() + timedelta(days=2))
    declared = queue.declareWorker(provisioner_id, worker_type, "decl-wg", "decl-1", {"expires": expires})
    assert (declared["provisionerId"], declared["workerType"]) == (provisioner_id, worker_type)
    assert (declared["workerGroup"], declared["workerId"]) == ("decl-wg", "decl-1")
    assert declared["expires"] == expires
    assert declared["recentTasks"] == []
    assert queue.getWorker(provisioner_id, worker_type, "decl-wg", "decl-1") == declared
    assert queue.getTaskQueue(tq)["taskQueueId"] == tq
    listed = queue.listWorkers(provisioner_id, worker_type)["workers"]
    assert [(w["workerGroup"], w["workerId"]) for w in listed] == [("decl-wg", "decl-1")]
    with refused(400):
        queue.declareWorker(provisioner_id, worker_type, "decl-wg", "decl-2", {})
    with refused(400, "InputValidationError"):
        queue.declareWorker(provisioner_id, worker_type, "decl-wg", "decl-2", {"unknown": 1})
    with refused(404, "ResourceNotFound"):
        queue.getWorker(provisioner_id, worker_type, "decl-wg", "decl-2")


def test_worker_listing_pages(queue: taskcluster.Queue, tq: str) -> None:
    provisioner_id, worker_type = tq.split("/")
    expires = iso(now() + timedelta(days=1))
    names = [f"w{n}" for n in range(5)]
    for name in names:
        queue.declareWorker(provisioner_id, worker_type, "page-wg", name, {"expires": expires})
    items, sizes = collect(queue.listWorkers, "workers", provisioner_id, worker_type, limit=2)
    assert sizes == [2, 2, 1]
    assert [w["workerId"] for w in items] == names


@pytest.mark.slow
def test_quarantined_worker_gets_no_work(queue: taskcluster.Queue, tq: str) -> None:
    provisioner_id, worker_type = tq.split("/")
    wg, wid = WORKER["workerGroup"], WORKER["workerId"]
    with refused(404, "ResourceNotFound"):
        queue.quarantineWorker(provisioner_id, worker_type, wg, wid, {"quarantineUntil": iso(now())})
    queue.declareWorker(provisioner_id, worker_type, wg, wid, {"expires": iso(now() + timedelta(days=1))})
    until = iso(now() + timedelta(hours=1))
    quarantined = queue.quarantineWorker(
        provisioner_id, worker_type, wg, wid, {"quarantineUntil": until, "quarantineInfo": "misbehaving"}
    )
    assert quarantined["quarantineUntil"] == until
    assert (quarantined["workerGroup"], quarantined["workerId"]) == (wg, wid)
    assert queue.getWorker(provisioner_id, worker_type, wg, wid) == quarantined

    task_id = create(queue, tq)
    started = time.monotonic()
    assert queue.claimWork(tq, {**WORKER, "tasks": 1}) == {"tasks": []}
    assert time.monotonic() - started >= CLAIM_WORK_TIMEOUT - 0.05
    assert queue.claimTask(task_id, "0", WORKER) == {}
    assert queue.status(task_id)["status"]["state"] == "pending"

    def listed(quarantined: str) -> list[str]:
        workers = queue.listWorkers(provisioner_id, worker_type, query={"quarantined": quarantined})
        return [w["workerId"] for w in workers["workers"]]

    assert listed("true") == [wid]
    assert listed("false") == []
    [entry] = queue.listWorkers(provisioner_id, worker_type)["workers"]
    assert entry["quarantineUntil"] == until

    # Another worker of the queue is not affected.
    assert claim_one(queue, tq, OTHER_WORKER)["status"]["taskId"] == task_id
    assert sorted(listed("false")) == [OTHER_WORKER["workerId"]]
    other = [w for w in queue.listWorkers(provisioner_id, worker_type)["workers"] if w["workerId"] != wid]
    assert "quarantineUntil" not in other[0]

    # Lifting the quarantine: set quarantineUntil in the past.
    lifted = queue.quarantineWorker(provisioner_id, worker_type, wg, wid, {"quarantineUntil": iso(now())})
    assert parse(lifted["quarantineUntil"]) <= now()
    again = create(queue, tq)
    assert claim_one(queue, tq)["status"]["taskId"] == again


def test_a_worker_remembers_its_last_20_tasks(queue: taskcluster.Queue, tq: str) -> None:
    provisioner_id, worker_type = tq.split("/")
    made = [create(queue, tq) for _ in range(22)]
    claimed = queue.claimWork(tq, {**WORKER, "tasks": 12})["tasks"]
    claimed += queue.claimWork(tq, {**WORKER, "tasks": 10})["tasks"]
    assert [c["status"]["taskId"] for c in claimed] == made
    worker = queue.getWorker(provisioner_id, worker_type, WORKER["workerGroup"], WORKER["workerId"])
    assert worker["recentTasks"] == [{"taskId": t, "runId": 0} for t in made[-20:]]


def test_expired_workers_are_hidden(queue: taskcluster.Queue, tq: str) -> None:
    provisioner_id, worker_type = tq.split("/")
    soon = now() + timedelta(seconds=1)
    queue.declareWorker(
        provisioner_id, worker_type, "exp-wg", "alive", {"expires": iso(now() + timedelta(days=1))}
    )
    queue.declareWorker(provisioner_id, worker_type, "exp-wg", "going", {"expires": iso(soon)})
    assert sorted(w["workerId"] for w in queue.listWorkers(provisioner_id, worker_type)["workers"]) == [
        "alive",
        "going",
    ]
    time.sleep(max(0.0, (soon - now()).total_seconds()) + 0.1)
    assert [w["workerId"] for w in queue.listWorkers(provisioner_id, worker_type)["workers"]] == ["alive"]
    with refused(404, "ResourceNotFound"):
        queue.getWorker(provisioner_id, worker_type, "exp-wg", "going")
