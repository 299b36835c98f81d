"""A run's log for the task page: found as `taskyard task log` finds it, read on the server.

The log is the run's live-log artifact (`public/logs/live.log` unless the payload's `logs.live`
names another). While the run is running it is a `reference` to the queue's live stream; once the
worker is done it is a `link` to the uploaded backing log (`public/logs/live_backing.log`). The
server follows the same links the API's getArtifact follows (`queue.artifacts.follow`), with the
scopes of an anonymous reader, so the page never shows a log the API would refuse to show, and reads
the bytes: the stored chunks of a live log, or the blob of the backing log (gzip-decoded). Only the
last TAIL_BYTES are kept and rendered; the page says how much is hidden and links the whole log.
"""

from __future__ import annotations

import asyncio
import gzip
import urllib.request
import zlib
from collections import deque
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import quote

from markupsafe import Markup

from taskyard.artifacts.port import ServedStore
from taskyard.model import dates
from taskyard.model.artifacts import Artifact, check_name
from taskyard.model.errors import (
    InputError,
    InsufficientScopes,
    ResourceExpired,
    ResourceNotFound,
    TaskyardError,
)
from taskyard.model.guard import Guard
from taskyard.queue import artifacts, livelogs
from taskyard.queue.service import Queue
from taskyard.ui import ansi

LIVE_LOG = "public/logs/live.log"  # the worker's names (worker/payload.py), and `taskyard task log`'s
BACKING_LOG = "public/logs/live_backing.log"
TAIL_BYTES = 1024 * 1024  # the most of a log a page shows
LINE_SEARCH = 64 * 1024  # a shown tail starts at a line's start if one begins this close
MAX_READ_BYTES = 128 * 1024 * 1024  # a longer (decompressed) log is not read at all: linked only
READ_CHUNK = 256 * 1024
FETCH_TIMEOUT = 30.0


@dataclass(frozen=True)
class Log:
    """What the page shows of a run's log: its text (or why there is none) and where it is whole."""

    run_id: int
    name: str
    url: str  # the artifact's URL at the queue (a 303 to the content)
    live: bool  # the run is running: the page follows the stream
    html: Markup | None  # the shown part, rendered (None: nothing to show)
    total: int  # bytes in the whole log (0 when unread)
    shown: int  # bytes of it shown
    note: str  # why nothing is shown, or empty
    stream: str = ""  # the live stream's signed URL (a path of this server), when `html` was read from it

    @property
    def hidden(self) -> int:
        return self.total - self.shown


def log_name(definition: Any) -> str:
    """The live log's name: the payload's `logs.live` if it names one, else the worker's default."""
    payload = definition.get("payload") if isinstance(definition, dict) else None
    logs = payload.get("logs") if isinstance(payload, dict) else None
    live = logs.get("live") if isinstance(logs, dict) else None
    if not isinstance(live, str):
        return LIVE_LOG
    try:
        return check_name(live)
    except InputError:  # the worker refuses such a payload: its log has the default name
        return LIVE_LOG


def artifact_url(task_id: str, run_id: int, name: str) -> str:
    """Where the queue answers the artifact (getArtifact): a 303 to its content."""
    # Each segment percent-encoded, `.` too, so that no browser or proxy collapses it away.
    path = "/".join("%2E" if part == "." else quote(part, safe="") for part in name.split("/"))
    return f"/api/queue/v1/task/{task_id}/runs/{run_id}/artifacts/{path}"


