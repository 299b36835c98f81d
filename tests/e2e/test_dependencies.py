"""Dependencies, deadlines, rerunTask and scheduleTask
(docs/protocol.md, The run state machine; Task groups and dependencies)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import taskcluster

from tests.e2e.helpers import (
    WORKER,
    create,
    definition,
    iso,
    now,
    refused,
    slug,
    state_is,
    wait_for,
    wait_for_status,
)


def finish(queue: taskcluster.Queue, task_id: str, how: str = "completed") -> None:
    """Claim the task's pending run 0 and resolve it `how`."""
    queue.claimTask(task_id, "0", WORKER)
    if how == "completed":
        queue.reportCompleted(task_id, "0")
    elif how == "failed":
        queue.reportFailed(task_id, "0")
    else:
        queue.reportException(task_id, "0", {"reason": how})


def state(queue: taskcluster.Queue, task_id: str) -> str:
    return str(queue.status(task_id)["status"]["state"])


def test_dependent_waits_for_its_dependency(queue: taskcluster.Queue, tq: str) -> None:
    required = create(queue, tq)
    dependent = slug()
    created = queue.createTask(dependent, definition(tq, dependencies=[required]))
    assert created["status"]["state"] == "unscheduled"
    assert created["status"]["runs"] == []
    listed = queue.listDependentTasks(required)
    assert listed["taskId"] == required
    assert [t["status"]["taskId"] for t in listed["tasks"]] == [dependent]
    assert listed["tasks"][0]["task"] == queue.task(dependent)
    assert queue.listDependentTasks(dependent)["tasks"] == []
    # The dependent is not handed out while it waits.
    assert queue.pendingTasks(tq)["pendingTasks"] == 1

    finish(queue, required)
    status = wait_for_status(queue, dependent, state_is("pending"), what="the dependent to be scheduled")
    assert [(r["runId"], r["reasonCreated"]) for r in status["runs"]] == [(0, "scheduled")]
    # Dependents are still listed after the dependency resolved.
    assert [t["status"]["taskId"] for t in queue.listDependentTasks(required)["tasks"]] == [dependent]
    with refused(404, "ResourceNotFound"):
        queue.listDependentTasks(slug())


def test_all_dependents_are_scheduled_and_listed_page_by_page(queue: taskcluster.Queue, tq: str) -> None:
    required = create(queue, tq)
    dependents = sorted(create(queue, tq, dependencies=[required]) for _ in range(5))
    seen: list[str] = []
    query: dict[str, Any] = {"limit": 2}
    sizes = []
    for _ in range(10):
        page = queue.listDependentTasks(required, query=query)
        sizes.append(len(page["tasks"]))
        seen += [t["status"]["taskId"] for t in page["tasks"]]
        if "continuationToken" not in page:
            break
        query = {"limit": 2, "continuationToken": page["continuationToken"]}
    assert sizes == [2, 2, 1]
    assert sorted(seen) == dependents
    assert sorted(t["status"]["taskId"] for t in queue.listDependentTasks(required)["tasks"]) == dependents

    finish(queue, required)
    for task_id in dependents:
        wait_for_status(queue, task_id, state_is("pending"), what="every dependent to be scheduled")


def test_a_task_with_many_dependents_schedules_them_all(queue: taskcluster.Queue, tq: str) -> None:
    required = create(queue, tq)
    dependents = [create(queue, tq, dependencies=[required]) for _ in range(200)]
    assert queue.pendingTasks(tq)["pendingTasks"] == 1
    finish(queue, required)

    def all_pending() -> bool:
        return queue.pendingTasks(tq)["pendingTasks"] == len(dependents)

    wait_for(all_pending, what="all 200 dependents to be scheduled")
    statuses = queue.statuses({"taskIds": dependents})["statuses"]
    assert len(statuses) == 200
    assert all(s["status"]["state"] == "pending" for s in statuses)


def test_a_task_with_two_dependencies_waits_for_both(queue: taskcluster.Queue, tq: str) -> None:
    first = create(queue, tq)
    second = create(queue, tq)
    needs_both = create(queue, tq, dependencies=[first, second])
    needs_first = create(queue, tq, dependencies=[first])
    finish(queue, first)
    wait_for_status(queue, needs_first, state_is("pending"), what="the task needing only the first")
    assert state(queue, needs_both) == "unscheduled"
    finish(queue, second)
    wait_for_status(queue, needs_both, state_is("pending"), what="the task needing both")


