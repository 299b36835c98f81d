"""The consistency check finds nothing in states the queue makes, and each kind of damage."""

from __future__ import annotations

import pytest

from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, consistency, tasks
from taskyard.queue.service import Queue
from taskyard.storage.port import Storage
from tests.conftest import FakeClock, Published
from tests.queue.helpers import definition, new_id
from tests.upgrade.databases import execute_raw

TQ = "test-prov/test-worker"
WORKER = ("wg", "w1")


async def every_state(queue: Queue, clock: FakeClock) -> dict[str, str]:
    """A task in each state, one depending on the pending one; {state: taskId}."""
    made: dict[str, str] = {}
    for state in ("completed", "failed", "exception", "running"):
        made[state] = new_id()
        await tasks.create_task(queue, made[state], definition(clock.now), guard=ALLOW_ALL)
        [claim] = await claims.claim_pending(queue, TQ, WORKER, 1)
        assert claim["status"]["taskId"] == made[state]
        if state != "running":
            await claims.report(
                queue, made[state], 0, state, "malformed-payload" if state == "exception" else state
            )
    made["pending"] = new_id()
    await tasks.create_task(queue, made["pending"], definition(clock.now), guard=ALLOW_ALL)
    made["unscheduled"] = new_id()
    await tasks.create_task(
        queue, made["unscheduled"], definition(clock.now, dependencies=[made["pending"]]), guard=ALLOW_ALL
    )
    return made


async def test_states_the_queue_makes_are_consistent(
    queue: Queue, storage: Storage, clock: FakeClock, published: Published
) -> None:
    await every_state(queue, clock)
    assert await consistency.problems(storage, now=clock.now) == []  # events still in the outbox
    await published.collect()
    assert await consistency.problems(storage, now=clock.now) == []


@pytest.mark.parametrize(
    ("state", "damage", "found"),
    [
        (
            "pending",
            "UPDATE tasks SET state = 'running' WHERE task_id = '{id}'",
            "but its last run is 'pending'",
        ),
        ("pending", "DELETE FROM pending_runs WHERE task_id = '{id}'", "pending, but not in the claim index"),
        (
            "completed",
            "INSERT INTO pending_runs VALUES ('{id}', 0, 'test-prov/test-worker', 1, 1, 1)",
            "which is completed with 1 runs",
        ),
        (
            "pending",
            "UPDATE pending_runs SET task_queue_id = 'other/queue' WHERE task_id = '{id}'",
            "is on other/queue",
        ),
        ("running", "UPDATE tasks SET taken_until = NULL WHERE task_id = '{id}'", "do not match its run's"),
        ("failed", "UPDATE tasks SET claimed_at = 1 WHERE task_id = '{id}'", "still has taken_until"),
        (
            "exception",
            "UPDATE tasks SET ever_resolved = FALSE WHERE task_id = '{id}'",
            "ever_resolved is False",
        ),
        (
            "completed",
            "INSERT INTO outbox (exchange, routing_key, cc, body) "
            """VALUES ('task-completed', 'k', '[]', '{{"status": {{"taskId": "gone"}}}}')""",
            "task gone, which does not exist",
        ),
        (
            "completed",
            "INSERT INTO outbox (exchange, routing_key, cc, body) "
            """VALUES ('task-group-sealed', 'k', '[]', '{{"taskGroupId": "gone"}}')""",
            "task group gone, which does not exist",
        ),
        (
            "completed",
            "INSERT INTO outbox (exchange, routing_key, cc, body) VALUES ('task-completed', 'k', '[]', '{{')",
            "is not JSON",
        ),
        (
            "completed",
            "INSERT INTO task_resolutions (task_id, task_group_id, resolution) "
            "VALUES ('gone', 'g', 'completed')",
            "task gone, which does not exist",
        ),
    ],
)
async def test_each_kind_of_damage_is_found(
    queue: Queue, storage: Storage, db_url: str, clock: FakeClock, state: str, damage: str, found: str
) -> None:
    made = await every_state(queue, clock)
    await execute_raw(db_url, damage.format(id=made[state]))
    problems = await consistency.problems(storage, now=clock.now)
    assert len(problems) == 1 and found in problems[0], problems


async def test_a_pending_task_past_its_deadline_may_have_lost_its_row(
    queue: Queue, storage: Storage, db_url: str, clock: FakeClock
) -> None:
    await every_state(queue, clock)
    await execute_raw(db_url, "DELETE FROM pending_runs")  # as the expiry sweep does, past deadlines
    assert await consistency.problems(storage, now=clock.now + 2 * 3600 * 1000) == []
