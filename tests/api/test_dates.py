"""Dates through the API: what a client may send, and rows stored before that was enforced.

createTask once took `"expires": "9999-12-31T23:59:59.999Z"`; the task's group then expired in
the year 10000, which could not be printed: the group's routes answered 500 and the dependency
resolver failed on the task's resolution forever, so no dependent task anywhere was scheduled.
"""

from __future__ import annotations

from typing import Any

import pytest

from taskyard.model import dates, slugid
from taskyard.queue import resolvers, service, tasks
from tests.api.conftest import AUTH_PREFIX, TASK_QUEUE_ID, Api, assert_error, task_definition
from tests.conftest import Published

QUEUE = TASK_QUEUE_ID.replace("/", "%2F")
WORKER = {"workerGroup": "wg", "workerId": "w1"}
WORKER_PATH = "/provisioners/api-prov/worker-types/api-wt/workers/wg/w1"
FAR = "9999-12-31T23:59:59.999Z"
RULE = "from 1970-01-01T00:00:00.000Z to 9998-12-31T23:59:59.999Z"


async def complete(api: Api, task_id: str) -> None:
    claimed = await api.call("POST", f"/claim-work/{QUEUE}", {**WORKER, "tasks": 1})
    assert [c["status"]["taskId"] for c in claimed.json()["tasks"]] == [task_id], claimed.text
    assert (await api.call("POST", f"/task/{task_id}/runs/0/completed")).status_code == 200


async def state(api: Api, task_id: str) -> str:
    response = await api.call("GET", f"/task/{task_id}/status")
    assert response.status_code == 200, response.text
    return str(response.json()["status"]["state"])


async def b_then_c(api: Api) -> str:
    """Create B and C depending on B, complete B, resolve: answer C's state."""
    b, _ = await api.create_task()
    c, _ = await api.create_task(dependencies=[b])
    assert await state(api, c) == "unscheduled"
    await complete(api, b)
    while await resolvers.resolve_dependencies(api.queue):
        pass
    return await state(api, c)


async def test_a_task_expiring_in_the_year_9999_is_refused(api: Api) -> None:
    a = slugid.nice()
    refused = await api.call("PUT", f"/task/{a}", task_definition(api.clock, expires=FAR))
    assert_error(refused, 400, "InputValidationError", names=["body.expires", RULE])
    assert await b_then_c(api) == "pending"


async def insert_unchecked(api: Api, expires: str = FAR) -> str:
    """A task as createTask stored it before the range was enforced: its group expires an hour
    after it, in the year 10000. Written straight through storage."""
    task_id = slugid.nice()
    definition = {**tasks.define(api.queue, task_id, task_definition(api.clock)), "expires": expires}
    rec = tasks.new_record(task_id, definition, 5)
    async with api.queue.storage.transaction() as tx:
        expires = rec.expires + dates.HOUR
        await tx.fetchrow(
            "join_group",
            task_group_id=task_id,
            scheduler_id="-",
            expires=expires,
            now=api.clock(),
            task_id=task_id,
            needed=expires,
        )
        await service.insert_record_tx(tx, rec)
    return task_id


async def test_a_stored_group_past_the_year_9999_still_answers(api: Api) -> None:
    a = await insert_unchecked(api)
    group = await api.call("GET", f"/task-group/{a}")
    assert group.status_code == 200, group.text
    assert group.json()["expires"] == FAR  # the last instant that can be printed
    listed = await api.call("GET", f"/task-group/{a}/list")
    assert listed.status_code == 200, listed.text
    assert [t["task"]["expires"] for t in listed.json()["tasks"]] == [FAR]
    assert (await api.call("GET", f"/task/{a}")).json()["expires"] == FAR
    assert (await api.call("GET", f"/task/{a}/status")).json()["status"]["expires"] == FAR
    priority = await api.call("POST", f"/task-group/{a}/priority", {"newPriority": "high"})
    assert priority.status_code == 200, priority.text
    assert priority.json()["tasksAffected"] == 1
    sealed = await api.call("POST", f"/task-group/{a}/seal")
    assert sealed.status_code == 200, sealed.text
    assert sealed.json()["expires"] == FAR and "sealed" in sealed.json()


async def test_a_stored_group_past_the_year_9999_does_not_stop_dependency_resolution(
    api: Api, published: Published
) -> None:
    a = await insert_unchecked(api)
    assert (await api.call("POST", f"/task/{a}/cancel")).status_code == 200
    assert await b_then_c(api) == "pending"
    resolved = [m for m in await published.collect() if m.exchange == "task-group-resolved"]
    assert a in [m.body["taskGroupId"] for m in resolved]
    assert [m.body["expires"] for m in resolved if m.body["taskGroupId"] == a] == [FAR]


# Every date a client sends, refused out of range with a 400 naming the field -------------------


async def create_task_with(api: Api, field: str, value: str) -> Any:
    return await api.call("PUT", f"/task/{slugid.nice()}", task_definition(api.clock, **{field: value}))


async def create_artifact_with(api: Api, field: str, value: str) -> Any:
    task_id, _ = await api.create_task()
    await api.call("POST", f"/claim-work/{QUEUE}", {**WORKER, "tasks": 1})
    body = {"storageType": "reference", "url": "https://example.com/a", "contentType": "text/plain"}
    return await api.call("POST", f"/task/{task_id}/runs/0/artifacts/public%2Fa", {**body, field: value})


async def quarantine_with(api: Api, field: str, value: str) -> Any:
    return await api.call("PUT", WORKER_PATH, {field: value})


async def declare_with(api: Api, field: str, value: str) -> Any:
    return await api.call("PUT", "/provisioners/api-prov/worker-types/api-wt/wg/w1", {field: value})


async def create_client_with(api: Api, field: str, value: str) -> Any:
    body = {"description": "d", "expires": "2999-01-01T00:00:00.000Z", field: value}
    return await api.call("PUT", "/clients/far%2Fclient", body, prefix=AUTH_PREFIX)


async def update_client_with(api: Api, field: str, value: str) -> Any:
    body = {"description": "d", "expires": "2999-01-01T00:00:00.000Z"}
    created = await api.call("PUT", "/clients/far%2Fclient", body, prefix=AUTH_PREFIX)
    assert created.status_code == 200, created.text
    return await api.call("POST", "/clients/far%2Fclient", {**body, field: value}, prefix=AUTH_PREFIX)


SENDERS = [
    (create_task_with, "created"),
    (create_task_with, "deadline"),
    (create_task_with, "expires"),
    (create_artifact_with, "expires"),
    (quarantine_with, "quarantineUntil"),
    (declare_with, "expires"),
    (create_client_with, "expires"),
    (update_client_with, "expires"),
]


@pytest.mark.parametrize(("send", "field"), SENDERS, ids=[f"{s.__name__}-{f}" for s, f in SENDERS])
@pytest.mark.parametrize(
    "value",
    [
        FAR,
        "9999-12-31T23:00:00-05:00",  # the year 10000 in UTC
        "1969-12-31T23:59:59.999Z",
    ],
)
async def test_a_date_out_of_range_is_refused_naming_the_field(
    api: Api, send: Any, field: str, value: str
) -> None:
    assert_error(await send(api, field, value), 400, "InputValidationError", names=[f"body.{field}", RULE])
