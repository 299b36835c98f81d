"""createTask through a real server (docs/protocol.md, Task definitions)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import taskcluster

from tests.e2e.conftest import Server
from tests.e2e.helpers import claim_one, create, definition, iso, now, parse, refused, signed, slug

DEFAULTS = {
    "schedulerId": "-",
    "projectId": "none",
    "dependencies": [],
    "requires": "all-completed",
    "routes": [],
    "priority": "lowest",
    "retries": 5,
    "scopes": [],
    "tags": {},
    "extra": {},
}


def plus_one_year(text: str) -> str:
    moment = parse(text)
    return iso(moment.replace(year=moment.year + 1))


def test_create_task_makes_run_0_pending(queue: taskcluster.Queue, tq: str) -> None:
    task_id = slug()
    body = definition(tq, tags={"purpose": "e2e"})
    created = queue.createTask(task_id, body)
    status = created["status"]
    provisioner_id, worker_type = tq.split("/")
    assert status["taskId"] == task_id
    assert status["state"] == "pending"
    assert (status["taskQueueId"], status["provisionerId"], status["workerType"]) == (
        tq,
        provisioner_id,
        worker_type,
    )
    assert status["schedulerId"] == "-"
    assert status["projectId"] == "none"
    assert status["taskGroupId"] == task_id
    assert status["priority"] == "lowest"
    assert status["retriesLeft"] == 5
    assert status["deadline"] == body["deadline"]
    assert status["expires"] == plus_one_year(body["deadline"])
    assert len(status["runs"]) == 1
    run = status["runs"][0]
    assert {k: run[k] for k in ("runId", "state", "reasonCreated")} == {
        "runId": 0,
        "state": "pending",
        "reasonCreated": "scheduled",
    }
    assert "scheduled" in run
    assert queue.status(task_id) == created


def test_task_answers_the_definition_with_defaults(queue: taskcluster.Queue, tq: str) -> None:
    task_id = slug()
    body = definition(tq, tags={"purpose": "e2e"}, extra={"k": [1, 2]})
    queue.createTask(task_id, body)
    provisioner_id, worker_type = tq.split("/")
    expected = {
        **DEFAULTS,
        **body,
        "provisionerId": provisioner_id,
        "workerType": worker_type,
        "taskGroupId": task_id,
        "expires": plus_one_year(body["deadline"]),
    }
    assert queue.task(task_id) == expected


def test_same_body_twice_is_idempotent_and_a_different_one_conflicts(
    queue: taskcluster.Queue, tq: str
) -> None:
    task_id = slug()
    body = definition(tq)
    first = queue.createTask(task_id, body)
    again = queue.createTask(task_id, body)
    assert first == again
    assert len(again["status"]["runs"]) == 1
    with refused(409, "RequestConflict"):
        queue.createTask(task_id, {**body, "taskQueueId": tq + "-other"})
    with refused(409, "RequestConflict"):
        queue.createTask(task_id, {**body, "payload": {"different": True}})
    assert queue.task(task_id)["taskQueueId"] == tq


def test_dates_with_extra_fraction_digits_stay_idempotent(queue: taskcluster.Queue, tq: str) -> None:
    start = now()
    micro = start.replace(microsecond=123456)
    body = definition(
        tq,
        created=micro.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        deadline=(micro + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        expires=(micro + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    )
    task_id = slug()
    first = queue.createTask(task_id, body)
    assert queue.createTask(task_id, body) == first
    stored = queue.task(task_id)
    assert stored["created"] == iso(micro.replace(microsecond=123000))
    assert stored["deadline"] == iso((micro + timedelta(hours=1)).replace(microsecond=123000))
    assert stored["expires"] == iso((micro + timedelta(days=2)).replace(microsecond=123000))
    with refused(409, "RequestConflict"):
        queue.createTask(task_id, {**body, "retries": 2})


def test_bad_task_id_is_invalid_request_arguments(queue: taskcluster.Queue, tq: str) -> None:
    with refused(400, "InvalidRequestArguments"):
        queue.createTask("not-a-slugid", definition(tq))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"priority": "normal"}, "priority normal is no longer a priority"),
        ({"metadata": None}, "metadata is required"),
        ({"payload": "a string"}, "payload must be an object"),
        ({"retries": 50}, "retries above 49"),
        ({"unknownField": 1}, "no additional properties"),
        ({"requires": "some-completed"}, "requires is an enum"),
        ({"taskQueueId": "no-slash"}, "taskQueueId pattern"),
        (
            {
                "metadata": {
                    "name": "n",
                    "description": "d",
                    "owner": "o@example.com",
                    "source": "ftp://example.com/x",
                }
            },
            "metadata.source must be http(s)://, ssh:// or git@",
        ),
    ],
)
def test_schema_violations_are_input_validation_errors(
    queue: taskcluster.Queue, tq: str, change: dict[str, object], why: str
) -> None:
    body = definition(tq, **change)
    if body.get("metadata") is None:
        del body["metadata"]
    task_id = slug()
    with refused(400, "InputValidationError"):
        queue.createTask(task_id, body)
    with refused(404, "ResourceNotFound"):
        queue.status(task_id)


@pytest.mark.parametrize(
    ("dates", "why"),
    [
        ({"created": timedelta(minutes=10), "deadline": timedelta(minutes=5)}, "created after deadline"),
        ({"deadline": timedelta(hours=2), "expires": timedelta(hours=1)}, "deadline after expires"),
        ({"deadline": timedelta(days=6)}, "deadline more than 5 days out"),
        ({"created": timedelta(minutes=-20)}, "created 20 minutes ago"),
        ({"created": timedelta(minutes=-10), "deadline": timedelta(minutes=-5)}, "deadline in the past"),
    ],
)
def test_semantic_date_errors_are_input_errors(
    queue: taskcluster.Queue, tq: str, dates: dict[str, timedelta], why: str
) -> None:
    start = now()
    body = definition(tq, **{name: iso(start + offset) for name, offset in dates.items()})
    task_id = slug()
    with refused(400, "InputError"):
        queue.createTask(task_id, body)
    with refused(404, "ResourceNotFound"):
        queue.status(task_id)


def test_deadline_just_under_five_days_is_accepted(queue: taskcluster.Queue, tq: str) -> None:
    task_id = create(queue, tq, deadline=iso(now() + timedelta(days=5)))
    assert queue.status(task_id)["status"]["state"] == "pending"


def test_task_scope_ending_in_double_star_is_an_input_error(queue: taskcluster.Queue, tq: str) -> None:
    with refused(400, "InputError"):
        queue.createTask(slug(), definition(tq, scopes=["abc:**"]))
    task_id = create(queue, tq, scopes=["abc:*", "abc:**x"])
    assert queue.task(task_id)["scopes"] == ["abc:*", "abc:**x"]


def test_unknown_dependency_is_an_input_error_and_stores_nothing(queue: taskcluster.Queue, tq: str) -> None:
    task_id = slug()
    with refused(400, "InputError"):
        queue.createTask(task_id, definition(tq, dependencies=[slug()]))
    with refused(404, "ResourceNotFound"):
        queue.task(task_id)
    with refused(404, "ResourceNotFound"):
        queue.status(task_id)


@pytest.mark.parametrize("source", ["ssh://git@example.com/repo", "git@example.com:repo.git"])
def test_ssh_and_git_sources_are_accepted(queue: taskcluster.Queue, tq: str, source: str) -> None:
    metadata = {"name": "n", "description": "d", "owner": "o@example.com", "source": source}
    task_id = create(queue, tq, metadata=metadata)
    assert queue.task(task_id)["metadata"]["source"] == source


@pytest.mark.parametrize("priority", ["highest", "very-high", "high", "medium", "low", "very-low", "lowest"])
def test_every_priority_is_accepted(queue: taskcluster.Queue, tq: str, priority: str) -> None:
    task_id = create(queue, tq, priority=priority)
    assert queue.status(task_id)["status"]["priority"] == priority


def test_provisioner_id_and_worker_type_forms(queue: taskcluster.Queue, tq: str) -> None:
    provisioner_id, worker_type = tq.split("/")
    old_form = definition(tq)
    del old_form["taskQueueId"]
    old_form.update(provisionerId=provisioner_id, workerType=worker_type)
    old_id = slug()
    assert queue.createTask(old_id, old_form)["status"]["taskQueueId"] == tq

    both_id = slug()
    queue.createTask(both_id, definition(tq, provisionerId=provisioner_id, workerType=worker_type))

    for task_id in (old_id, both_id):
        stored = queue.task(task_id)
        assert (stored["taskQueueId"], stored["provisionerId"], stored["workerType"]) == (
            tq,
            provisioner_id,
            worker_type,
        )

    with refused(400, "InputError"):
        queue.createTask(slug(), definition(tq, provisionerId=provisioner_id, workerType="other-type"))
    with refused(400, "InputError"):
        queue.createTask(slug(), definition(tq, provisionerId="other-prov"))
    no_queue = definition(tq)
    del no_queue["taskQueueId"]
    with refused(400, "InputError"):
        queue.createTask(slug(), no_queue)
    with refused(400, "InputError"):
        queue.createTask(slug(), {**no_queue, "provisionerId": provisioner_id})


def test_error_body_has_code_message_and_request_info(queue: taskcluster.Queue, tq: str) -> None:
    task_id = slug()
    body = definition(tq, priority="normal")
    with refused(400, "InputValidationError") as info:
        queue.createTask(task_id, body)
    error = info.value.body
    assert set(error) >= {"code", "message", "requestInfo"}
    assert isinstance(error["message"], str) and error["message"]
    request_info = error["requestInfo"]
    assert request_info["method"] == "createTask"
    assert request_info["params"] == {"taskId": task_id}
    assert isinstance(request_info["time"], str)
    parse(request_info["time"])
    # The payload is echoed with the defaults filled in, as TaskCluster does.
    payload = request_info["payload"]
    assert payload["priority"] == "normal"
    assert payload["schedulerId"] == "-"
    assert payload["projectId"] == "none"
    assert payload["retries"] == 5
    assert payload["taskGroupId"] == task_id

    first = create(queue, tq)
    with refused(409, "RequestConflict") as info:
        queue.createTask(first, definition(tq, retries=1))
    assert info.value.body["requestInfo"]["method"] == "createTask"

    with refused(404, "ResourceNotFound") as info:
        queue.status(slug())
    assert set(info.value.body) >= {"code", "message", "requestInfo"}
    assert info.value.body["requestInfo"]["method"] == "status"


def test_body_that_is_not_json_is_malformed_payload(server: Server, tq: str) -> None:
    task_id = slug()
    url = f"{server.api}/task/{task_id}"
    reply = signed("PUT", url, None, server.credentials, raw='{"taskQueueId": ')
    assert reply.status_code == 400, reply.text
    assert reply.json()["code"] == "MalformedPayload"
    assert signed("GET", f"{url}/status", None, server.credentials).status_code == 404


def test_same_body_again_after_the_task_ran_answers_its_current_status(
    queue: taskcluster.Queue, tq: str
) -> None:
    task_id = slug()
    body = definition(tq)
    queue.createTask(task_id, body)
    claim_one(queue, tq)
    done = queue.reportCompleted(task_id, "0")
    assert queue.createTask(task_id, body) == done
    assert queue.pendingTasks(tq)["pendingTasks"] == 0


def at_once(count: int, call: Callable[[int], Any]) -> list[Any]:
    """Run `call(0) ... call(count - 1)` in threads released together; answer results or exceptions."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = call(index)
        except BaseException as exc:
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


