"""The poll protocol (docs/poll.md): pollTaskUrls, the Azure-queue messages, and what claimTask
checks of a message it is given.

Every run that becomes pending gets a message `{taskId, runId, signature}` on the queue of its task
queue and priority, written by `service.enqueue_tx()` in the transaction that made it pending.
Workers poll those queues through taskyard's own Azure Queue Storage endpoint
(`api/azure_queue.py`), with the SAS-signed URLs pollTaskUrls hands out; the operations behind
that endpoint are here. The claim index (claimWork) and the messages are independent: a run
claimed through one is claimed, and its entry in the other is dropped as stale when met.

A message whose run is no longer pending (claimed by claimWork, resolved, cancelled, superseded by
a newer run) is deleted when Get Messages meets it instead of being handed out: it could only
earn its receiver a 409. Messages nobody deletes expire with their task's deadline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict
from urllib.parse import urlencode

import orjson

from taskyard.model import azure_queue, dates, task_definition
from taskyard.model.azure_queue import AzureError, QueueMessage
from taskyard.model.errors import InputError, InsufficientScopes, Unavailable
from taskyard.model.runs import TaskRecord
from taskyard.model.task_definition import PRIORITIES
from taskyard.queue import service, workers
from taskyard.queue.service import Queue
from taskyard.storage.port import Row, Tx, execute_alone, run_in_transaction

PATH_PREFIX = "/api/queue/v1/_azure"
BACKFILL_BATCH = 500
BACKFILL_JOB = "poll-message-backfill"
RECEIVE_ROUNDS = 4  # Get Messages looks past stale messages at most this many times per call
RECEIVE_BATCH = 32
PEEK_LOOKAHEAD = 128


class PollKeys:
    """Where the poll URLs point (under the deployment's root URL) and what signs them and the
    messages: keys derived from the deployment's secret key, the same in every process."""

    def __init__(self, root_url: str, secret_key: str) -> None:
        self.root_url = root_url.rstrip("/")
        self.sas = azure_queue.SasSigner(secret_key)
        self.signatures = azure_queue.Signatures(secret_key)


class MessageRefused(InsufficientScopes):
    """The claim quotes a message, receipt or signature that is not this run's."""


class QueueUrls(TypedDict):
    signedPollUrl: str
    signedDeleteUrl: str


class PollTaskUrls(TypedDict):
    """pollTaskUrls' answer: one entry per priority, highest first, valid until `expires`."""

    expires: str
    queues: list[QueueUrls]


@dataclass(frozen=True)
class MessageProof:
    """What a claimTask body may quote of the message it was polled from (docs/poll.md, claimTask
    with a message)."""

    message_id: str | None = None
    receipt: str | None = None
    signature: str | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.message_id, self.receipt, self.signature))


def _keys(q: Queue) -> PollKeys:
    if q.poll_keys is None:
        raise Unavailable("this deployment does not serve the poll protocol (it has no poll keys)")
    return q.poll_keys


def _azure_keys(q: Queue) -> PollKeys:
    if q.poll_keys is None:
        raise AzureError(503, "ServerBusy", "This deployment does not serve the poll protocol.")
    return q.poll_keys


async def poll_task_urls(q: Queue, provisioner_id: str, worker_type: str) -> PollTaskUrls:
    """Signed poll and delete URLs for every priority's queue of the worker type, highest first.

    Records the task queue as seen, as claimWork does."""
    keys = _keys(q)
    task_queue_id = workers.check_task_queue_id(f"{provisioner_id}/{worker_type}")
    await workers.task_queue_seen(q, task_queue_id)
    now = q.clock()
    expires = (now + azure_queue.URLS_VALID_MS) // 1000 * 1000  # the SAS's `se` has whole seconds
    queues: list[QueueUrls] = []
    for rank in range(len(PRIORITIES), 0, -1):
        name = azure_queue.queue_name(provisioner_id, worker_type, rank)
        sas = urlencode(keys.sas.token(name, now - azure_queue.START_SKEW_MS, expires))
        base = f"{keys.root_url}{PATH_PREFIX}/{name}/messages"
        queues.append(
            {
                "signedPollUrl": f"{base}?visibilitytimeout={azure_queue.POLL_VISIBILITY}&{sas}",
                "signedDeleteUrl": f"{base}/{{{{messageId}}}}?popreceipt={{{{popReceipt}}}}&{sas}",
            }
        )
    return {"expires": dates.to_iso(expires), "queues": queues}


