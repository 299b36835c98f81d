"""cancelTask and task groups: sealing, cancelling, listing (docs/protocol.md, Task groups)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import taskcluster

from tests.e2e.conftest import Server
from tests.e2e.helpers import WORKER, claim_one, create, definition, iso, now, parse, refused, slug


def concurrently(server: Server, count: int, call: str, *args: Any) -> list[Any]:
    """Make the same call `count` times at once, each from its own thread and client."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def worker(index: int) -> None:
        client = server.client()
        barrier.wait()
        try:
            results[index] = getattr(client, call)(*args)
        except BaseException as exc:
            results[index] = exc

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def test_cancel_pending_task(queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq)
    first = queue.cancelTask(task_id)
    status = first["status"]
    assert status["state"] == "exception"
    assert [(r["reasonCreated"], r["state"], r["reasonResolved"]) for r in status["runs"]] == [
        ("scheduled", "exception", "canceled")
    ]
    assert queue.cancelTask(task_id) == first
    assert queue.status(task_id) == first
    # A canceled task is not handed to workers.
    assert queue.pendingTasks(tq)["pendingTasks"] == 0


def test_cancel_unscheduled_task_creates_an_exception_run(queue: taskcluster.Queue, tq: str) -> None:
    task_id = slug()
    queue.createTask(task_id, definition(tq, dependencies=[task_id]))
    assert queue.status(task_id)["status"]["state"] == "unscheduled"
    status = queue.cancelTask(task_id)["status"]
    assert status["state"] == "exception"
    assert len(status["runs"]) == 1
    run = status["runs"][0]
    assert (run["reasonCreated"], run["state"], run["reasonResolved"]) == (
        "exception",
        "exception",
        "canceled",
    )
    assert run["scheduled"] == run["resolved"]


