"""Background resolvers: expired claims, passed deadlines, dependencies, and expiry sweeps.

Each is safe to run in several processes on one PostgreSQL: candidates are found with a
query, and every change goes through `service.transition()`, whose conditional update lets
only one process win; the losers see the new state and leave it alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from taskyard.model import runs
from taskyard.model.errors import ResourceNotFound, TaskyardError
from taskyard.model.runs import Change, TaskRecord
from taskyard.queue import artifacts, groups, livelogs, service
from taskyard.queue.service import Queue

log = logging.getLogger(__name__)
BATCH = 32
EXPIRY_GRACE_MS = 30 * 60 * 1000  # TaskCluster sweeps things that expired more than 30 minutes ago


async def resolve_expired_claims(q: Queue) -> int:
    """Resolve runs whose claim passed takenUntil: exception claim-expired, retried while retries last."""
    async with q.storage.reader() as session:
        rows = await session.fetch("expired_claims", q.clock(), BATCH)
    done = 0
    for row in rows:
        expected = row["taken_until"]

        def step(rec: TaskRecord, expected: int = expected) -> Change:
            if rec.state != "running" or rec.taken_until != expected or rec.deadline <= q.clock():
                return Change(rec, changed=False)
            return runs.resolve(rec, len(rec.runs) - 1, "exception", "claim-expired", q.clock())

        done += await _apply(q, row["task_id"], step)
    return done


async def resolve_deadlines(q: Queue) -> int:
    """Resolve tasks past their deadline (plus the configured delay): exception deadline-exceeded."""
    cutoff = q.clock() - int(q.config.deadline_delay * 1000)
    async with q.storage.reader() as session:
        rows = await session.fetch("overdue_tasks", cutoff, BATCH)
    done = 0
    for row in rows:

        def step(rec: TaskRecord) -> Change:
            if rec.deadline > cutoff or rec.state in runs.RESOLVED:
                return Change(rec, changed=False)
            return runs.cancel(rec, q.clock(), reason="deadline-exceeded")

        done += await _apply(q, row["task_id"], step)
    return done


async def _apply(q: Queue, task_id: str, step: Callable[[TaskRecord], Change]) -> int:
    try:
        change = await service.transition(q, task_id, step)
    except (ResourceNotFound, TaskyardError) as exc:
        log.info("resolver skipped task %s: %s", task_id, exc)
        return 0
    return int(change.changed)


async def resolve_dependencies(q: Queue) -> int:
    """Process final resolutions: satisfy edges, schedule unblocked dependents, announce resolved groups."""
    async with q.storage.transaction() as tx:
        rows = await tx.fetch("take_resolutions", BATCH)
        if not rows:
            return 0
        resolved = [r["task_id"] for r in rows]
        completed = [r["task_id"] for r in rows if r["resolution"] == "completed"]
        edges = await tx.fetch("satisfy_dependencies_of", resolved, completed)
        for task_id in sorted({e["dependent_task_id"] for e in edges}):
            if await tx.fetchval("count_open_dependencies", task_id) == 0:
                await service.transition_tx(q, tx, task_id, lambda rec: _schedule_unblocked(q, rec))
        await groups.announce_resolved_tx(q, tx, sorted({r["task_group_id"] for r in rows}))
        await tx.execute("delete_resolutions", [r["id"] for r in rows])
    return len(rows)


def _schedule_unblocked(q: Queue, rec: TaskRecord) -> Change:
    if rec.runs or rec.deadline <= q.clock():
        return Change(rec, changed=False)
    return runs.schedule(rec, q.clock())


async def sweep_expired(q: Queue) -> int:
    """Delete expired artifacts (and their blobs), live logs, tasks, edges, groups, queues, workers."""
    cutoff = q.clock() - EXPIRY_GRACE_MS
    total = 0
    while swept := await artifacts.sweep_expired(q):
        total += swept
    while swept := await livelogs.sweep_expired(q):
        total += swept
    async with q.storage.transaction() as tx:
        for name in (
            "expire_tasks",
            "expire_dependencies",
            "expire_groups",
            "expire_task_queues",
            "expire_workers",
        ):
            total += await tx.execute(name, cutoff)
        total += await tx.execute("expire_pending", q.clock())
    return total


async def run_forever(
    name: str, work: Callable[[], Awaitable[int]], interval: float, wake: asyncio.Event | None = None
) -> None:
    """Run `work` until cancelled: again at once while it finds work, else after `interval` or a wake-up."""
    while True:
        try:
            while await work() > 0:
                pass
        except Exception:
            log.exception("%s failed; retrying in %.1fs", name, interval)
        if wake is None:
            await asyncio.sleep(interval)
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), interval)
        wake.clear()


def start_all(q: Queue) -> list[asyncio.Task[None]]:
    """Start every resolver as a background task of the running loop."""
    interval = q.config.resolver_interval
    specs: list[tuple[str, Callable[[], Awaitable[int]], float, asyncio.Event | None]] = [
        ("claim-resolver", lambda: resolve_expired_claims(q), interval, None),
        ("deadline-resolver", lambda: resolve_deadlines(q), interval, None),
        ("dependency-resolver", lambda: resolve_dependencies(q), interval, q.resolutions_committed),
        ("expiry-sweeper", lambda: sweep_expired(q), q.config.expiry_interval, None),
    ]
    return [asyncio.create_task(run_forever(*spec), name=spec[0]) for spec in specs]
