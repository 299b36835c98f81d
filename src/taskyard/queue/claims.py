"""The worker protocol: claimWork (long poll), claimTask, reclaimTask and the three reports."""

from __future__ import annotations

import asyncio
from typing import TypedDict

from taskyard.auth import hawk
from taskyard.model import runs
from taskyard.model.errors import RequestConflict, ResourceNotFound
from taskyard.model.guard import Guard
from taskyard.model.runs import Change, TaskRecord
from taskyard.model.status import ReasonResolved, ResolvedState, StatusAnswer, TaskStatus
from taskyard.model.task_definition import TaskDefinition
from taskyard.queue import poll, service, signals, workers
from taskyard.queue.service import Queue
from taskyard.queue.tasks import check_task_id
from taskyard.storage.port import Row, Tx, run_in_transaction

MAX_TASKS_PER_CLAIM = 32


class Reclaimed(TypedDict):
    """What reclaimTask answers: the run's new claim and credentials."""

    status: TaskStatus
    runId: int
    workerGroup: str
    workerId: str
    takenUntil: str
    credentials: hawk.TemporaryCredentials


class Claim(Reclaimed):
    """One claimed run, as claimWork lists them and claimTask answers it: a reclaim, plus the task."""

    task: TaskDefinition


class ClaimWorkAnswer(TypedDict):
    tasks: list[Claim]


class NoClaim(TypedDict):
    """What claimTask answers a quarantined worker: `{}`."""


def credentials(
    q: Queue, rec: TaskRecord, run_id: int, worker: tuple[str, str], taken_until: int
) -> hawk.TemporaryCredentials:
    """Temporary credentials for one run, valid until `taken_until` (docs/protocol.md, Task credentials)."""
    issuer_id, issuer_token = q.credentials_issuer
    scopes = [
        f"queue:reclaim-task:{rec.task_id}/{run_id}",
        f"queue:resolve-task:{rec.task_id}/{run_id}",
        f"queue:create-artifact:{rec.task_id}/{run_id}",
        *rec.definition.get("scopes", []),
    ]
    until = f"{taken_until / 1000:.3f}".rstrip("0").rstrip(".")  # as JavaScript prints the number
    client_id = f"task-client/{rec.task_id}/{run_id}/on/{worker[0]}/{worker[1]}/until/{until}"
    return hawk.temporary_credentials(
        issuer_id, issuer_token, scopes, q.clock(), taken_until, client_id=client_id
    )


def _claim_body(q: Queue, rec: TaskRecord, run_id: int, worker: tuple[str, str]) -> Claim:
    """What claimWork and claimTask answer: the reclaim answer plus the task definition."""
    return {**_reclaim_body(q, rec, run_id, worker), "task": service.definition_of(rec)}


def _reclaim_body(q: Queue, rec: TaskRecord, run_id: int, worker: tuple[str, str]) -> Reclaimed:
    taken_until = rec.taken_until or q.clock()
    return {
        "status": rec.status(),
        "runId": run_id,
        "workerGroup": worker[0],
        "workerId": worker[1],
        "takenUntil": rec.runs[run_id]["takenUntil"],
        "credentials": credentials(q, rec, run_id, worker, taken_until),
    }


async def claim_work(
    q: Queue, task_queue_id: str, worker: tuple[str, str], count: int, *, gone: asyncio.Event | None = None
) -> list[Claim]:
    """Claim up to `count` pending tasks, waiting up to the long-poll timeout for the first.

    Wakes on the task-pending signal, never by sleeping in a loop. A quarantined worker is
    recorded as seen, waits the whole timeout and gets nothing. When `gone` is set (the worker
    hung up) or the server stops (`q.signals.close()`) it stops waiting; it is never cancelled in
    the middle of a claim.
    """
    gone = gone or asyncio.Event()
    loop = asyncio.get_running_loop()
    give_up = loop.time() + q.config.claim_work_timeout
    await workers.seen(q, task_queue_id, worker)
    while not gone.is_set() and not q.signals.closing.is_set():
        with q.signals.waiter(task_queue_id) as waiter:
            try:
                claims = await claim_pending(q, task_queue_id, worker, count)
            except workers.Quarantined:
                waiter.pass_on()
                signals.before_waiting()
                await _wait_out(q, gone)
                return []
            remaining = give_up - loop.time()
            if claims or remaining <= 0:
                return claims
            await waiter.wait(remaining, gone)
    return []


