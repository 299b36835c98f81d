"""Live logs: a running task's log, appended by its worker and followed by anyone holding its URL.

The worker appends chunks at byte offsets (of the UTF-8 text). Each append reads the log's head
row locked (PostgreSQL: FOR UPDATE; SQLite serialises writers anyway), so two appends at one
offset can't both win, and a retried chunk is answered as success without being stored twice.
The first append also creates the `reference` artifact pointing at the stream URL, in the same
transaction. Every append notifies LIVE_LOG_CHANNEL after commit, so followers in every process
wake at once; they also look again every RECHECK_SECONDS in case a notification was lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import NotRequired, TypedDict, cast
from urllib.parse import urlencode

import orjson

from taskyard.model import schema, signed_urls
from taskyard.model.artifacts import Artifact
from taskyard.model.errors import (
    InputTooLarge,
    InputValidationError,
    RequestConflict,
    ResourceNotFound,
    Unavailable,
)
from taskyard.model.runs import TaskRecord
from taskyard.model.types import Millis
from taskyard.queue import artifacts, service
from taskyard.queue.service import Queue
from taskyard.storage.port import Row, Tx

CONTENT_TYPE = "text/plain; charset=utf-8"
STREAM_PREFIX = "/api/queue/v1/_livelog/"
URL_PURPOSE = "taskyard-livelog"
MAX_CHUNK_BYTES = 1024 * 1024
AFTER_DEADLINE_MS = 15 * 60 * 1000  # a log stays readable this long after its task's deadline
RECHECK_SECONDS = 2.0
READ_BATCH = 16  # chunks per query while streaming (each at most MAX_CHUNK_BYTES)
SWEEP_BATCH = 100
CHUNK_DELETE_BATCH = 5000

APPEND_REQUEST = schema.obj(
    {
        "offset": schema.integer(minimum=0),
        # characters (the bytes are checked after); a NUL is stored as SUBSTITUTE (`append`)
        "data": schema.string(max_length=MAX_CHUNK_BYTES, nul=True),
        "final": schema.boolean(),
    },
    required=["offset", "data"],
    additional=False,
)


class AppendRequest(TypedDict):
    """appendLiveLog's body, as APPEND_REQUEST checks it."""

    offset: int
    data: str
    final: NotRequired[bool]


class Appended(TypedDict):
    """appendLiveLog's answer: the log's length now, and the URL that streams it."""

    length: int
    url: str


@dataclass(frozen=True)
class Chunk:
    offset: int
    data: str
    size: int  # bytes of UTF-8
    final: bool


@dataclass(frozen=True)
class Head:
    """A run's live log: its name, how many bytes it holds, whether `final` closed it."""

    name: str
    length: int
    closed: bool
    expires: Millis


class StreamUrls:
    """Where live logs are streamed (under the deployment's root URL), and what signs those URLs:
    a key derived from the deployment's secret key."""

    def __init__(self, root_url: str, secret_key: str) -> None:
        self.root_url = root_url.rstrip("/")
        self.signer = signed_urls.Signer(secret_key, URL_PURPOSE)


def _urls(q: Queue) -> StreamUrls:
    if q.live_log_urls is None:
        raise Unavailable("this deployment cannot sign live-log URLs")
    return q.live_log_urls


def _signer(q: Queue) -> signed_urls.Signer:
    return _urls(q).signer


def stream_url(q: Queue, task_id: str, run_id: int, expires: Millis) -> str:
    """The signed URL streaming the run's live log until `expires`."""
    urls = _urls(q)
    signature = urls.signer.sign((task_id, str(run_id), str(expires)))
    query = urlencode({"e": expires, "s": signature})
    return f"{urls.root_url}{STREAM_PREFIX}{task_id}/{run_id}?{query}"


def verify_url(q: Queue, task_id: str, run_id: str, query: Mapping[str, str]) -> None:
    """BadSignature (403) unless the query signs this task and run and has not expired."""
    expires = signed_urls.expiry(query, "live log URL")
    if not _signer(q).matches((task_id, run_id, str(expires)), query.get("s", "")):
        raise signed_urls.BadSignature("the live log URL's signature does not match")
    signed_urls.check_unexpired(expires, q.clock(), "live log URL")


def chunk_from(request: object) -> Chunk:
    """The chunk an appendLiveLog body (already schema-checked) carries; 400 for bad text."""
    body = cast(AppendRequest, request)
    data = body["data"]
    try:
        size = len(data.encode())
    except UnicodeEncodeError:
        raise InputValidationError("body.data must be valid Unicode text") from None
    if size > MAX_CHUNK_BYTES:
        raise InputValidationError(
            f"body.data must be at most {MAX_CHUNK_BYTES} bytes of UTF-8; it has {size}"
        )
    # PostgreSQL's text can't hold NUL; ASCII's SUBSTITUTE takes its place, one byte for one, so
    # the offsets stay right and a task that prints binary junk keeps its live log.
    data = data.replace("\x00", "\x1a")
    return Chunk(int(body["offset"]), data, size, bool(body.get("final", False)))


