"""What the scheduler does when a task of one of its graphs resolves.

It hears of resolutions from the queue's events (`subscribe`: on RabbitMQ, a durable queue of its
own, so nothing is lost while it is down), and, as a safety net for events it missed (an
in-process bus hears only what its own process relayed), from a sweep of the running graphs'
tasks (`sweep`). Either way it acts on the task's current state in the database, not on what the
event said, so acting twice (a redelivered event, two scheduler processes) does nothing more:

- completed: counted once per task; the graph is `finished` when every task has been counted;
- failed: rerun while reruns are left (each rerun spent once), else the graph is `blocked`;
- exception: the queue's own retries are already spent (a retried task is pending, not in
  exception), so the graph is `blocked`.

Dependents need nothing from here: they wait in the queue on their in-queue dependencies, which
the queue's dependency resolver satisfies when a task completes (also after a rerun).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import orjson

from taskyard.events.port import Envelope, EventBus
from taskyard.events.profiles import SEED_PREFIX, TC_PREFIX
from taskyard.model import runs, task_graph
from taskyard.model.errors import ResourceNotFound
from taskyard.model.messages import graph_message
from taskyard.queue import resolvers
from taskyard.queue import service as queue_service
from taskyard.scheduler.service import Scheduler
from taskyard.storage.port import Row, Tx, run_in_transaction

log = logging.getLogger(__name__)
SWEEP_BATCH = 100


async def react(s: Scheduler, task_id: str) -> None:
    """Act on the current state of `task_id` if it belongs to a running graph. Idempotent."""
    await run_in_transaction(s.queue.storage, lambda tx: _react_tx(s, tx, task_id))


async def _react_tx(s: Scheduler, tx: Tx, task_id: str) -> None:
    found = await tx.fetchrow("graph_of_task", task_id)
    if found is None:
        return
    graph = await tx.fetchrow("lock_task_graph", found["task_graph_id"])
    if graph is None or graph["state"] != "running":
        return
    try:
        rec = await queue_service.load_for_update_tx(tx, task_id)
    except ResourceNotFound:
        return
    if rec.state == "completed":
        if await tx.execute("count_task_graph_completion", task_id) == 1:
            await tx.execute("task_graph_task_done", graph["task_graph_id"])
            if graph["tasks_left"] <= 1:
                await _leave_running_tx(s, tx, graph, "finished")
    elif rec.state == "failed":
        if rec.deadline > s.clock() and await tx.execute("use_task_graph_rerun", task_id) == 1:
            change = runs.rerun(rec, s.clock())
            await queue_service.apply_tx(s.queue, tx, change, old_version=rec.version)
        else:
            await _leave_running_tx(s, tx, graph, "blocked", task_id=task_id)
    elif rec.state == "exception":
        await _leave_running_tx(s, tx, graph, "blocked", task_id=task_id)


async def _leave_running_tx(
    s: Scheduler, tx: Tx, graph: Row, state: str, *, task_id: str | None = None
) -> None:
    graph_id = graph["task_graph_id"]
    if await tx.execute("set_task_graph_state", graph_id, state, task_id) != 1:
        return  # another process got there first, and announced it
    status = task_graph.status(graph_id, graph["scheduler_id"], state, graph["routing"])
    message = graph_message(f"task-graph-{state}", status, orjson.loads(graph["routes"]), task_id=task_id)
    await queue_service.publish_tx(s.queue, tx, [message])
    log.info("task graph %s is %s%s", graph_id, state, f" (task {task_id})" if task_id else "")


async def sweep(s: Scheduler) -> int:
    """Act on tasks of running graphs whose resolution was not acted on; how many it found."""
    async with s.storage.reader() as session:
        rows = await session.fetch("task_graph_tasks_to_look_at", SWEEP_BATCH)
    for row in rows:
        try:
            await react(s, row["task_id"])
        except Exception:
            log.exception("task-graph scheduler could not act on task %s; trying again later", row["task_id"])
    return len(rows)


def queue_name(s: Scheduler) -> str:
    """The scheduler's durable queue on RabbitMQ: one per schedulerId, shared by its processes."""
    return f"taskyard/scheduler/{s.scheduler_id}"


def subscribe(s: Scheduler, bus: EventBus, profiles: tuple[str, ...]) -> Callable[[], None]:
    """Act on every resolution of this scheduler's tasks the bus delivers, from its durable queue
    on RabbitMQ (nothing is lost while no scheduler runs); answer a function that stops it."""

    async def heard(envelope: Envelope) -> None:
        status = envelope.body.get("status") if isinstance(envelope.body, dict) else None
        if isinstance(status, dict) and isinstance(status.get("taskId"), str):
            await react(s, status["taskId"])

    if "tc" in profiles:
        pattern = f"primary.*.*.*.*.*.*.{s.scheduler_id}.#"
        names = [TC_PREFIX + e for e in ("task-completed", "task-failed", "task-exception")]
    else:
        pattern = f"*.*.*.*.*.*.{s.scheduler_id}.#"
        names = [SEED_PREFIX + e for e in ("task-completed", "task-failed")]
    return bus.consume(queue_name(s), [(name, pattern) for name in names], heard)


SWEEPER = "task-graph-sweeper"  # the job's name, in logs and for `Storage.lead`


async def run_forever(s: Scheduler) -> None:
    """Sweep for resolutions no event told of, every `sweep_interval` (again at once while it
    finds a full batch), until cancelled; in one process at a time across a deployment (the
    sweep's reactions are idempotent, so two for a moment do no harm)."""

    async def full_batches() -> int:
        return 1 if await sweep(s) >= SWEEP_BATCH else 0

    await resolvers.run_forever(SWEEPER, full_batches, s.sweep_interval, lead=s.storage.lead)
