"""Resolving runs: reportCompleted / reportFailed / reportException, repeats, conflicts and retries
(docs/protocol.md, The run state machine)."""

from __future__ import annotations

import pytest
import taskcluster

from tests.e2e.conftest import Server
from tests.e2e.helpers import claim_one, create, refused, slug


def test_report_completed_three_times_is_200_each_time(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create(queue, tq)
    claim = claim_one(queue, tq)
    worker = server.client(claim["credentials"])
    first = queue.reportCompleted(task_id, "0")
    assert first["status"]["state"] == "completed"
    assert worker.reportCompleted(task_id, "0") == first
    assert worker.reportCompleted(task_id, "0") == first
    assert queue.status(task_id) == first
    run = first["status"]["runs"][0]
    assert (run["state"], run["reasonResolved"]) == ("completed", "completed")
    assert "resolved" in run
    assert "takenUntil" in run  # kept after the resolution


def test_report_failed_three_times_is_200_each_time(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create(queue, tq)
    claim = claim_one(queue, tq)
    worker = server.client(claim["credentials"])
    first = queue.reportFailed(task_id, "0")
    assert first["status"]["state"] == "failed"
    assert first["status"]["runs"][0]["reasonResolved"] == "failed"
    assert worker.reportFailed(task_id, "0") == first
    assert worker.reportFailed(task_id, "0") == first
    # A different resolution afterwards is a conflict; the first one stands.
    with refused(409, "RequestConflict"):
        worker.reportCompleted(task_id, "0")
    with refused(409, "RequestConflict"):
        worker.reportException(task_id, "0", {"reason": "internal-error"})
    assert queue.status(task_id) == first


@pytest.mark.parametrize("reason", ["malformed-payload", "resource-unavailable", "internal-error"])
def test_non_retrying_exceptions_are_final_and_idempotent(
    queue: taskcluster.Queue, tq: str, reason: str
) -> None:
    task_id = create(queue, tq)
    claim_one(queue, tq)
    first = queue.reportException(task_id, "0", {"reason": reason})
    status = first["status"]
    assert status["state"] == "exception"
    assert [(r["state"], r.get("reasonResolved")) for r in status["runs"]] == [("exception", reason)]
    assert status["retriesLeft"] == 5
    assert queue.reportException(task_id, "0", {"reason": reason}) == first
    other = "internal-error" if reason != "internal-error" else "malformed-payload"
    with refused(409, "RequestConflict"):
        queue.reportException(task_id, "0", {"reason": other})
    with refused(409, "RequestConflict"):
        queue.reportCompleted(task_id, "0")
    assert queue.status(task_id)["status"]["runs"][0]["reasonResolved"] == reason


def test_reasons_a_worker_may_not_give_are_400(queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq)
    claim_one(queue, tq)
    for reason in ("superseded", "claim-expired", "deadline-exceeded", "canceled", "nonsense"):
        with refused(400, "InputValidationError"):
            queue.reportException(task_id, "0", {"reason": reason})
    assert queue.status(task_id)["status"]["state"] == "running"


def test_worker_shutdown_retries_while_retries_last(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create(queue, tq, retries=1)
    claim = claim_one(queue, tq)
    worker = server.client(claim["credentials"])
    first = worker.reportException(task_id, "0", {"reason": "worker-shutdown"})["status"]
    assert first["state"] == "pending"
    assert first["retriesLeft"] == 0
    assert [(r["runId"], r["state"], r["reasonCreated"], r.get("reasonResolved")) for r in first["runs"]] == [
        (0, "exception", "scheduled", "worker-shutdown"),
        (1, "pending", "retry", None),
    ]
    # Repeating the report is fine and changes nothing.
    assert worker.reportException(task_id, "0", {"reason": "worker-shutdown"})["status"] == first
    # The old run can no longer be resolved otherwise.
    with refused(409, "RequestConflict"):
        worker.reportCompleted(task_id, "0")
    with refused(409, "RequestConflict"):
        worker.reclaimTask(task_id, "0")

    retry = claim_one(queue, tq)
    assert (retry["status"]["taskId"], retry["runId"]) == (task_id, 1)
    last = server.client(retry["credentials"]).reportException(task_id, "1", {"reason": "worker-shutdown"})
    status = last["status"]
    assert status["state"] == "exception"
    assert len(status["runs"]) == 2, "no retries were left: no run 2"
    assert status["runs"][1]["reasonResolved"] == "worker-shutdown"
    assert queue.pendingTasks(tq)["pendingTasks"] == 0


def test_worker_shutdown_without_retries_is_final(queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq, retries=0)
    claim_one(queue, tq)
    status = queue.reportException(task_id, "0", {"reason": "worker-shutdown"})["status"]
    assert status["state"] == "exception"
    assert len(status["runs"]) == 1


def test_intermittent_task_is_a_task_retry(queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq, retries=1)
    claim_one(queue, tq)
    status = queue.reportException(task_id, "0", {"reason": "intermittent-task"})["status"]
    assert [(r["state"], r["reasonCreated"]) for r in status["runs"]] == [
        ("exception", "scheduled"),
        ("pending", "task-retry"),
    ]
    assert claim_one(queue, tq)["runId"] == 1
    status = queue.reportException(task_id, "1", {"reason": "intermittent-task"})["status"]
    assert status["state"] == "exception"
    assert len(status["runs"]) == 2


def test_retry_run_can_complete(queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq)
    claim_one(queue, tq)
    queue.reportException(task_id, "0", {"reason": "worker-shutdown"})
    assert claim_one(queue, tq)["runId"] == 1
    status = queue.reportCompleted(task_id, "1")["status"]
    assert status["state"] == "completed"
    assert status["retriesLeft"] == 4
    assert [r["state"] for r in status["runs"]] == ["exception", "completed"]


def test_reports_on_a_pending_run_conflict_and_on_a_missing_run_are_404(
    queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create(queue, tq)
    with refused(409, "RequestConflict"):
        queue.reportCompleted(task_id, "0")
    with refused(409, "RequestConflict"):
        queue.reportFailed(task_id, "0")
    with refused(409, "RequestConflict"):
        queue.reportException(task_id, "0", {"reason": "internal-error"})
    with refused(404, "ResourceNotFound"):
        queue.reportCompleted(task_id, "1")
    with refused(404, "ResourceNotFound"):
        queue.reportCompleted(slug(), "0")
    with refused(400, "InvalidRequestArguments"):
        queue.reportCompleted(task_id, "-1")
    assert queue.status(task_id)["status"]["state"] == "pending"


def test_the_first_protocols_spellings_of_reasons_are_accepted_as_todays(
    queue: taskcluster.Queue, tq: str
) -> None:
    """The worker document: "If the error is due to some temporarily missing resource the reason
    resources-unavailable can also be used"; the first queue draft resolves a run whose claim ran out "as
    exception due to claim-timeout". Both spellings are taken as today's, which answers give."""
    task_id = create(queue, tq)
    claim_one(queue, tq)
    first = queue.reportException(task_id, "0", {"reason": "resources-unavailable"})
    status = first["status"]
    assert [(r["state"], r.get("reasonResolved")) for r in status["runs"]] == [
        ("exception", "resource-unavailable")
    ]
    # Either spelling repeats the same report.
    assert queue.reportException(task_id, "0", {"reason": "resources-unavailable"}) == first
    assert queue.reportException(task_id, "0", {"reason": "resource-unavailable"}) == first

    task_id = create(queue, tq, retries=1)
    claim_one(queue, tq)
    status = queue.reportException(task_id, "0", {"reason": "claim-timeout"})["status"]
    assert [(r["state"], r["reasonCreated"], r.get("reasonResolved")) for r in status["runs"]] == [
        ("exception", "scheduled", "claim-expired"),
        ("pending", "retry", None),
    ]
    assert queue.reportException(task_id, "0", {"reason": "claim-timeout"})["status"] == status
