"""The end of a run's log, read on the server for the task page (`api/pages.py`, `TASK_LOG`).

The log's artifact has been followed by the queue's own `artifacts.follow`, with the caller's
scopes checked on every name of its link chain, before anything here runs. What is read: the
stored chunks of a live log (a `reference` to this server's live stream), or the blob of an
uploaded log (gzip-decoded). Only the last TAIL_BYTES are kept.
"""

from __future__ import annotations

import asyncio
import gzip
import urllib.request
import zlib
from collections import deque
from typing import IO

from taskyard.artifacts.port import ServedStore
from taskyard.model import dates
from taskyard.model.artifacts import Artifact
from taskyard.model.errors import ResourceNotFound, TaskyardError
from taskyard.queue import artifacts, livelogs
from taskyard.queue.service import Queue

TAIL_BYTES = 1024 * 1024  # the most of a log a page shows
LINE_SEARCH = 64 * 1024  # a shown tail starts at a line's start if one begins this close
MAX_READ_BYTES = 128 * 1024 * 1024  # a longer (decompressed) log is not read at all: linked only
READ_CHUNK = 256 * 1024
FETCH_TIMEOUT = 30.0


class Tail:
    """The last `limit` bytes of what is added (roughly: whole chunks are dropped), and the total."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self.total = 0
        self._chunks: deque[bytes] = deque()
        self._held = 0
        self._lines_dropped: int | None = 0  # line breaks in the bytes let go (None: not all seen)

    def add(self, data: bytes) -> None:
        self._chunks.append(data)
        self.total += len(data)
        self._held += len(data)
        while self._held - len(self._chunks[0]) >= self.limit:
            dropped = self._chunks.popleft()
            self._held -= len(dropped)
            if self._lines_dropped is not None:
                self._lines_dropped += dropped.count(b"\n")

    def unseen_start(self, total: int) -> None:
        """The first `total` bytes were never read (a live log's): counted, their lines unknown."""
        self.total = total
        if total:
            self._lines_dropped = None

    def first_line(self, shown: bytes) -> int | None:
        """The number (from 1) of the line `shown` (this tail's `data()`) starts with in the whole
        log; None if bytes before it were never read."""
        if self._lines_dropped is None:
            return None
        held = b"".join(self._chunks)
        return self._lines_dropped + held.count(b"\n", 0, len(held) - len(shown)) + 1

    def data(self) -> bytes:
        """The kept bytes; a cut tail starts after its first line break if one is near."""
        data = b"".join(self._chunks)
        if len(data) <= self.limit:
            return data
        data = data[-self.limit :]
        newline = data.find(b"\n", 0, LINE_SEARCH)
        return data[newline + 1 :] if newline >= 0 else data


async def tail_of(q: Queue, found: Artifact) -> Tail | str:
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


def stream_path(q: Queue, found: Artifact) -> str:
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
                tail.unseen_start(offset)  # the bytes before the first chunk read
                first = False
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