async def append(q: Queue, task_id: str, run_id: int, name: str, body: object) -> Appended:
    """appendLiveLog: add a chunk to the run's live log; a retried chunk is a success, changing nothing."""
    chunk = chunk_from(body)
    _signer(q)  # refuse before touching anything if no URL can be made
    async with q.storage.transaction() as tx:
        head = await append_tx(q, tx, task_id, run_id, name=name, chunk=chunk)
    return {"length": head.length, "url": stream_url(q, task_id, run_id, head.expires)}


async def append_tx(q: Queue, tx: Tx, task_id: str, run_id: int, *, name: str, chunk: Chunk) -> Head:
    """Append `chunk` in `tx`; answer the head as it now is. 404/409/413 as the contract says."""
    rec = await _running_task_tx(tx, task_id, run_id)
    head = await _head_for_update_tx(tx, task_id, run_id)
    if head is None:
        head = await _open_tx(q, tx, rec, run_id, name=name, chunk=chunk)
    if head.name != name:
        raise RequestConflict(
            f"run {run_id} of task {task_id} already has a live log named {head.name!r}; "
            "a run has one live log"
        )
    grown = plan(head, chunk, q.config.max_live_log_bytes)
    if grown is None or grown == head:
        return head
    if chunk.size:
        await tx.execute("insert_live_log_chunk", task_id, run_id, chunk.offset, chunk.data)
    await tx.execute("update_live_log", task_id, run_id, grown.length, grown.closed)
    tx.notify(service.LIVE_LOG_CHANNEL, f"{task_id}/{run_id}")
    return grown


def plan(head: Head, chunk: Chunk, limit: int) -> Head | None:
    """The head once `chunk` is appended; None if it only repeats stored bytes; 409 or 413 if refused.

    An empty chunk at the end of a closed log repeats the request that closed it: a retry too.
    """
    end = chunk.offset + chunk.size
    if end <= head.length and (chunk.offset < head.length or head.closed):
        return None
    if head.closed:
        raise RequestConflict(f"the live log is closed (final at {head.length} bytes): nothing more is taken")
    if chunk.offset > head.length:
        raise RequestConflict(
            f"offset {chunk.offset} is past the end of the live log; its length is {head.length} bytes"
        )
    if chunk.offset < head.length:
        raise RequestConflict(
            f"the chunk at offset {chunk.offset} runs past the end of the live log without starting "
            f"there; its length is {head.length} bytes"
        )
    if end > limit:
        raise InputTooLarge(f"the live log would hold {end} bytes; at most {limit} are accepted")
    return Head(head.name, end, chunk.final, head.expires)


async def _running_task_tx(tx: Tx, task_id: str, run_id: int) -> TaskRecord:
    """The task, its row locked so no report slips in before the append commits; 404 or 409."""
    row = await tx.fetchrow("get_task_for_update", task_id)
    if row is None:
        raise ResourceNotFound(f"task {task_id} does not exist")
    rec = service.record_from_row(row)
    if run_id >= len(rec.runs):
        raise ResourceNotFound(f"task {task_id} has no run {run_id}")
    state = rec.runs[run_id]["state"]
    if state != "running":
        raise RequestConflict(f"run {run_id} of task {task_id} is {state}: its live log is closed")
    return rec


def _head(row: Row | None) -> Head | None:
    if row is None:
        return None
    return Head(row["name"], row["length"], bool(row["closed"]), row["expires"])


async def _head_for_update_tx(tx: Tx, task_id: str, run_id: int) -> Head | None:
    return _head(await tx.fetchrow("get_live_log_for_update", task_id, run_id))


async def _open_tx(q: Queue, tx: Tx, rec: TaskRecord, run_id: int, *, name: str, chunk: Chunk) -> Head:
    """Create the run's live log and its reference artifact; a racing first append may win instead."""
    if chunk.offset != 0:
        raise RequestConflict(
            f"run {run_id} of task {rec.task_id} has no live log yet: the first append is at offset 0"
        )
    expires = min(rec.expires, rec.deadline + AFTER_DEADLINE_MS)
    if not await tx.execute("insert_live_log", rec.task_id, run_id, name, expires):
        head = await _head_for_update_tx(tx, rec.task_id, run_id)  # the winner's, now committed
        assert head is not None
        return head
    url = stream_url(q, rec.task_id, run_id, expires)
    reference = Artifact(rec.task_id, run_id, name, "reference", CONTENT_TYPE, expires, {"url": url})
    await artifacts.create_artifact_tx(q, tx, reference)
    return Head(name, 0, False, expires)