class Tail:
    """The last `limit` bytes of what is added (roughly: whole chunks are dropped), and the total."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self.total = 0
        self._chunks: deque[bytes] = deque()
        self._held = 0

    def add(self, data: bytes) -> None:
        self._chunks.append(data)
        self.total += len(data)
        self._held += len(data)
        while self._held - len(self._chunks[0]) >= self.limit:
            self._held -= len(self._chunks.popleft())

    def data(self) -> bytes:
        """The kept bytes; a cut tail starts after its first line break if one is near."""
        data = b"".join(self._chunks)
        if len(data) <= self.limit:
            return data
        data = data[-self.limit :]
        newline = data.find(b"\n", 0, LINE_SEARCH)
        return data[newline + 1 :] if newline >= 0 else data


async def read(q: Queue, task_id: str, run_id: int, state: str, name: str, guard: Guard) -> Log:
    """The run's log as the page shows it (`state`: the run's)."""
    url = artifact_url(task_id, run_id, name)
    running = state == "running"

    def note(text: str) -> Log:
        return Log(run_id, name, url, running, None, 0, 0, text)

    try:
        found = await artifacts.follow(q, task_id, run_id, name, guard=guard)
    except ResourceNotFound:
        if running:
            return note("The log shows here once the worker sends its first lines.")
        if state == "pending":
            return note("The log shows here once a worker runs the task.")
        return note(f"This run has no artifact {name}.")
    except InsufficientScopes:
        return note(
            f"The log {name} is not public: sign in as a client that may read it, "
            "or download it with credentials that may."
        )
    except (ResourceExpired, InputError) as exc:
        return note(exc.message)
    tail = await _tail_of(q, found)
    if isinstance(tail, str):
        return note(tail)
    shown = tail.data()
    return Log(
        run_id,
        name,
        url,
        running,
        ansi.bytes_to_html(shown),
        tail.total,
        len(shown),
        "",
        _stream_path(q, found),
    )


async def _tail_of(q: Queue, found: Artifact) -> Tail | str:
    """The log's last bytes, or why they can't be read here."""
    if found.storage_type == "error":
        return f"The log is an error artifact: {found.details.get('reason')}: {found.details.get('message')}"
    if found.storage_type == "reference":
        if not _is_live_stream(q, found):
            return "The log is a reference to another site: follow the link to read it."
        return await _live_tail(q, found.task_id, found.run_id)
    try:
        return await asyncio.to_thread(_blob_tail, q, found)
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        return f"The log's content can't be read here ({type(exc).__name__}): download it instead."
    except ResourceNotFound:
        return "The log's content was never uploaded."
    except TaskyardError as exc:  # no blob store here, say
        return f"The log's content can't be read here: {exc.message}"


def _stream_path(q: Queue, found: Artifact) -> str:
    """The signed URL of the live stream `found` refers to, as a path of this server; else ''."""
    if found.storage_type != "reference" or not _is_live_stream(q, found):
        return ""
    assert q.live_log_urls is not None
    return str(found.details["url"])[len(q.live_log_urls.root_url) :]


def _is_live_stream(q: Queue, found: Artifact) -> bool:
    urls = q.live_log_urls
    prefix = f"{livelogs.STREAM_PREFIX}{found.task_id}/{found.run_id}?"
    return urls is not None and str(found.details.get("url", "")).startswith(urls.root_url + prefix)


async def _live_tail(q: Queue, task_id: str, run_id: int) -> Tail:
    """The end of what the live log holds so far: only the chunks that can hold its last TAIL_BYTES
    are read (a chunk holds at most MAX_CHUNK_BYTES), the bytes before them only counted."""
    async with q.storage.reader() as session:
        head = await session.fetchrow("get_live_log", task_id, run_id)
    start = max(0, (head["length"] if head is not None else 0) - TAIL_BYTES - livelogs.MAX_CHUNK_BYTES)
    tail, position, first = Tail(), start, True
    while True:
        chunks = await livelogs.read_chunks(q, task_id, run_id, position)
        for offset, data in chunks:
            encoded = data.encode()
            if first:
                tail.total, first = offset, False  # the bytes before the first chunk read
            tail.add(encoded)
            position = offset + len(encoded)
        if len(chunks) < livelogs.READ_BATCH:
            return tail


def _blob_tail(q: Queue, found: Artifact) -> Tail | str:
    """The backing log's last bytes: from the served store's file, or fetched from its URL."""
    store = artifacts.blobs(q)
    if isinstance(store, ServedStore):
        stored = store.open(found.blob_key)
        with stored.path.open("rb") as raw:
            return _read_tail(raw, stored.content_encoding == "gzip")
    url = store.get_url(found.blob_key, int(q.clock()) + 5 * dates.MINUTE)
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT) as response:
        return _read_tail(response, response.headers.get("content-encoding") == "gzip")


def _read_tail(raw: IO[bytes], gzipped: bool) -> Tail | str:
    source: gzip.GzipFile | IO[bytes] = gzip.GzipFile(fileobj=raw) if gzipped else raw
    tail = Tail()
    while data := source.read(READ_CHUNK):
        tail.add(data)
        if tail.total > MAX_READ_BYTES:
            return f"The log is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB: download it to read it."
    return tail
