"""The queue's shared machinery: the `Queue` object, task records in storage, and applying changes.

A change to an existing task goes through `transition()`: read the task row, compute the change
with the pure state machine (`model.runs`), then write it with `apply_tx()`: the row's update
(checked against the version read), together with its claim-index rows, its dependency record
and its events, in one transaction. `transition()` reads without a lock and settles a race by
the version in its update: a lost one reads again (`storage.port.run_optimistic`). claimWork and
createTask call `apply_tx()` themselves, on rows they have just locked or inserted. The
transaction touches nothing but the database, so one that committed nothing through no fault of
its own (a deadlock, a connection lost before COMMIT) is run again, once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson

from taskyard.artifacts.port import BlobStore
from taskyard.config import QueueConfig
from taskyard.events import outbox
from taskyard.model import azure_queue, dates, runs, task_definition
from taskyard.model.backoff import SetAside
from taskyard.model.errors import ResourceNotFound
from taskyard.model.guard import Guard
from taskyard.model.messages import Message
from taskyard.model.metrics import Counters
from taskyard.model.runs import Change, TaskRecord
from taskyard.model.status import StatusAnswer
from taskyard.model.task_definition import TaskDefinition
from taskyard.model.types import Clock
from taskyard.queue.signals import EmptyPollQueues, Followers, PendingSignals
from taskyard.storage.port import Row, Storage, Tx, run_optimistic

if TYPE_CHECKING:  # livelogs and poll build on this module
    from taskyard.queue.livelogs import StreamUrls
    from taskyard.queue.poll import PollKeys

log = logging.getLogger(__name__)
PENDING_CHANNEL = "task_pending"
POLL_CHANNEL = "poll_message"  # payload: a poll queue's name; it may have a visible message now
LIVE_LOG_CHANNEL = "live_log"  # payload `<taskId>/<runId>`: that run's live log grew or closed
RACE_RETRIES = 8
# The background jobs, as logs and metric labels name them.
CLAIM_RESOLVER = "claim-resolver"
DEADLINE_RESOLVER = "deadline-resolver"
DEPENDENCY_RESOLVER = "dependency-resolver"
EXPIRY_SWEEPER = "expiry-sweeper"
SET_ASIDE_METRIC = "resolver_rows_set_aside_total"
CLAIMS_METRIC = "claims_total"
RESOLUTIONS_METRIC = "resolutions_total"


def _nothing() -> None:
    pass


class RunningRecords:
    """The records of running tasks as this process last committed them (a claim, a reclaim), so
    that the worker's next call about the run (a reclaim, its report) decides on the record it has
    rather than read it again: on PostgreSQL that is one round trip of the call's two.

    A record is only a guess: the change made from it is written by a checked update, which finds
    the row at the record's version and creation time or fails (`RowMoved`), and `transition` then
    decides again on a fresh read. So a record another process changed since, or one expired and
    created anew under its taskId, costs a round trip, never a wrong write. A record is used once,
    and replaced by what that call commits; at most `LIMIT` are kept, the oldest dropped first."""

    LIMIT = 2_000  # a record holds its definition: a few MB at most

    def __init__(self) -> None:
        self._records: dict[str, TaskRecord] = {}

    def keep(self, rec: TaskRecord) -> None:
        records = self._records
        records.pop(rec.task_id, None)
        records[rec.task_id] = rec
        if len(records) > self.LIMIT:
            del records[next(iter(records))]

    def take(self, task_id: str) -> TaskRecord | None:
        return self._records.pop(task_id, None)

    def forget(self, task_id: str) -> None:
        self._records.pop(task_id, None)


class Queue:
    """Everything the queue's operations share: storage, clock, configuration, wake-ups.

    Built whole: `credentials_issuer` signs the temporary credentials handed out with claims
    (clientId, accessToken); `blobs` holds s3-type artifacts' bytes (None: s3 artifacts are
    refused); `live_log_urls` makes and checks live-log stream URLs (None: live logs are
    refused); `poll_keys` makes and checks the poll protocol's URLs and message signatures (None:
    pollTaskUrls and the Azure-queue endpoint are refused; messages are still written);
    `events_committed` is called after every commit that wrote events (the outbox relay's kick).
    """

    def __init__(
        self,
        storage: Storage,
        config: QueueConfig,
        *,
        credentials_issuer: tuple[str, str],
        clock: Clock = dates.now_ms,
        blobs: BlobStore | None = None,
        live_log_urls: StreamUrls | None = None,
        poll_keys: PollKeys | None = None,
        events_committed: Callable[[], None] = _nothing,
    ) -> None:
        self.storage = storage
        self.config = config
        self.clock = clock
        self.credentials_issuer = credentials_issuer
        self.blobs = blobs
        self.live_log_urls = live_log_urls
        self.poll_keys = poll_keys
        self.events_committed = events_committed
        self.signals = PendingSignals()
        self.resolutions_committed = asyncio.Event()
        self.seen_writes: dict[str, int] = {}
        self.live_log_followers = Followers()  # who follows which run's live log
        self.empty_poll_queues = EmptyPollQueues()  # poll queues known empty: no query for them
        # What this process counts about itself, for a metrics endpoint to read.
        self.metrics = Counters()
        # Per background job, the rows it failed on and holds back for a while (see `set_aside`).
        self.set_aside: defaultdict[str, SetAside] = defaultdict(SetAside)
        self.running = RunningRecords()  # tasks this process saw claimed: `transition` skips a read

    async def start(self) -> None:
        """Listen for pending-task, poll-message and live-log notifications from other processes."""
        await self.storage.listen(PENDING_CHANNEL, self.signals.notify)
        await self.storage.listen(PENDING_CHANNEL, self._pending_poll_message)
        await self.storage.listen(LIVE_LOG_CHANNEL, self.live_log_followers.notify)
        await self.storage.listen(POLL_CHANNEL, self.empty_poll_queues.heard)

    def _pending_poll_message(self, task_queue_id: str | None) -> None:
        """A run of `task_queue_id` became pending, so one of its poll queues has a new message: the
        pending notification stands for the poll one, which a new run's commit need not send too."""
        if task_queue_id is None:
            self.empty_poll_queues.heard(None)
            return
        for name in azure_queue.queue_names(task_queue_id):
            self.empty_poll_queues.heard(name)


def dumps(value: object) -> str:
    return orjson.dumps(value).decode()


def record_from_row(row: Row) -> TaskRecord:
    return TaskRecord(
        task_id=row["task_id"],
        task_group_id=row["task_group_id"],
        scheduler_id=row["scheduler_id"],
        project_id=row["project_id"],
        task_queue_id=row["task_queue_id"],
        priority=row["priority"],
        requires=row["requires"],
        retries_left=row["retries_left"],
        created=row["created"],
        deadline=row["deadline"],
        expires=row["expires"],
        definition=orjson.loads(row["definition"]),
        runs=orjson.loads(row["runs"]),
        taken_until=row["taken_until"],
        claimed_at=row["claimed_at"],
        ever_resolved=bool(row["ever_resolved"]),
        version=row["version"],
    )


def definition_of(rec: TaskRecord) -> TaskDefinition:
    """The task definition as `task()` answers it (the stored definition has the current priority)."""
    definition = rec.definition.copy()
    definition["priority"] = rec.priority
    return definition


async def insert_record_tx(tx: Tx, rec: TaskRecord, *, deferred: bool = False) -> None:
    """Insert the task's row. `deferred`: as a deferred write (`Tx.defer`), for a caller that
    meets a taken taskId as the whole transaction's UniqueViolation, not this statement's."""
    await (tx.defer if deferred else tx.execute)(
        "insert_task",
        task_id=rec.task_id,
        task_group_id=rec.task_group_id,
        scheduler_id=rec.scheduler_id,
        project_id=rec.project_id,
        task_queue_id=rec.task_queue_id,
        priority=rec.priority,
        requires=rec.requires,
        retries_left=rec.retries_left,
        created=rec.created,
        deadline=rec.deadline,
        expires=rec.expires,
        definition=dumps(rec.definition),
        runs=dumps(rec.runs),
        state=rec.state,
        taken_until=rec.taken_until,
        claimed_at=rec.claimed_at,
        ever_resolved=rec.ever_resolved,
        version=rec.version,
    )


async def apply_tx(q: Queue, tx: Tx, change: Change, *, old_version: int) -> None:
    """Write `change` in `tx`: the task's row, claim index, dependency record and events.

    Every caller read the task's row in `tx`: locked (FOR UPDATE on PostgreSQL; SQLite has one
    writer), or not, in `transition()`'s optimistic transaction. The update is a checked write,
    deferred like the rest: a row no longer at `old_version` fails the transaction (`RowMoved`).
    """
    rec = change.record
    if change.changed:
        await tx.defer_checked("update_task_checked", **_update_row(rec, old_version))
        if rec.state == "running":
            tx.after_commit(lambda: q.running.keep(rec))
        else:
            tx.after_commit(lambda: q.running.forget(rec.task_id))
    if change.dequeue:
        await tx.defer("delete_pending_for_task", rec.task_id)
    if change.priority_changed:
        await tx.defer("update_pending_priority", rec.task_id, task_definition.priority_rank(rec.priority))
        if rec.state == "pending":  # the old queue's message is dropped as stale when met
            name = await insert_poll_message_tx(tx, rec, len(rec.runs) - 1, q.clock())
            tx.notify(POLL_CHANNEL, name)  # a process that knew the new queue empty must look again
    if change.enqueue_run is not None:
        await enqueue_tx(q, tx, rec, change.enqueue_run)
    if change.resolution is not None:
        await tx.defer("insert_resolution", rec.task_id, rec.task_group_id, change.resolution)
        tx.after_commit(q.resolutions_committed.set)
    await publish_tx(q, tx, change.messages)


def _update_row(rec: TaskRecord, old_version: int) -> dict[str, object]:
    """The parameters of `update_task_checked`, and a row of `update_tasks` (its set-based form)
    as a JSON object."""
    return {
        "task_id": rec.task_id,
        "old_version": old_version,
        "created": rec.created,
        "runs": dumps(rec.runs),
        "state": rec.state,
        "retries_left": rec.retries_left,
        "taken_until": rec.taken_until,
        "claimed_at": rec.claimed_at,
        "ever_resolved": rec.ever_resolved,
        "priority": rec.priority,
        "version": rec.version,
    }


async def enqueue_tx(q: Queue, tx: Tx, rec: TaskRecord, run_id: int) -> None:
    """Put a pending run in the claim index and on its poll queue (queue/poll.py), and wake a
    waiting worker once this commits. The one place where runs become claimable (`apply_many_tx`
    does the same for many runs at once)."""
    priority = task_definition.priority_rank(rec.priority)
    now = q.clock()
    await tx.defer(
        "insert_pending",
        task_id=rec.task_id,
        run_id=run_id,
        task_queue_id=rec.task_queue_id,
        priority=priority,
        inserted=now,
        deadline=rec.deadline,
    )
    await insert_poll_message_tx(tx, rec, run_id, now)
    tx.notify(PENDING_CHANNEL, rec.task_queue_id)


def _pending_row(rec: TaskRecord, run_id: int, now: int) -> dict[str, object]:
    """A row of `insert_pending_runs`, `enqueue_tx`'s claim-index row in set-based form."""
    return {
        "task_id": rec.task_id,
        "run_id": run_id,
        "task_queue_id": rec.task_queue_id,
        "priority": task_definition.priority_rank(rec.priority),
        "inserted": now,
        "deadline": rec.deadline,
    }


async def insert_poll_message_tx(tx: Tx, rec: TaskRecord, run_id: int, now: int) -> str:
    """Put the pending run's message on the poll queue of its task queue and current priority;
    answer that queue's name. The caller tells other processes (a new pending run's notification
    on PENDING_CHANNEL does, see `Queue._pending_poll_message`)."""
    name = _poll_queue_name(rec)
    await tx.defer(
        "insert_poll_message",
        message_id=azure_queue.new_message_id(),
        queue_name=name,
        task_id=rec.task_id,
        run_id=run_id,
        inserted=now,
        expires=rec.deadline,
    )
    return name


def _poll_queue_name(rec: TaskRecord) -> str:
    """The poll queue of the task's task queue and current priority."""
    rank = task_definition.priority_rank(rec.priority)
    return azure_queue.queue_name(rec.definition["provisionerId"], rec.definition["workerType"], rank)


def _poll_message_row(rec: TaskRecord, run_id: int, now: int) -> dict[str, object]:
    """A row of `insert_poll_messages`, `insert_poll_message_tx`'s message in set-based form."""
    return {
        "message_id": azure_queue.new_message_id(),
        "queue_name": _poll_queue_name(rec),
        "task_id": rec.task_id,
        "run_id": run_id,
        "inserted": now,
        "expires": rec.deadline,
    }


async def publish_tx(q: Queue, tx: Tx, messages: list[Message], *, one_statement: bool = False) -> None:
    """Write `messages` to the outbox in `tx`; with `one_statement`, in one statement however many
    there are (a batch of changes), else one per message."""
    if messages:
        if one_statement:
            await outbox.append_in_one_tx(tx, messages, now=q.clock())
        else:
            await outbox.append_tx(tx, messages, now=q.clock())
        tx.after_commit(q.events_committed)
        tx.after_commit(lambda: count_events(q.metrics, messages))


RESOLVED_EXCHANGES = {"task-completed": "completed", "task-failed": "failed", "task-exception": "exception"}


def count_events(metrics: Counters, messages: list[Message]) -> None:
    """Count the claims and resolutions `messages` announce, once their transaction committed."""
    for m in messages:
        body = m.body if isinstance(m.body, dict) else {}
        status = body.get("status")
        queue = status.get("taskQueueId", "") if isinstance(status, dict) else ""
        if m.exchange == "task-running":
            metrics.inc(CLAIMS_METRIC, task_queue_id=str(queue))
        elif m.exchange in RESOLVED_EXCHANGES:
            metrics.inc(
                RESOLUTIONS_METRIC, state=RESOLVED_EXCHANGES[m.exchange], reason=_reason(status, body)
            )


def _reason(status: object, body: dict[str, object]) -> str:
    runs = status.get("runs") if isinstance(status, dict) else None
    run_id = body.get("runId")
    if isinstance(runs, list) and isinstance(run_id, int) and 0 <= run_id < len(runs):
        run = runs[run_id]
        if isinstance(run, dict):
            return str(run.get("reasonResolved", ""))
    return ""


async def load(q: Queue, task_id: str) -> TaskRecord:
    """The task, or 404."""
    async with q.storage.reader() as session:
        row = await session.fetchrow("get_task", task_id)
    if row is None:
        raise ResourceNotFound(f"task {task_id} does not exist")
    return record_from_row(row)


async def load_for_update_tx(tx: Tx, task_id: str) -> TaskRecord:
    """The task as `tx` reads it (the row locked on PostgreSQL), or 404."""
    row = await tx.fetchrow("get_task_for_update", task_id)
    if row is None:
        raise ResourceNotFound(f"task {task_id} does not exist")
    return record_from_row(row)


def guard_task(guard: Guard, rec: TaskRecord) -> None:
    """Check the route's scopes with the task's own fields: any of them may appear in a template."""
    guard(
        schedulerId=rec.scheduler_id,
        taskGroupId=rec.task_group_id,
        projectId=rec.project_id,
        taskQueueId=rec.task_queue_id,
        provisionerId=rec.definition["provisionerId"],
        workerType=rec.definition["workerType"],
    )


async def transition_tx(q: Queue, tx: Tx, task_id: str, step: Callable[[TaskRecord], Change]) -> Change:
    """Apply `step` to the task's record inside `tx` (the row is locked on PostgreSQL)."""
    rec = await load_for_update_tx(tx, task_id)
    change = step(rec)
    await apply_tx(q, tx, change, old_version=rec.version)
    return change


async def transition_many_tx(
    q: Queue, tx: Tx, task_ids: list[str], step: Callable[[TaskRecord], Change]
) -> list[Change]:
    """`transition_tx` for each of these tasks, in a few statements however many they are: one read
    of their rows (locked on PostgreSQL, in taskId order), `step` on each, then `apply_many_tx`.
    A task that does not exist (expired meanwhile) is left out. Meant for a few hundred tasks at a
    time: every row is read, and every statement carries them all."""
    rows = await tx.fetch("get_tasks_for_update", sorted(set(task_ids)))
    olds = [record_from_row(row) for row in rows]
    changes = [(step(rec), rec.version) for rec in olds]
    lost = await apply_many_tx(q, tx, changes)
    again = [await transition_tx(q, tx, task_id, step) for task_id in lost]
    return [change for change, _ in changes if change.record.task_id not in lost] + again


async def apply_many_tx(q: Queue, tx: Tx, changes: list[tuple[Change, int]]) -> list[str]:
    """`apply_tx` for many changes, each with its record's old version, in a few statements: one
    conditional update for every row, then one insert each for the claim-index rows, the poll
    messages and the events of the rows it wrote. A change that needs more (a dequeue, a priority,
    a final resolution) goes through `apply_tx` on its own.
    Answers the taskIds of the others whose update lost its race (the version moved): nothing of
    those was written, and the caller decides.
    """
    simple: list[tuple[Change, int]] = []
    for change, version in changes:
        if change.dequeue or change.priority_changed or change.resolution is not None:
            await apply_tx(q, tx, change, old_version=version)
        else:
            simple.append((change, version))
    written = await _write_records(tx, [(c.record, v) for c, v in simple if c.changed])
    lost = [c.record.task_id for c, _ in simple if c.changed and c.record.task_id not in written]
    applied = [c for c, _ in simple if not c.changed or c.record.task_id in written]
    now = q.clock()
    enqueued = [(c.record, c.enqueue_run) for c in applied if c.enqueue_run is not None]
    if enqueued:
        await tx.execute("insert_pending_runs", dumps([_pending_row(r, run, now) for r, run in enqueued]))
        await tx.execute(
            "insert_poll_messages", dumps([_poll_message_row(r, run, now) for r, run in enqueued])
        )
        for rec, _ in enqueued:
            tx.notify(PENDING_CHANNEL, rec.task_queue_id)  # one wake-up per run, as enqueue_tx
    await publish_tx(q, tx, [m for c in applied for m in c.messages], one_statement=True)
    return lost


async def _write_records(tx: Tx, records: list[tuple[TaskRecord, int]]) -> set[str]:
    """Write these records, each if its row is still at the version given with it, in one
    statement; answer the taskIds written."""
    if not records:
        return set()
    rows = dumps([_update_row(rec, old_version) for rec, old_version in records])
    return {row["task_id"] for row in await tx.fetch("update_tasks", rows)}


async def transition(q: Queue, task_id: str, step: Callable[[TaskRecord], Change]) -> Change:
    """Apply `step` to the task's current record in a transaction of its own.

    Optimistic: the row is read without a lock, and the change written with an update that checks
    the version read (`Tx.defer_checked`), so a change made meanwhile fails the write, and the
    step runs again on a fresh read. On PostgreSQL that is two round trips: the read, then every
    write in one message. A running task this process committed last (`RunningRecords`: a claim,
    a reclaim) is decided on that record without the read, one round trip; a step that refuses
    it or changes nothing, or a write that finds the row moved, decides again on a fresh read.
    """

    kept = q.running.take(task_id)

    async def body(tx: Tx) -> Change:
        nonlocal kept
        if kept is not None:  # the record this process committed last: tried first, once
            rec, kept = kept, None
            try:
                change = step(rec)
            except Exception:  # decided on a record that may be old: decide on a fresh read
                pass
            else:
                if change.changed:  # else nothing would check the record: decide on a fresh read
                    await apply_tx(q, tx, change, old_version=rec.version)
                    return change
        row = await tx.fetchrow("get_task", task_id)
        if row is None:
            raise ResourceNotFound(f"task {task_id} does not exist")
        rec = record_from_row(row)
        change = step(rec)
        await apply_tx(q, tx, change, old_version=rec.version)
        return change

    return await run_optimistic(q.storage, body, attempts=RACE_RETRIES)


def held(q: Queue, job: str) -> set[str]:
    """The keys of the rows `job` set aside and should leave alone for now."""
    return q.set_aside[job].held(q.clock())


def set_aside(q: Queue, job: str, key: str, task_id: str, exc: BaseException) -> None:
    """Hold back a row `job` failed on (`key` names it, like `resolution 12`), so that the rest of
    its batch goes on; log it and count it.

    The row stays where it is and is tried again on its own once the hold ends, so nothing is lost
    if the cause goes away; each failure doubles the hold.
    """
    until = q.set_aside[job].hold(key, q.clock())
    q.metrics.inc(SET_ASIDE_METRIC, resolver=job)
    log.error(
        "%s set aside %s (taskId %s) until %s after %s: %s",
        job,
        key,
        task_id,
        dates.to_iso(until),
        type(exc).__name__,
        exc,
        exc_info=exc,
    )


def status_of(change: Change) -> StatusAnswer:
    return {"status": change.record.status()}


__all__ = ["Queue", "runs"]
