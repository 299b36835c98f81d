"""Every route enforces its scope expression: temporary, task and authorizedScopes-narrowed credentials."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import taskcluster

from tests.e2e.conftest import Server
from tests.e2e.helpers import WORKER, claim_one, create, definition, now, refused, slug


def temporary(server: Server, *scopes: str) -> dict[str, Any]:
    """Temporary credentials issued by the root client, holding only `scopes`."""
    start = now() - timedelta(minutes=1)
    return taskcluster.createTemporaryCredentials(
        server.credentials["clientId"], server.access_token, start, start + timedelta(hours=1), list(scopes)
    )


def minimal_create_scopes(tq: str) -> list[str]:
    return ["queue:create-task:project:none", "queue:scheduler-id:-", f"queue:create-task:lowest:{tq}"]


def test_temporary_credentials_create_exactly_what_their_scopes_allow(server: Server, tq: str) -> None:
    limited = server.client(temporary(server, *minimal_create_scopes(tq)))
    limited.createTask(slug(), definition(tq))
    with refused(403, "InsufficientScopes") as refusal:
        limited.createTask(slug(), definition(tq, priority="high"))
    message = str(refusal.value)
    assert f"queue:create-task:high:{tq}" in message  # the missing scope is named
    assert "AnyOf" in message  # and the whole required expression shown
    with refused(403, "InsufficientScopes") as refusal:
        limited.createTask(slug(), definition(tq, routes=["index.a"]))
    assert "queue:route:index.a" in str(refusal.value)
    with refused(403, "InsufficientScopes"):
        limited.createTask(slug(), definition(tq, scopes=["secrets:get:x"]))


def test_a_higher_priority_scope_covers_lower_priorities(server: Server, tq: str) -> None:
    scopes = [*minimal_create_scopes(tq)[:2], f"queue:create-task:highest:{tq}"]
    limited = server.client(temporary(server, *scopes))
    limited.createTask(slug(), definition(tq, priority="high"))
    limited.createTask(slug(), definition(tq))


def test_task_credentials_act_on_their_own_run_only(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    mine, other = create(queue, tq), create(queue, tq)
    claim = claim_one(queue, tq)
    assert claim["status"]["taskId"] == mine
    worker = server.client(claim["credentials"])
    worker.reclaimTask(mine, "0")
    with refused(403, "InsufficientScopes"):
        worker.cancelTask(mine)
    with refused(403, "InsufficientScopes"):
        worker.createTask(slug(), definition(tq))
    with refused(403, "InsufficientScopes"):
        worker.reportCompleted(other, "0")
    worker.reportCompleted(mine, "0")


def test_task_credentials_carry_the_tasks_scopes(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq, scopes=[f"queue:get-task:{'A' * 22}", "queue:status:*"])
    claim = claim_one(queue, tq)
    worker = server.client(claim["credentials"])
    assert worker.status(task_id)["status"]["taskId"] == task_id  # via the task's queue:status:*
    with refused(403, "InsufficientScopes"):
        worker.task(task_id)


def test_authorized_scopes_narrow_the_callers_rights(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create(queue, tq)
    narrowed = taskcluster.Queue(
        {
            "rootUrl": server.root_url,
            "credentials": server.credentials,
            "authorizedScopes": [f"queue:status:{task_id}"],
            "maxRetries": 0,
        }
    )
    assert narrowed.status(task_id)["status"]["taskId"] == task_id
    with refused(403, "InsufficientScopes") as refusal:
        narrowed.task(task_id)
    assert "static/taskyard/root" in str(refusal.value)  # the real client is named
    nothing = taskcluster.Queue(
        {
            "rootUrl": server.root_url,
            "credentials": server.credentials,
            "authorizedScopes": [],
            "maxRetries": 0,
        }
    )
    with refused(403, "InsufficientScopes"):
        nothing.status(task_id)


def test_claim_work_needs_both_queue_and_worker_scopes(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    create(queue, tq)
    only_queue = server.client(temporary(server, f"queue:claim-work:{tq}"))
    with refused(403, "InsufficientScopes") as refusal:
        only_queue.claimWork(tq, {**WORKER, "tasks": 1})
    assert f"queue:worker-id:{WORKER['workerGroup']}/{WORKER['workerId']}" in str(refusal.value)
    both = server.client(
        temporary(server, f"queue:claim-work:{tq}", f"queue:worker-id:{WORKER['workerGroup']}/*")
    )
    assert len(both.claimWork(tq, {**WORKER, "tasks": 1})["tasks"]) == 1


def test_cancel_in_project_scope(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq, projectId="proj-a")
    other = create(queue, tq, projectId="proj-b")
    canceller = server.client(temporary(server, "queue:cancel-task-in-project:proj-a"))
    assert canceller.cancelTask(task_id)["status"]["state"] == "exception"
    with refused(403, "InsufficientScopes"):
        canceller.cancelTask(other)
