"""Tasks joining a group: how long the group lasts, and, on PostgreSQL, that tasks join a live
group side by side while sealing it waits for them (and they for the seal)."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from taskyard.model import dates
from taskyard.model.errors import RequestConflict, ResourceNotFound
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import groups, tasks
from taskyard.queue.service import Queue
from taskyard.storage import _queries
from taskyard.storage.counting import counting
from taskyard.storage.port import UniqueViolation
from tests.conftest import FakeClock
from tests.queue.helpers import definition, new_id

DAY = 24 * dates.HOUR


async def create_in(queue: Queue, clock: FakeClock, group: str, expires: int) -> str:
    task_id = new_id()
    body = definition(clock.now, taskGroupId=group, expires=dates.to_iso(expires))
    await tasks.create_task(queue, task_id, body, guard=ALLOW_ALL)
    return task_id


async def group_expires(queue: Queue, group: str) -> int:
    return dates.parse_iso((await groups.get_task_group(queue, group))["expires"])


async def test_a_group_outlives_its_tasks_by_one_to_two_hours(queue: Queue, clock: FakeClock) -> None:
    group = new_id()
    first = clock.now + DAY
    await create_in(queue, clock, group, first)
    assert await group_expires(queue, group) == first + 2 * dates.HOUR

    # A task expiring at least an hour before the group leaves it as it is ...
    await create_in(queue, clock, group, first + dates.HOUR)
    await create_in(queue, clock, group, first - DAY // 2)
    assert await group_expires(queue, group) == first + 2 * dates.HOUR

    # ... one expiring later extends it to two hours after that task.
    later = first + dates.HOUR + 1
    await create_in(queue, clock, group, later)
    assert await group_expires(queue, group) == later + 2 * dates.HOUR


async def test_an_expired_group_starts_afresh_for_its_next_task(queue: Queue, clock: FakeClock) -> None:
    group = new_id()
    await create_in(queue, clock, group, clock.now + DAY)
    await groups.seal_task_group(queue, group, guard=ALLOW_ALL)
    clock.advance((DAY + 3 * dates.HOUR) / 1000)
    again = clock.now + DAY
    await create_in(queue, clock, group, again)
    body = await groups.get_task_group(queue, group)
    assert "sealed" not in body
    assert dates.parse_iso(body["expires"]) == again + 2 * dates.HOUR


@pytest.mark.postgres
async def test_tasks_join_a_live_group_side_by_side_and_a_seal_waits_for_them(
    queue: Queue, clock: FakeClock, db_url: str
) -> None:
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite has one writer: joins never overlap")
    group = new_id()
    expires = clock.now + DAY
    await create_in(queue, clock, group, expires)
    join = _queries.load("postgres")["join_group"]
    named = {"task_group_id": group, "scheduler_id": "-", "expires": expires + 2 * dates.HOUR,
             "now": clock.now, "task_id": "no-such-task", "needed": expires + dates.HOUR}  # fmt: skip
    args = [named[name] for name in _queries.parameter_names("postgres")["join_group"]]
    first, second = await asyncpg.connect(db_url), await asyncpg.connect(db_url)
    try:
        async with first.transaction():
            await first.fetchrow(join, *args)  # a createTask, still open, in the group
            # lock_timeout turns a wait for the first's lock into an error at once
            async with second.transaction():
                await second.execute("SET LOCAL lock_timeout = '10ms'")
                row = await second.fetchrow(join, *args)  # another task joins meanwhile
                assert row is not None and row["sealed"] is None
            with pytest.raises(asyncpg.LockNotAvailableError):
                async with second.transaction():
                    await second.execute("SET LOCAL lock_timeout = '10ms'")
                    await second.execute(
                        "UPDATE task_groups SET sealed = $2 WHERE task_group_id = $1", group, clock.now
                    )
    finally:
        await first.close()
        await second.close()
    await groups.seal_task_group(queue, group, guard=ALLOW_ALL)  # once they are done, it seals
    with pytest.raises(RequestConflict, match="sealed"):
        await create_in(queue, clock, group, expires)


@pytest.mark.postgres
async def test_a_task_created_meanwhile_fails_the_later_commit_and_is_answered_as_a_repeat(
    queue: Queue, clock: FakeClock, db_url: str
) -> None:
    """Two createTasks of one taskId side by side in a live group: neither finds the task, the
    second to commit fails on its row (UniqueViolation, nothing of it kept), and createTask's
    next attempt answers as for a repeat."""
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite has one writer: the second create starts after the first committed")
    group = new_id()
    expires = clock.now + DAY
    await create_in(queue, clock, group, expires)
    task_id = new_id()
    body = definition(clock.now, taskGroupId=group, expires=dates.to_iso(expires))
    defined = tasks.define(queue, task_id, body)
    second = queue.storage.transaction()
    async with queue.storage.transaction() as tx:
        first_answer = await tasks.create_task_tx(queue, tx, task_id, defined)
        # The second must not wait for the first (whose row it would wait on, were it not
        # deferred): bounded, so that a wait fails here instead of hanging the test.
        async with asyncio.timeout(30):
            await tasks.create_task_tx(queue, await second.__aenter__(), task_id, defined)
    with pytest.raises(UniqueViolation):
        await second.__aexit__(None, None, None)
    assert await tasks.create_task(queue, task_id, body, guard=ALLOW_ALL) == first_answer
    async with queue.storage.reader() as session:
        assert await session.fetchval("count_pending", "test-prov/test-worker") == 2


async def test_creates_of_one_task_at_once_make_one_task(queue: Queue, clock: FakeClock) -> None:
    """Several createTasks of one taskId in flight at once answer alike and make one task, and
    another definition under that taskId is a 409. (How they interleave is the pool's doing: the
    race settled at COMMIT is the test above.)"""
    group = new_id()
    expires = clock.now + DAY
    await create_in(queue, clock, group, expires)
    task_id = new_id()
    body = definition(clock.now, taskGroupId=group, expires=dates.to_iso(expires))
    answers = await asyncio.gather(
        *(tasks.create_task(queue, task_id, body, guard=ALLOW_ALL) for _ in range(6))
    )
    assert all(a == answers[0] for a in answers)
    assert answers[0]["status"]["state"] == "pending"
    async with queue.storage.reader() as session:
        assert await session.fetchval("count_pending", "test-prov/test-worker") == 2
    other = {**body, "payload": {"different": True}}
    with pytest.raises(RequestConflict):
        await tasks.create_task(queue, task_id, other, guard=ALLOW_ALL)


@pytest.mark.parametrize("refusal", ["sealed", "another scheduler"])
async def test_a_group_that_refuses_a_task_says_why_and_keeps_nothing_of_it(
    queue: Queue, clock: FakeClock, refusal: str
) -> None:
    """createTask first tries writes alone, the group's join among them checked; a refusal fails
    that transaction whole, and the way that reads the group answers the 409 with its reason."""
    group = new_id()
    expires = clock.now + DAY
    await create_in(queue, clock, group, expires)
    if refusal == "sealed":
        await groups.seal_task_group(queue, group, guard=ALLOW_ALL)
    before = await groups.get_task_group(queue, group)
    task_id = new_id()
    scheduler = "someone-else" if refusal == "another scheduler" else "-"
    body = definition(clock.now, taskGroupId=group, schedulerId=scheduler, expires=dates.to_iso(expires))
    with counting() as tally, pytest.raises(RequestConflict) as refused:
        await tasks.create_task(queue, task_id, body, guard=ALLOW_ALL)
    assert ("is sealed" if refusal == "sealed" else "belongs to schedulerId '-'") in str(refused.value)
    names = [name for trip in tally.trips for name in trip.split(" ")[0].split("+")]
    assert names.index("join_group_checked") < names.index("join_group")  # the checked way first
    with pytest.raises(ResourceNotFound):
        await tasks.status(queue, task_id)
    assert await groups.get_task_group(queue, group) == before