def _is_stale(row: Row) -> bool:
    """Whether the message's run is no longer its task's pending run (or the task is gone), or the
    message is on another priority's queue than the task's (changeTaskPriority adds a new one)."""
    if row["state"] != "pending" or row["run_id"] != len(orjson.loads(row["runs"])) - 1:
        return True
    provisioner_id, worker_type = row["task_queue_id"].split("/", 1)
    rank = task_definition.priority_rank(row["priority"])
    return bool(row["queue_name"] != azure_queue.queue_name(provisioner_id, worker_type, rank))


def _text(keys: PollKeys, row: Row) -> str:
    signature = keys.signatures.sign(row["task_id"], row["run_id"])
    return azure_queue.message_text(row["task_id"], row["run_id"], signature)


async def get_messages(q: Queue, queue: str, query: Mapping[str, str]) -> list[QueueMessage]:
    """Get Messages: up to `numofmessages` visible messages, each hidden for `visibilitytimeout`
    seconds with a new pop receipt and its DequeueCount + 1. Two receivers never get one message."""
    keys = _azure_keys(q)
    keys.sas.check(queue, query, q.clock(), "p")
    count = azure_queue.whole_in_range(query, "numofmessages", 1, 1, azure_queue.MAX_MESSAGES)
    timeout = azure_queue.whole_in_range(
        query, "visibilitytimeout", azure_queue.DEFAULT_VISIBILITY, 1, azure_queue.MAX_VISIBILITY
    )

    if not await _may_hold_visible(q, queue):
        return []

    async def receive(tx: Tx) -> list[QueueMessage]:
        now = q.clock()
        got: list[QueueMessage] = []
        for _ in range(RECEIVE_ROUNDS):
            # Beyond `count`, so that a run of stale messages (runs claimWork took) is cleared in
            # few rounds; fresh rows beyond `count` are left as they are.
            rows = await tx.fetch("lock_poll_messages", queue, now, max(count, RECEIVE_BATCH))
            for row in rows:
                if _is_stale(row):
                    await tx.execute("delete_poll_message", row["message_id"])
                elif len(got) < count:
                    got.append(await _receive_tx(tx, keys, row, now, now + timeout * 1000))
            if len(got) >= count or len(rows) < max(count, RECEIVE_BATCH):
                break
        return got

    return await run_in_transaction(q.storage, receive)


async def _may_hold_visible(q: Queue, queue: str) -> bool:
    """False when the queue has no visible message: known from memory, or from one read (never the
    write lock). See `signals.EmptyPollQueues`."""
    empty, now = q.empty_poll_queues, q.clock()
    if empty.is_empty(queue, now):
        return False
    snapshot = empty.snapshot()
    async with q.storage.reader() as session:
        next_visible = await session.fetchval("poll_queue_next_visible", queue, now)
    if next_visible is not None and next_visible <= now:
        return True
    empty.mark_empty(queue, snapshot, math.inf if next_visible is None else next_visible)
    return False


async def _receive_tx(tx: Tx, keys: PollKeys, row: Row, now: int, visible: int) -> QueueMessage:
    receipt = azure_queue.new_pop_receipt()
    await tx.execute(
        "receive_poll_message", visible=visible, pop_receipt=receipt, message_id=row["message_id"]
    )
    return QueueMessage(
        message_id=row["message_id"],
        inserted=row["inserted"],
        expires=row["expires"],
        dequeue_count=row["dequeue_count"] + 1,
        text=_text(keys, row),
        pop_receipt=receipt,
        visible=visible,
    )


async def peek_messages(q: Queue, queue: str, query: Mapping[str, str]) -> list[QueueMessage]:
    """Peek Messages: the next visible messages, changing nothing (no receipt, same count)."""
    keys = _azure_keys(q)
    keys.sas.check(queue, query, q.clock(), "r")
    count = azure_queue.whole_in_range(query, "numofmessages", 1, 1, azure_queue.MAX_MESSAGES)
    async with q.storage.reader() as session:
        rows = await session.fetch("peek_poll_messages", queue, q.clock(), PEEK_LOOKAHEAD)
    fresh = [row for row in rows if not _is_stale(row)][:count]
    return [
        QueueMessage(r["message_id"], r["inserted"], r["expires"], r["dequeue_count"], _text(keys, r))
        for r in fresh
    ]


async def _held_message_tx(tx: Tx, q: Queue, queue: str, message_id: str, receipt: str) -> Row:
    """The message, locked, if `receipt` is its current pop receipt; 404 or 400 otherwise."""
    row = None
    if azure_queue.could_be_message_id(message_id):
        row = await tx.fetchrow("get_poll_message_for_update", message_id, queue, q.clock())
    if row is None:
        raise azure_queue.message_not_found()
    if row["pop_receipt"] != receipt:
        raise azure_queue.pop_receipt_mismatch()
    return row