def test_concurrent_cancels_make_one_run(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    unscheduled = slug()
    queue.createTask(unscheduled, definition(tq, dependencies=[unscheduled]))
    pending = create(queue, tq)
    for task_id, created in ((unscheduled, "exception"), (pending, "scheduled")):
        results = concurrently(server, 10, "cancelTask", task_id)
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, errors
        status = queue.status(task_id)["status"]
        assert [(r["reasonCreated"], r["reasonResolved"]) for r in status["runs"]] == [(created, "canceled")]
        assert all(r["status"] == status for r in results)


def test_cancel_running_task_stops_the_worker(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq)
    claim = claim_one(queue, tq)
    status = queue.cancelTask(task_id)["status"]
    run = status["runs"][0]
    assert (status["state"], run["reasonResolved"]) == ("exception", "canceled")
    assert (run["workerGroup"], run["workerId"]) == (WORKER["workerGroup"], WORKER["workerId"])
    assert queue.cancelTask(task_id)["status"] == status
    worker = server.client(claim["credentials"])
    with refused(409, "RequestConflict"):
        worker.reclaimTask(task_id, "0")
    with refused(409, "RequestConflict"):
        worker.reportCompleted(task_id, "0")
    assert queue.status(task_id)["status"] == status


def test_cancel_resolved_task_changes_nothing(queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq)
    claim_one(queue, tq)
    done = queue.reportCompleted(task_id, "0")
    assert queue.cancelTask(task_id) == done
    with refused(404, "ResourceNotFound"):
        queue.cancelTask(slug())


def test_cancel_task_group_needs_a_sealed_group(queue: taskcluster.Queue, tq: str) -> None:
    group = slug()
    members = sorted(create(queue, tq, taskGroupId=group) for _ in range(5))
    with refused(409, "RequestConflict"):
        queue.cancelTaskGroup(group)
    assert all(queue.status(t)["status"]["state"] == "pending" for t in members)
    queue.sealTaskGroup(group)
    result = queue.cancelTaskGroup(group)
    assert result["taskGroupId"] == group
    assert (result["taskGroupSize"], result["cancelledCount"]) == (5, 5)
    assert sorted(result["taskIds"]) == members
    for task_id in members:
        status = queue.status(task_id)["status"]
        assert (status["state"], status["runs"][-1]["reasonResolved"]) == ("exception", "canceled")
    again = queue.cancelTaskGroup(group)
    assert (again["taskGroupSize"], again["cancelledCount"], again["taskIds"]) == (5, 0, [])
    with refused(404, "ResourceNotFound"):
        queue.cancelTaskGroup(slug())


def test_cancel_task_group_counts_only_what_it_cancelled(queue: taskcluster.Queue, tq: str) -> None:
    group = slug()
    members = [create(queue, tq, taskGroupId=group) for _ in range(3)]
    queue.cancelTask(members[0])
    queue.sealTaskGroup(group)
    result = queue.cancelTaskGroup(group)
    assert (result["taskGroupSize"], result["cancelledCount"]) == (3, 2)
    assert sorted(result["taskIds"]) == sorted(members[1:])


def test_a_group_has_one_scheduler_id(queue: taskcluster.Queue, tq: str) -> None:
    group = slug()
    create(queue, tq, taskGroupId=group, schedulerId="sched-a")
    task_id = slug()
    with refused(409, "RequestConflict"):
        queue.createTask(task_id, definition(tq, taskGroupId=group, schedulerId="sched-b"))
    with refused(404, "ResourceNotFound"):
        queue.status(task_id)
    create(queue, tq, taskGroupId=group, schedulerId="sched-a")
    assert queue.getTaskGroup(group)["schedulerId"] == "sched-a"


def test_list_task_group_pages(queue: taskcluster.Queue, tq: str) -> None:
    group = slug()
    members = sorted(create(queue, tq, taskGroupId=group) for _ in range(3))
    whole = queue.listTaskGroup(group)
    assert whole["taskGroupId"] == group
    assert whole["schedulerId"] == "-"
    assert "continuationToken" not in whole
    assert sorted(t["status"]["taskId"] for t in whole["tasks"]) == members
    for entry in whole["tasks"]:
        assert entry["task"] == queue.task(entry["status"]["taskId"])
        assert entry["status"] == queue.status(entry["status"]["taskId"])["status"]

    seen: list[str] = []
    query: dict[str, Any] = {"limit": 1}
    pages = 0
    while True:
        page = queue.listTaskGroup(group, query=query)
        pages += 1
        assert len(page["tasks"]) <= 1
        seen += [t["status"]["taskId"] for t in page["tasks"]]
        if "continuationToken" not in page:
            break
        query = {"limit": 1, "continuationToken": page["continuationToken"]}
        assert pages < 10
    assert sorted(seen) == members and len(seen) == 3
    two = queue.listTaskGroup(group, query={"limit": 2})
    assert len(two["tasks"]) == 2 and "continuationToken" in two
    last = queue.listTaskGroup(group, query={"limit": 2, "continuationToken": two["continuationToken"]})
    assert len(last["tasks"]) == 1 and "continuationToken" not in last
    with refused(404, "ResourceNotFound"):
        queue.listTaskGroup(slug())


def test_get_and_seal_task_group(queue: taskcluster.Queue, tq: str) -> None:
    group = slug()
    member = create(queue, tq, taskGroupId=group)
    info = queue.getTaskGroup(group)
    assert info["taskGroupId"] == group
    assert info["schedulerId"] == "-"
    assert "sealed" not in info
    assert parse(info["expires"]) > parse(queue.task(member)["expires"])
    # A member that expires later keeps the group alive longer.
    longer = create(queue, tq, taskGroupId=group, expires=iso(now() + timedelta(days=400)))
    assert parse(queue.getTaskGroup(group)["expires"]) > parse(queue.task(longer)["expires"])
    sealed = queue.sealTaskGroup(group)
    assert "sealed" in sealed
    assert queue.sealTaskGroup(group)["sealed"] == sealed["sealed"]
    assert queue.getTaskGroup(group) == sealed

    late = slug()
    with refused(409, "RequestConflict"):
        queue.createTask(late, definition(tq, taskGroupId=group))
    with refused(404, "ResourceNotFound"):
        queue.task(late)
    # The existing member is still there and still works.
    assert queue.status(member)["status"]["state"] == "pending"
    with refused(404, "ResourceNotFound"):
        queue.getTaskGroup(slug())
    with refused(404, "ResourceNotFound"):
        queue.sealTaskGroup(slug())
    with refused(400, "InvalidRequestArguments"):
        queue.getTaskGroup("not-a-slugid")


def test_change_task_group_priority(queue: taskcluster.Queue, tq: str) -> None:
    group = slug()
    members = sorted(create(queue, tq, taskGroupId=group) for _ in range(2))
    resolved = create(queue, tq, taskGroupId=group, priority="low")
    claim = queue.claimTask(resolved, "0", WORKER)
    assert claim["runId"] == 0
    queue.reportCompleted(resolved, "0")
    result = queue.changeTaskGroupPriority(group, {"newPriority": "very-high"})
    assert result["taskGroupId"] == group
    assert result["newPriority"] == "very-high"
    assert result["tasksAffected"] == 2
    assert sorted(result["taskIds"]) == members
    for task_id in members:
        assert queue.status(task_id)["status"]["priority"] == "very-high"
        assert queue.task(task_id)["priority"] == "very-high"
    assert queue.status(resolved)["status"]["priority"] == "low"
    with refused(400):
        queue.changeTaskGroupPriority(group, {"newPriority": "normal"})
    with refused(404, "ResourceNotFound"):
        queue.changeTaskGroupPriority(slug(), {"newPriority": "high"})


class Claimer(threading.Thread):
    """Calls claimWork over and over until stopped; remembers the taskIds it was given."""

    def __init__(self, server: Server, task_queue: str, worker_id: str, start: threading.Barrier) -> None:
        super().__init__(daemon=True)
        self.client = server.client()
        self.task_queue = task_queue
        self.body = {"workerGroup": "race", "workerId": worker_id, "tasks": 4}
        self.start_together = start
        self.stop = threading.Event()
        self.claimed: list[str] = []
        self.errors: list[Any] = []

    def run(self) -> None:
        self.start_together.wait()
        while not self.stop.is_set():
            try:
                claims = self.client.claimWork(self.task_queue, self.body)["tasks"]
            except BaseException as exc:
                self.errors.append(getattr(exc, "body", exc))
                continue
            self.claimed += [c["status"]["taskId"] for c in claims]


def cancel_while_claiming(server: Server, queue: taskcluster.Queue, tq: str, count: int) -> dict[str, Any]:
    """Cancel `count` pending tasks (from both ends) while two workers claim them; answer what happened."""
    made = [create(queue, tq) for _ in range(count)]
    start = threading.Barrier(4)
    claimers = [Claimer(server, tq, f"racer-{n}", start) for n in range(2)]
    cancel_errors: list[Any] = []

    def cancel_all(order: list[str]) -> None:
        client = server.client()
        start.wait()
        for task_id in order:
            try:
                client.cancelTask(task_id)
            except BaseException as exc:
                cancel_errors.append(getattr(exc, "body", exc))

    cancelers = [
        threading.Thread(target=cancel_all, args=(made,), daemon=True),
        threading.Thread(target=cancel_all, args=(made[::-1],), daemon=True),
    ]
    for thread in [*claimers, *cancelers]:
        thread.start()
    for thread in cancelers:
        thread.join(60)
    for claimer in claimers:
        claimer.stop.set()
    for _ in claimers:  # wake any claimer still waiting, so that it sees it should stop
        create(queue, tq, tags={"wake": "up"})
    for claimer in claimers:
        claimer.join(60)
    return {
        "made": made,
        "claimed": [t for c in claimers for t in c.claimed if t in made],
        "errors": cancel_errors + [e for c in claimers for e in c.errors],
    }


def test_cancel_racing_claim_work_never_fails(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    for _ in range(6):  # a race: give it a few chances to show
        outcome = cancel_while_claiming(server, queue, tq, 30)
        # Each call must succeed: TaskCluster answers cancelTask 200 whatever a worker is doing.
        assert not outcome["errors"], outcome["errors"]
        claimed = outcome["claimed"]
        assert len(claimed) == len(set(claimed))
        for task_id in outcome["made"]:
            status = queue.status(task_id)["status"]
            assert status["state"] == "exception"
            assert [(r["runId"], r["reasonResolved"]) for r in status["runs"]] == [(0, "canceled")]
            assert ("workerGroup" in status["runs"][0]) == (task_id in claimed)


def test_create_task_again_in_a_sealed_group_conflicts(queue: taskcluster.Queue, tq: str) -> None:
    group = slug()
    task_id = slug()
    body = definition(tq, taskGroupId=group)
    first = queue.createTask(task_id, body)
    assert queue.createTask(task_id, body) == first
    queue.sealTaskGroup(group)
    # TaskCluster checks the group (sealed: 409) before it looks at an existing task with that id,
    # so even an identical repeat is refused once the group is sealed.
    with refused(409, "RequestConflict"):
        queue.createTask(task_id, body)
