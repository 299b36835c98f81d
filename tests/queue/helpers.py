"""Building task definitions for tests, and tasks made, completed and read through the queue."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from taskyard.model import dates, slugid
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, service, tasks
from taskyard.queue.service import Queue
from tests.conftest import FakeClock

TQ = "test-prov/test-worker"
WORKER = ("wg", "w1")


def definition(now: int, **overrides: Any) -> dict[str, Any]:
    """A minimal valid task definition, created `now`, due in an hour."""
    body: dict[str, Any] = {
        "taskQueueId": "test-prov/test-worker",
        "created": dates.to_iso(now),
        "deadline": dates.to_iso(now + dates.HOUR),
        "payload": {},
        "metadata": {
            "name": "t",
            "description": "a test task",
            "owner": "dev@example.com",
            "source": "https://example.com/t",
        },
    }
    body.update(overrides)
    return body


def new_id() -> str:
    return slugid.nice()


async def create(queue: Queue, clock: FakeClock, **overrides: Any) -> str:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now, **overrides), guard=ALLOW_ALL)
    return task_id


async def insert_broken(
    queue: Queue,
    clock: FakeClock,
    *,
    runs: Sequence[dict[str, Any]] = (),
    requires: Sequence[str] = (),
    **cols: Any,
) -> str:
    """A task row no transition can handle, with dependency edges on `requires`."""
    task_id = new_id()
    rec = tasks.new_record(task_id, tasks.define(queue, task_id, definition(clock.now)), 5)
    rec = replace(rec, definition={"broken": True}, runs=list(runs), **cols)
    async with queue.storage.transaction() as tx:
        await service.insert_record_tx(tx, rec)
        edges = [(r, task_id, "all-completed", False, rec.expires) for r in requires]
        if edges:
            await tx.executemany("insert_dependency", edges)
    return task_id


async def state(queue: Queue, task_id: str) -> str:
    return str((await tasks.status(queue, task_id))["status"]["state"])


async def complete(queue: Queue, task_ids: list[str]) -> None:
    found = await claims.claim_pending(queue, TQ, WORKER, len(task_ids))
    assert sorted(c["status"]["taskId"] for c in found) == sorted(task_ids)
    for task_id in task_ids:
        await claims.report(queue, task_id, 0, "completed", "completed")


async def waiting_resolutions(queue: Queue) -> list[str]:
    async with queue.storage.reader() as session:
        return [r["task_id"] for r in await session.fetch("waiting_resolutions", 100)]