async def delete_message(q: Queue, queue: str, message_id: str, query: Mapping[str, str]) -> None:
    """Delete Message: 404 if it is gone, 400 unless the pop receipt is its latest."""
    keys = _azure_keys(q)
    keys.sas.check(queue, query, q.clock(), "p")
    receipt = azure_queue.check_pop_receipt(query.get("popreceipt"))

    if azure_queue.could_be_message_id(message_id) and await execute_alone(
        q.storage, "delete_held_poll_message", message_id, queue, receipt
    ):
        return  # the common case: one statement, a transaction by itself

    async def why(tx: Tx) -> None:  # otherwise find out why, for the right error
        await _held_message_tx(tx, q, queue, message_id, receipt)

    await run_in_transaction(q.storage, why)


async def update_message(
    q: Queue, queue: str, message_id: str, query: Mapping[str, str], text: str | None
) -> tuple[str, int]:
    """Update Message: hide it for `visibilitytimeout` seconds from now; answer the new pop receipt
    and when it becomes visible. The text is the queue's own: a different one is refused."""
    keys = _azure_keys(q)
    keys.sas.check(queue, query, q.clock(), "up")
    receipt = azure_queue.check_pop_receipt(query.get("popreceipt"))
    if query.get("visibilitytimeout") is None:
        raise AzureError(
            400,
            "MissingRequiredQueryParameter",
            "A query parameter that's mandatory for this request is not specified.",
            QueryParameterName="visibilitytimeout",
        )
    timeout = azure_queue.whole_in_range(query, "visibilitytimeout", 0, 0, azure_queue.MAX_VISIBILITY)

    async def update(tx: Tx) -> tuple[str, int]:
        row = await _held_message_tx(tx, q, queue, message_id, receipt)
        if text is not None and text != _text(keys, row):
            raise azure_queue.permission_mismatch("The text of a task's message cannot be changed.")
        new_receipt, visible = azure_queue.new_pop_receipt(), q.clock() + timeout * 1000
        await tx.execute("update_poll_message", message_id, visible, new_receipt, receipt)
        if visible < row["visible"]:  # visible sooner than any process may have noted
            tx.notify(service.POLL_CHANNEL, queue)
        return new_receipt, visible

    return await run_in_transaction(q.storage, update)


async def check_claim_tx(q: Queue, tx: Tx, rec: TaskRecord, run_id: int, proof: MessageProof) -> None:
    """What claimTask checks of the message it quotes (docs/poll.md): the signature is this run's, the
    message is this run's, and the receipt is its current pop receipt. 403 if not; 400 for a
    messageId without a receipt or the other way round."""
    if (proof.message_id is None) != (proof.receipt is None):
        raise InputError("messageId and receipt go together: give both (from the polled message) or neither")
    if proof.signature is not None and not _keys(q).signatures.matches(rec.task_id, run_id, proof.signature):
        raise MessageRefused(f"the signature is not that of a message for run {run_id} of task {rec.task_id}")
    if proof.message_id is None:
        return
    row = await tx.fetchrow("get_poll_message_by_id", proof.message_id)
    if row is None:
        raise MessageRefused(f"message {proof.message_id[:64]!r} does not exist (deleted, or expired)")
    if (row["task_id"], row["run_id"]) != (rec.task_id, run_id):
        raise MessageRefused(f"message {proof.message_id} is not for run {run_id} of task {rec.task_id}")
    if row["pop_receipt"] != proof.receipt:
        raise MessageRefused(f"the receipt is not message {proof.message_id}'s latest pop receipt")


async def backfill_messages(q: Queue) -> int:
    """Give every pending run a message, when there are none at all: a database that pending runs
    reached before it had poll messages (an upgrade). Run once at start-up; answers how many.

    With messages present it does nothing, so it costs one read on every later start. Of several
    processes starting together, the one that leads `BACKFILL_JOB` fills (were two to fill, a run
    with two messages would still be claimed once: the other claim is a 409, and its worker
    deletes that message).
    """
    if not await q.storage.lead(BACKFILL_JOB):
        return 0
    async with q.storage.reader() as session:
        if await session.fetchval("any_poll_message") is not None:
            return 0
    after, total = "", 0
    while True:
        async with q.storage.transaction() as tx:
            rows = await tx.fetch("pending_runs_after", after, BACKFILL_BATCH)
            for row in rows:
                rec = service.record_from_row(row)
                name = await service.insert_poll_message_tx(tx, rec, row["pending_run_id"], q.clock())
                tx.notify(service.POLL_CHANNEL, name)
        total += len(rows)
        if len(rows) < BACKFILL_BATCH:
            return total
        after = rows[-1]["task_id"]
