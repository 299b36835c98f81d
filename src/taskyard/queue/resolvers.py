"""Background resolvers: expired claims, passed deadlines, dependencies, and expiry sweeps.

Each is safe to run in several processes on one PostgreSQL: candidates are found with a
query, and every change goes through `service.transition()` (the dependency resolver's through
`service.transition_many_tx()`, its set-based form), whose conditional update lets only one
process win; the losers see the new state and leave it alone.

One bad row never stops a resolver: a row it fails on is set aside (`service.set_aside`: logged,
counted, held back for a while that grows with each failure) and the rest of the batch goes on.
Only an unavailable database stops a round; the next round tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from taskyard.model import dates, runs
from taskyard.model.errors import ResourceNotFound, Unavailable
from taskyard.model.outages import Outage
from taskyard.model.runs import Change, TaskRecord
from taskyard.queue import artifacts, groups, livelogs, service
from taskyard.queue.service import (
    CLAIM_RESOLVER,
    DEADLINE_RESOLVER,
    DEPENDENCY_RESOLVER,
    EXPIRY_SWEEPER,
    Queue,
)
from taskyard.storage.port import Row, Session, Tx, run_in_transaction

log = logging.getLogger(__name__)
BATCH = 32
DEPENDENTS_PER_TRANSACTION = 500  # the dependency resolver's chunk: see `_resolve_batch`
READY_PER_READ = 50_000  # dependents read at once, for many chunks: see `_Ready`
EXPIRY_GRACE_MS = 30 * 60 * 1000  # TaskCluster sweeps things that expired more than 30 minutes ago
SEEN_REQUESTS_BATCH = 2_000  # signed requests' MACs deleted per transaction
CLOCK_GRACE_MS = 60_000  # how far apart the clocks of a deployment's processes may be


async def resolve_expired_claims(q: Queue) -> int:
    """Resolve runs whose claim passed takenUntil: exception claim-expired, retried while retries last."""
    done = 0
    for row in await _candidates(q, CLAIM_RESOLVER, "expired_claims", q.clock()):
        expected = row["taken_until"]

        def step(rec: TaskRecord, expected: int = expected) -> Change:
            if rec.state != "running" or rec.taken_until != expected or rec.deadline <= q.clock():
                return Change(rec, changed=False)
            return runs.resolve(rec, len(rec.runs) - 1, "exception", "claim-expired", q.clock())

        done += await _apply(q, CLAIM_RESOLVER, row["task_id"], step)
    return done


async def resolve_deadlines(q: Queue) -> int:
    """Resolve tasks past their deadline (plus the configured delay): exception deadline-exceeded."""
    cutoff = q.clock() - int(q.config.deadline_delay * 1000)
    done = 0
    for row in await _candidates(q, DEADLINE_RESOLVER, "overdue_tasks", cutoff):

        def step(rec: TaskRecord) -> Change:
            if rec.deadline > cutoff or rec.state in runs.RESOLVED:
                return Change(rec, changed=False)
            return runs.cancel(rec, q.clock(), reason="deadline-exceeded")

        done += await _apply(q, DEADLINE_RESOLVER, row["task_id"], step)
    return done


async def _candidates(q: Queue, job: str, query: str, since: int) -> list[Row]:
    """Up to BATCH tasks `query` finds, leaving out those `job` set aside."""
    held = service.held(q, job)
    async with q.storage.reader() as session:
        rows = await session.fetch(query, since, BATCH + len(held))
    return [r for r in rows if _task_key(r["task_id"]) not in held][:BATCH]


def _task_key(task_id: str) -> str:
    return f"task {task_id}"


async def _apply(q: Queue, job: str, task_id: str, step: Callable[[TaskRecord], Change]) -> int:
    try:
        change = await service.transition(q, task_id, step)
    except (ResourceNotFound, Unavailable) as exc:  # gone meanwhile, or try again next round
        log.info("%s skipped task %s: %s", job, task_id, exc)
        return 0
    except Exception as exc:
        service.set_aside(q, job, _task_key(task_id), task_id, exc)
        return 0
    q.set_aside[job].release(_task_key(task_id))
    return int(change.changed)


async def resolve_dependencies(q: Queue) -> int:
    """Process final resolutions: satisfy edges, schedule unblocked dependents, announce resolved groups.

    A batch of resolutions goes in one transaction, or in several when they unblock more than
    DEPENDENTS_PER_TRANSACTION dependents. If that fails, each of its resolutions goes on its
    own, and one that fails again is set aside.
    """
    try:
        return await _resolve_batch(q)
    except Unavailable:
        raise
    except Exception:
        log.warning("%s: a batch failed; resolving it one row at a time", DEPENDENCY_RESOLVER, exc_info=True)
    return await _resolve_one_at_a_time(q)


async def _resolve_batch(q: Queue) -> int:
    """Take a batch of resolutions and satisfy their edges, then schedule the dependents they
    unblocked, DEPENDENTS_PER_TRANSACTION at a time in taskId order, each chunk committed on its
    own: the first are claimable at once, and no transaction holds the writer for long. The
    transaction of the last chunk announces the groups and deletes the resolutions.

    The dependents are read once for many chunks (`_Ready`), not once per chunk: each read sorts
    all of those left. A dependent that changed after the read is left alone by the transition,
    which checks every row it locks.

    Between chunks the resolutions stay. A crash (or a failure) between them leaves them to be
    taken again, and the next attempt finds only the dependents still unscheduled. On PostgreSQL
    each chunk's transaction takes the resolutions again, skipping those another process holds:
    one process at a time works on a resolution.
    """
    held = service.held(q, DEPENDENCY_RESOLVER)

    async def first(tx: Tx) -> tuple[list[Row], _Ready | None]:
        await _plan_generically(tx)
        taken = await tx.fetch("take_resolutions", BATCH + len(held))
        rows = [r for r in taken if _resolution_key(r) not in held][:BATCH]
        if not rows:
            return rows, None
        await _satisfy_tx(tx, rows)
        ready = _Ready(rows)
        return rows, ready if await _schedule_chunk_tx(q, tx, rows, ready) else None

    rows, ready = await run_in_transaction(q.storage, first)
    id_list = _ids(rows)
    while ready is not None:
        ready.taken()

        async def next_chunk(tx: Tx, ready: _Ready = ready) -> bool:
            return await _schedule_chunk_tx(q, tx, await tx.fetch("take_resolutions_again", id_list), ready)

        if not await run_in_transaction(q.storage, next_chunk):
            break
    for row in rows:
        q.set_aside[DEPENDENCY_RESOLVER].release(_resolution_key(row))
    return len(rows)


class _Ready:
    """The dependents a batch of resolutions unblocked, in taskId order: read READY_PER_READ at a
    time (a few chunks' worth of taskIds, not their rows) and handed out a chunk at a time.

    `chunk()` answers the next chunk inside its transaction; `taken()`, once that committed, moves
    past it. A transaction that rolled back (and is run again) gets the same chunk.
    """

    def __init__(self, rows: list[Row]) -> None:
        self.resolved = sorted({r["task_id"] for r in rows})
        self.ids: list[str] = []
        self.at = 0  # ids[:at] were scheduled
        self.size = 0  # the length of the chunk handed out last
        self.more = True  # the last read may have left some out

    async def chunk(self, session: Session, size: int) -> list[str]:
        """The next `size` dependents (fewer at the end)."""
        if self.at >= len(self.ids) and self.more:
            after = self.ids[-1] if self.ids else ""
            self.ids, self.at = await _unblocked(session, self.resolved, after, READY_PER_READ), 0
            self.more = len(self.ids) == READY_PER_READ
        chunk = self.ids[self.at : self.at + size]
        self.size = len(chunk)
        return chunk

    @property
    def last(self) -> bool:
        """Whether the chunk handed out last is the last one."""
        return self.at + self.size >= len(self.ids) and not self.more

    def taken(self) -> None:
        """The chunk handed out last was committed."""
        self.at += self.size
        self.size = 0


async def _schedule_chunk_tx(q: Queue, tx: Tx, rows: list[Row], ready: _Ready) -> bool:
    """Schedule the next DEPENDENTS_PER_TRANSACTION dependents of `ready`. Answer True if more may
    wait; else announce the groups, delete the resolutions and answer False."""
    if not rows:
        return False  # another process holds them now, or finished them
    chunk = await ready.chunk(tx, DEPENDENTS_PER_TRANSACTION)
    if chunk:
        await service.transition_many_tx(q, tx, chunk, lambda rec: _schedule_unblocked(q, rec))
    if not ready.last:
        return True
    await groups.announce_resolved_tx(q, tx, sorted({r["task_group_id"] for r in rows}))
    await tx.defer("delete_resolutions", _ids(rows))
    return False


async def _plan_generically(tx: Tx) -> None:
    """Plan this transaction's statements once per connection, not once per call: the resolver's
    queries take lists of ids, whose every call PostgreSQL would otherwise plan anew (the query's
    comment). Deferred: it rides with the transaction's first statement. Only the first transaction
    of a batch: the chunks after it come with more than DEPENDENTS_PER_TRANSACTION dependents, where
    planning is a small part."""
    await tx.defer("plan_generically", "force_generic_plan")


def _ids(rows: Sequence[Row]) -> str:
    """The resolutions' ids as the JSON list the queries take."""
    return service.dumps([r["id"] for r in rows])


async def _satisfy_tx(tx: Tx, rows: list[Row]) -> None:
    """Satisfy the edges these resolutions satisfy. Run again for the same resolutions it does
    nothing more: a dependent stays ready until it is scheduled, whichever attempt satisfied its
    last edge."""
    resolved = sorted({r["task_id"] for r in rows})
    completed = sorted({r["task_id"] for r in rows if r["resolution"] == "completed"})
    await tx.execute("satisfy_dependencies_of", resolved, completed)


async def _unblocked(session: Session, resolved: list[str], after: str, limit: int) -> list[str]:
    """The first `limit` dependents after taskId `after` of these tasks that wait for nothing more
    and were never scheduled, in taskId order."""
    rows = await session.fetch("unblocked_dependents", resolved, after, limit)
    return [r["dependent_task_id"] for r in rows]


def _resolution_key(row: Row) -> str:
    return f"resolution {row['id']}"


async def _resolve_one_at_a_time(q: Queue) -> int:
    held = service.held(q, DEPENDENCY_RESOLVER)
    async with q.storage.reader() as session:
        waiting = await session.fetch("waiting_resolutions", BATCH + len(held))
    done = 0
    for row in [r for r in waiting if _resolution_key(r) not in held][:BATCH]:
        try:
            await _resolve_alone(q, row)
        except Unavailable:
            raise
        except Exception as exc:
            service.set_aside(q, DEPENDENCY_RESOLVER, _resolution_key(row), row["task_id"], exc)
            continue
        q.set_aside[DEPENDENCY_RESOLVER].release(_resolution_key(row))
        done += 1
    return done


class DependentFailed(Exception):
    """A dependent a resolution unblocked could not be scheduled."""


async def _resolve_alone(q: Queue, row: Row) -> None:
    """One resolution in steps that each commit, so that what can be done is done.

    Its edges are satisfied, then the dependents it unblocked are scheduled a chunk at a time,
    each dependent of a chunk that fails on its own; then its group is announced and the
    resolution deleted. If a step fails the resolution stays, to be tried again: the steps
    already done do nothing the second time.
    """
    async with q.storage.transaction() as tx:
        await _satisfy_tx(tx, [row])
    failures: list[str] = []
    ready = _Ready([row])
    while True:
        async with q.storage.reader() as session:
            chunk = await ready.chunk(session, DEPENDENTS_PER_TRANSACTION)
        if not chunk:
            break
        failures += await _schedule_chunk(q, chunk)
        ready.taken()
    if failures:
        raise DependentFailed(f"could not schedule dependent task {', '.join(failures)}")
    async with q.storage.transaction() as tx:
        if await tx.fetchrow("take_resolution", row["id"]) is None:
            return  # another process has it, or finished it
        await groups.announce_resolved_tx(q, tx, [row["task_group_id"]])
        await tx.execute("delete_resolutions", _ids([row]))


async def _schedule_chunk(q: Queue, task_ids: list[str]) -> list[str]:
    """Schedule these tasks in one transaction or, if that fails, each in its own; answer the
    failures, as `taskId (error)`."""
    try:
        await run_in_transaction(
            q.storage,
            lambda tx: service.transition_many_tx(q, tx, task_ids, lambda rec: _schedule_unblocked(q, rec)),
        )
        return []
    except Unavailable:
        raise
    except Exception:
        log.info(
            "%s: scheduling %d dependents together failed; one at a time", DEPENDENCY_RESOLVER, len(task_ids)
        )
    failures = []
    for task_id in task_ids:
        try:
            await service.transition(q, task_id, lambda rec: _schedule_unblocked(q, rec))
        except ResourceNotFound:
            continue  # expired meanwhile
        except Unavailable:
            raise
        except Exception as exc:
            failures.append(f"{task_id} ({type(exc).__name__}: {exc})")
    return failures


def _schedule_unblocked(q: Queue, rec: TaskRecord) -> Change:
    if rec.runs or rec.deadline <= q.clock():
        return Change(rec, changed=False)
    return runs.schedule(rec, q.clock())


async def sweep_expired(q: Queue) -> int:
    """Delete expired artifacts (and their blobs), live logs, tasks, edges, groups, task graphs,
    queues, workers, and poll messages past their task's deadline."""
    cutoff = q.clock() - EXPIRY_GRACE_MS
    total = 0
    while swept := await artifacts.sweep_expired(q):
        total += swept
    while swept := await livelogs.sweep_expired(q):
        total += swept
    while swept := await sweep_seen_requests(q):
        total += swept
    async with q.storage.transaction() as tx:
        for name in (
            "expire_tasks",
            "expire_dependencies",
            "expire_groups",
            "expire_task_graph_tasks",
            "expire_task_graphs",
            "expire_task_queues",
            "expire_workers",
        ):
            total += await tx.execute(name, cutoff)
        total += await tx.execute("expire_pending", q.clock())
        total += await tx.execute("expire_poll_messages", q.clock())
    return total


async def sweep_seen_requests(q: Queue) -> int:
    """Delete up to SEEN_REQUESTS_BATCH recorded signed requests (storage/port.py, Replays) whose
    timestamps have left Hawk's window on every process's clock; answer how many."""
    # Hawk checks timestamps against the wall clock, whatever clock the queue keeps.
    cutoff = dates.now_ms() - CLOCK_GRACE_MS
    async with q.storage.transaction() as tx:
        return await tx.execute("expire_seen_requests", cutoff, SEEN_REQUESTS_BATCH)


async def run_forever(
    name: str,
    work: Callable[[], Awaitable[int]],
    interval: float,
    wake: asyncio.Event | None = None,
    *,
    lead: Callable[[str], Awaitable[bool]] | None = None,
    batch: int | None = None,
) -> None:
    """Run `work` until cancelled: again at once while it finds work, else after `interval` or a
    wake-up. With `lead`, only while `lead(name)` says this process is the one that runs it. With
    `batch` (a woken job whose rounds take up to that many rows), again at once only after a full
    round: a shorter one took every row there was when it read, and what was committed since has
    set `wake`, so one more round would only find nothing.

    An unavailable database is an outage, not a failure: one warning when it begins, one line
    when a round succeeds again, however many rounds it fails meanwhile.
    """
    outage = Outage()
    while True:
        try:
            if lead is None or await lead(name):
                while (done := await work()) > 0 and (batch is None or done >= batch):
                    pass
        except Unavailable as exc:
            if outage.begins(time.monotonic()):
                log.warning("%s: %s; trying again every %gs", name, exc, interval)
        except Exception:
            log.exception("%s failed; retrying in %.1fs", name, interval)
        else:
            _, lasted = outage.ends(time.monotonic())
            if lasted is not None:
                log.info("%s: the database is back after %.1f s", name, lasted)
        if wake is None:
            await asyncio.sleep(interval)
            continue
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(interval):
                await wake.wait()
        wake.clear()


def start_all(q: Queue) -> list[asyncio.Task[None]]:
    """Start every resolver as a background task of the running loop.

    The sweeps run in one process at a time across a deployment (`Storage.lead`): in every
    process they would only read the same rows N times over. The dependency resolver runs in
    every process, woken by its own commits so that dependents are scheduled at once; each
    resolution is taken by exactly one of them (`FOR UPDATE SKIP LOCKED`).
    """
    interval, lead = q.config.resolver_interval, q.storage.lead
    loops = [
        run_forever(CLAIM_RESOLVER, lambda: resolve_expired_claims(q), interval, lead=lead),
        run_forever(DEADLINE_RESOLVER, lambda: resolve_deadlines(q), interval, lead=lead),
        run_forever(
            DEPENDENCY_RESOLVER,
            lambda: resolve_dependencies(q),
            interval,
            q.resolutions_committed,
            batch=BATCH,
        ),
        run_forever(EXPIRY_SWEEPER, lambda: sweep_expired(q), q.config.expiry_interval, lead=lead),
    ]
    names = (CLAIM_RESOLVER, DEADLINE_RESOLVER, DEPENDENCY_RESOLVER, EXPIRY_SWEEPER)
    return [asyncio.create_task(loop, name=name) for loop, name in zip(loops, names, strict=True)]