ROUNDS = 5  # the window for a race is small: try a few times
CALLERS = 8


def test_identical_create_task_calls_at_once_all_succeed(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    clients = [server.client() for _ in range(CALLERS)]
    # The group exists already: this is about the task itself being created twice at once.
    group = create(queue, tq)
    for _ in range(ROUNDS):
        task_id = slug()
        body = definition(tq, taskGroupId=group)
        results = at_once(CALLERS, lambda i, task_id=task_id, body=body: clients[i].createTask(task_id, body))
        errors = [r for r in results if isinstance(r, BaseException)]
        # TaskCluster: createTask is idempotent, also for identical calls that race each other.
        assert not errors, [getattr(e, "body", e) for e in errors]
        assert all(r["status"]["taskId"] == task_id for r in results)
        assert len(queue.status(task_id)["status"]["runs"]) == 1
    assert queue.pendingTasks(tq)["pendingTasks"] == 1 + ROUNDS


def test_tasks_created_at_once_into_a_new_group_all_join_it(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    clients = [server.client() for _ in range(CALLERS)]
    for _ in range(ROUNDS):
        group = slug()
        task_ids = [slug() for _ in range(CALLERS)]
        results = at_once(
            CALLERS,
            lambda i, group=group, task_ids=task_ids: clients[i].createTask(
                task_ids[i], definition(tq, taskGroupId=group)
            ),
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        # TaskCluster: the first task of a group creates it, and the others join it (an upsert).
        assert not errors, [getattr(e, "body", e) for e in errors]
        listed = queue.listTaskGroup(group)["tasks"]
        assert sorted(t["status"]["taskId"] for t in listed) == sorted(task_ids)