async def _wait_out(q: Queue, gone: asyncio.Event) -> None:
    """A quarantined worker's long poll: the whole timeout, unless it hangs up or the server stops."""
    waits = [asyncio.ensure_future(gone.wait()), asyncio.ensure_future(q.signals.closing.wait())]
    try:
        await asyncio.wait(waits, timeout=q.config.claim_work_timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for each in waits:
            each.cancel()


async def claim_pending(q: Queue, task_queue_id: str, worker: tuple[str, str], count: int) -> list[Claim]:
    """One attempt: take up to `count` runs from the claim index and claim them, in one transaction.

    Raises `workers.Quarantined` for a quarantined worker.
    """
    claimed = await run_in_transaction(
        q.storage, lambda tx: _claim_pending_tx(q, tx, task_queue_id, worker, count)
    )
    return [_claim_body(q, rec, len(rec.runs) - 1, worker) for rec in claimed]


async def _claim_pending_tx(
    q: Queue, tx: Tx, task_queue_id: str, worker: tuple[str, str], count: int
) -> list[TaskRecord]:
    now = q.clock()
    taken_until = now + q.config.claim_timeout * 1000
    # Their claim-index rows are deleted by the same statement, stale ones too. It takes nothing
    # for a quarantined worker, and answers the worker's row with each run it takes.
    rows = await tx.fetch(
        "take_pending",
        task_queue_id=task_queue_id,
        count=count,
        now=now,
        worker_group=worker[0],
        worker_id=worker[1],
    )
    if not rows:
        if workers.is_quarantined(await tx.fetchrow("get_worker", task_queue_id, *worker), now):
            raise workers.Quarantined(f"worker {worker[0]}/{worker[1]} is quarantined")
        return []
    known = workers.worker_of(rows[0])
    claimed: list[TaskRecord] = []
    for row in sorted(rows, key=_claim_order):
        rec = await _claim_one_tx(q, tx, row, worker, taken_until)
        if rec is not None:
            claimed.append(rec)
    if claimed:
        claimed_runs = [(r.task_id, len(r.runs) - 1) for r in claimed]
        await workers.seen_tx(q, tx, task_queue_id, worker, claimed_runs, known)
    return claimed


def _claim_order(row: Row) -> tuple[int, int, str]:
    """Highest priority first, then oldest: the claim index's order."""
    return (-row["pending_priority"], row["pending_inserted"], row["task_id"])


async def _claim_one_tx(
    q: Queue, tx: Tx, row: Row, worker: tuple[str, str], taken_until: int
) -> TaskRecord | None:
    rec = service.record_from_row(row)
    run_id = row["pending_run_id"]
    if rec.deadline <= q.clock() or run_id != len(rec.runs) - 1 or rec.state != "pending":
        return None  # a stale index entry: the run was cancelled, resolved or superseded
    change = runs.claim(rec, run_id, worker, q.clock(), taken_until)
    change.dequeue = False  # its pending row is already deleted
    await service.apply_tx(q, tx, change, old_version=rec.version)
    return change.record


async def claim_task(
    q: Queue,
    task_id: str,
    run_id: int,
    worker: tuple[str, str],
    *,
    guard: Guard,
    message: poll.MessageProof = poll.MessageProof(),  # noqa: B008 (frozen, never changed)
) -> Claim | NoClaim:
    """Claim one named run (deprecated protocol). The same worker again gets its claim back.

    One transaction reads the task (404), lets `guard` check its provisionerId and workerType
    (403), answers `{}` to a quarantined worker, checks the poll message the claim quotes, if it
    quotes one (403: `poll.check_claim_tx`), claims the run and records the worker as seen.
    """
    check_task_id(task_id)

    async def attempt(tx: Tx) -> TaskRecord | None:
        rec = await service.load_for_update_tx(tx, task_id)
        service.guard_task(guard, rec)
        known = await tx.fetchrow("get_worker", rec.task_queue_id, *worker)
        if workers.is_quarantined(known, q.clock()):
            return None
        if rec.deadline <= q.clock():
            raise RequestConflict(f"task {task_id} is past its deadline and cannot be claimed")
        _check_run(rec, run_id)
        if message.given:
            await poll.check_claim_tx(q, tx, rec, run_id, message)
        taken_until = q.clock() + q.config.claim_timeout * 1000
        change = runs.claim(rec, run_id, worker, q.clock(), taken_until)
        await service.apply_tx(q, tx, change, old_version=rec.version)
        if change.changed:
            await workers.seen_tx(q, tx, rec.task_queue_id, worker, [(task_id, run_id)], known)
        return change.record

    claimed = await run_in_transaction(q.storage, attempt)
    if claimed is None:
        return {}
    return _claim_body(q, claimed, run_id, worker)


def _check_run(rec: TaskRecord, run_id: int) -> None:
    if run_id >= len(rec.runs):
        raise ResourceNotFound(f"task {rec.task_id} has no run {run_id}")


async def reclaim_task(q: Queue, task_id: str, run_id: int) -> Reclaimed:
    """Extend the claim; answers fresh credentials. 409 means: stop working on this run."""
    check_task_id(task_id)

    def step(rec: TaskRecord) -> Change:
        _check_run(rec, run_id)
        if rec.deadline <= q.clock():
            raise RequestConflict(f"task {task_id} is past its deadline; stop working on it")
        return runs.reclaim(rec, run_id, q.clock() + q.config.claim_timeout * 1000)

    rec = (await service.transition(q, task_id, step)).record
    run = rec.runs[run_id]
    worker = (run["workerGroup"], run["workerId"])
    # A busy worker claims nothing for as long as its tasks run: its reclaims keep its
    # lastDateActive (at most one write a minute per worker and process).
    await workers.seen(q, rec.task_queue_id, worker)
    return _reclaim_body(q, rec, run_id, worker)


async def report(
    q: Queue, task_id: str, run_id: int, state: ResolvedState, reason: ReasonResolved
) -> StatusAnswer:
    """Resolve a run completed, failed or exception(reason). Repeats are idempotent."""
    check_task_id(task_id)

    def step(rec: TaskRecord) -> Change:
        _check_run(rec, run_id)
        return runs.resolve(rec, run_id, state, reason, q.clock())

    return service.status_of(await service.transition(q, task_id, step))