async def check_exists(q: Queue, task_id: str, run_id: int) -> None:
    """404 unless the run has a live log."""
    async with q.storage.reader() as session:
        if await session.fetchrow("get_live_log", task_id, run_id) is None:
            raise ResourceNotFound(f"run {run_id} of task {task_id} has no live log")


async def read_chunks(q: Queue, task_id: str, run_id: int, offset: int) -> list[tuple[int, str]]:
    """Up to READ_BATCH stored chunks from byte `offset` on, as (offset, text)."""
    async with q.storage.reader() as session:
        rows = await session.fetch("live_log_chunks", task_id, run_id, offset, READ_BATCH)
    return [(r["byte_offset"], r["data"]) for r in rows]


async def finished(q: Queue, task_id: str, run_id: int) -> bool:
    """Whether the log can't grow any more: closed, swept, or its run no longer running."""
    async with q.storage.reader() as session:
        row = await session.fetchrow("live_log_state", task_id, run_id)
    if row is None or row["closed"] or row["runs"] is None:
        return True
    runs = orjson.loads(row["runs"])
    return run_id >= len(runs) or runs[run_id]["state"] != "running"


async def follow(
    q: Queue, task_id: str, run_id: int, *, keep_following: bool, gone: asyncio.Event, start: int = 0
) -> AsyncGenerator[bytes, None]:
    """The log's bytes from byte `start` on: what is stored, then (if `keep_following`) each chunk
    as it comes.

    Ends once the log can't grow and everything is sent, when `gone` is set (the client left), or
    when the server stops (`live_log_followers.close()`). Each round reads the state before the
    chunks, so a round that finds the log finished still sends its last chunks. The chunk holding
    `start` began at most MAX_CHUNK_BYTES before it: the first read starts there, and what comes
    before `start` is cut off.
    """
    with q.live_log_followers.watch(f"{task_id}/{run_id}") as woken:
        position = max(0, start - MAX_CHUNK_BYTES)
        while not gone.is_set():
            woken.clear()  # before reading: an append from now on wakes the next wait
            try:
                done = not keep_following or q.live_log_followers.closed or await finished(q, task_id, run_id)
                while True:
                    chunks = await read_chunks(q, task_id, run_id, position)
                    for offset, data in chunks:
                        encoded = data.encode()
                        position = offset + len(encoded)
                        if position <= start:
                            continue
                        yield encoded[start - offset :] if offset < start else encoded
                    if len(chunks) < READ_BATCH:
                        break
            except Unavailable:
                # The answer has begun: a 503 can't be sent any more. A follower waits the
                # database out and goes on from where it was; a one-off read is cut short.
                if not keep_following or q.live_log_followers.closed:
                    raise
                done = False
            if done:
                return
            await _wait(woken, gone, RECHECK_SECONDS)


async def _wait(woken: asyncio.Event, gone: asyncio.Event, timeout: float) -> None:
    waits = [asyncio.ensure_future(woken.wait()), asyncio.ensure_future(gone.wait())]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()


async def sweep_expired(q: Queue) -> int:
    """Delete up to SWEEP_BATCH live logs whose expiry has passed, chunks first; answer how many.

    One that fails is set aside and tried again later; the others go on.
    """
    held = service.held(q, service.EXPIRY_SWEEPER)
    async with q.storage.reader() as session:
        found = await session.fetch("expired_live_logs", q.clock(), SWEEP_BATCH + len(held))
    done = 0
    for row in [r for r in found if _sweep_key(r) not in held][:SWEEP_BATCH]:
        try:
            await _delete(q, row["task_id"], row["run_id"])
        except Unavailable:
            raise
        except Exception as exc:
            service.set_aside(q, service.EXPIRY_SWEEPER, _sweep_key(row), row["task_id"], exc)
            continue
        q.set_aside[service.EXPIRY_SWEEPER].release(_sweep_key(row))
        done += 1
    return done


def _sweep_key(row: Row) -> str:
    return f"live log {row['task_id']}/{row['run_id']}"


async def _delete(q: Queue, task_id: str, run_id: int) -> None:
    """Delete a live log in bounded transactions; the head goes last, so a crash leaves it to retry.

    The head row is locked first, so an append can't slip a chunk in after the last batch.
    """
    while True:
        async with q.storage.transaction() as tx:
            await tx.fetchrow("get_live_log_for_update", task_id, run_id)
            deleted = await tx.execute("delete_live_log_chunks", task_id, run_id, CHUNK_DELETE_BATCH)
            if deleted < CHUNK_DELETE_BATCH:
                await tx.execute("delete_live_log", task_id, run_id)
                return