@pytest.mark.parametrize("how", ["failed", "malformed-payload", "cancel"])
def test_unsuccessful_dependency_satisfies_only_all_resolved(
    queue: taskcluster.Queue, tq: str, how: str
) -> None:
    required = create(queue, tq)
    all_completed = create(queue, tq, dependencies=[required])
    all_resolved = create(queue, tq, dependencies=[required], requires="all-resolved")
    if how == "cancel":
        queue.cancelTask(required)
    else:
        finish(queue, required, how)
    wait_for_status(queue, all_resolved, state_is("pending"), what="the all-resolved dependent")
    # The resolver has handled the resolution (it scheduled the other dependent): this one stays.
    assert state(queue, all_completed) == "unscheduled"


def test_dependencies_already_resolved_when_the_task_is_created(queue: taskcluster.Queue, tq: str) -> None:
    completed = create(queue, tq)
    finish(queue, completed)
    failed = create(queue, tq)
    finish(queue, failed, "failed")
    after_completed = queue.createTask(slug(), definition(tq, dependencies=[completed]))
    assert after_completed["status"]["state"] == "pending"
    after_failed = queue.createTask(slug(), definition(tq, dependencies=[failed], requires="all-resolved"))
    assert after_failed["status"]["state"] == "pending"
    blocked = queue.createTask(slug(), definition(tq, dependencies=[failed]))
    assert blocked["status"]["state"] == "unscheduled"


def test_dependency_must_outlive_the_dependents_deadline(queue: taskcluster.Queue, tq: str) -> None:
    start = now()
    short_lived = create(
        queue,
        tq,
        deadline=iso(start + timedelta(minutes=30)),
        expires=iso(start + timedelta(minutes=40)),
    )
    task_id = slug()
    with refused(400, "InputError"):
        queue.createTask(task_id, definition(tq, dependencies=[short_lived]))
    with refused(404, "ResourceNotFound"):
        queue.status(task_id)


def test_too_many_dependencies_is_400(queue: taskcluster.Queue, tq: str) -> None:
    task_id = slug()
    with refused(400, "InputValidationError"):
        queue.createTask(task_id, definition(tq, dependencies=[slug() for _ in range(10001)]))
    with refused(400, "InputValidationError"):
        required = create(queue, tq)
        queue.createTask(task_id, definition(tq, dependencies=[required, required]))
    with refused(404, "ResourceNotFound"):
        queue.status(task_id)


def test_self_dependency_waits_for_schedule_task(queue: taskcluster.Queue, tq: str) -> None:
    task_id = slug()
    created = queue.createTask(task_id, definition(tq, dependencies=[task_id]))
    assert created["status"]["state"] == "unscheduled"
    assert queue.pendingTasks(tq)["pendingTasks"] == 0
    scheduled = queue.scheduleTask(task_id)
    status = scheduled["status"]
    assert status["state"] == "pending"
    assert [(r["runId"], r["reasonCreated"]) for r in status["runs"]] == [(0, "scheduled")]
    assert queue.scheduleTask(task_id) == scheduled
    assert queue.pendingTasks(tq)["pendingTasks"] == 1
    finish(queue, task_id)
    done = queue.status(task_id)
    assert queue.scheduleTask(task_id) == done
    with refused(404, "ResourceNotFound"):
        queue.scheduleTask(slug())


def test_rerun_unscheduled_pending_and_running_tasks(queue: taskcluster.Queue, tq: str) -> None:
    unscheduled = slug()
    queue.createTask(unscheduled, definition(tq, dependencies=[unscheduled]))
    status = queue.rerunTask(unscheduled)["status"]
    assert [(r["runId"], r["state"], r["reasonCreated"]) for r in status["runs"]] == [(0, "pending", "rerun")]

    pending = create(queue, tq)
    before = queue.status(pending)
    assert queue.rerunTask(pending) == before

    running = create(queue, tq)
    queue.claimTask(running, "0", WORKER)
    before = queue.status(running)
    assert queue.rerunTask(running) == before
    with refused(404, "ResourceNotFound"):
        queue.rerunTask(slug())


@pytest.mark.parametrize("how", ["completed", "failed", "internal-error", "cancel"])
def test_rerun_resolved_task_adds_a_pending_run(queue: taskcluster.Queue, tq: str, how: str) -> None:
    task_id = create(queue, tq, retries=2)
    if how == "cancel":
        queue.cancelTask(task_id)
    else:
        finish(queue, task_id, how)
    rerun = queue.rerunTask(task_id)
    status = rerun["status"]
    assert status["state"] == "pending"
    assert [(r["runId"], r["reasonCreated"]) for r in status["runs"]][-1] == (1, "rerun")
    assert status["retriesLeft"] == 2
    assert queue.rerunTask(task_id) == rerun  # pending now: nothing changes
    claims = queue.claimWork(tq, {**WORKER, "tasks": 1})["tasks"]
    assert [(c["status"]["taskId"], c["runId"]) for c in claims] == [(task_id, 1)]
    assert queue.reportCompleted(task_id, "1")["status"]["state"] == "completed"


def test_tasks_past_their_deadline_are_resolved_deadline_exceeded(queue: taskcluster.Queue, tq: str) -> None:
    start = now()
    soon = {"created": iso(start), "deadline": iso(start + timedelta(seconds=3))}
    pending = create(queue, tq, **soon)
    unscheduled = slug()
    queue.createTask(unscheduled, definition(tq, dependencies=[unscheduled], **soon))
    running = create(queue, tq, **soon)
    queue.claimTask(running, "0", WORKER)
    completed = create(queue, tq, **soon)
    finish(queue, completed)
    completed_status = queue.status(completed)
    waits_for_pending = create(queue, tq, dependencies=[pending], requires="all-resolved")

    status = wait_for_status(queue, pending, state_is("exception"), what="the deadline to pass")
    assert [(r["reasonCreated"], r["reasonResolved"]) for r in status["runs"]] == [
        ("scheduled", "deadline-exceeded")
    ]
    status = wait_for_status(queue, unscheduled, state_is("exception"), what="the deadline to pass")
    assert [(r["reasonCreated"], r["reasonResolved"]) for r in status["runs"]] == [
        ("exception", "deadline-exceeded")
    ]
    status = wait_for_status(queue, running, state_is("exception"), what="the deadline to pass")
    assert [(r["reasonCreated"], r["reasonResolved"]) for r in status["runs"]] == [
        ("scheduled", "deadline-exceeded")
    ]
    assert queue.status(completed) == completed_status
    # The resolution counts for dependencies like any other exception.
    wait_for_status(queue, waits_for_pending, state_is("pending"), what="the all-resolved dependent")

    # Past its deadline a task can no longer be changed, and its worker must stop.
    for task_id in (pending, unscheduled):
        with refused(409, "RequestConflict"):
            queue.cancelTask(task_id)
        with refused(409, "RequestConflict"):
            queue.rerunTask(task_id)
        with refused(409, "RequestConflict"):
            queue.scheduleTask(task_id)
        with refused(409, "RequestConflict"):
            queue.changeTaskPriority(task_id, {"newPriority": "high"})
    with refused(409, "RequestConflict"):
        queue.reclaimTask(running, "0")
    with refused(409, "RequestConflict"):
        queue.reportCompleted(running, "0")
    assert queue.pendingTasks(tq)["pendingTasks"] == 1  # only waits_for_pending


def test_schedule_task_ignores_dependencies_and_they_add_no_second_run(
    queue: taskcluster.Queue, tq: str
) -> None:
    required = create(queue, tq)
    dependent = create(queue, tq, dependencies=[required])
    assert queue.scheduleTask(dependent)["status"]["state"] == "pending"
    sentinel = create(queue, tq, dependencies=[required])
    claims = queue.claimWork(tq, {**WORKER, "tasks": 2})["tasks"]
    assert sorted(c["status"]["taskId"] for c in claims) == sorted([required, dependent])
    queue.reportCompleted(required, "0")
    wait_for_status(queue, sentinel, state_is("pending"), what="the dependency to be resolved")
    status = queue.status(dependent)["status"]
    assert [(r["runId"], r["state"]) for r in status["runs"]] == [(0, "running")]


def test_rerun_stops_at_50_runs(queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq, retries=5)
    queue.cancelTask(task_id)
    for run_id in range(1, 50):
        status = queue.rerunTask(task_id)["status"]
        assert len(status["runs"]) == run_id + 1
        # A rerun leaves room for its retries within the 50 runs a task may have.
        assert status["retriesLeft"] == min(5, 49 - run_id)
        queue.cancelTask(task_id)
    with refused(409, "RequestConflict"):
        queue.rerunTask(task_id)
    status = queue.status(task_id)["status"]
    assert len(status["runs"]) == 50
    assert status["state"] == "exception"
