"""A task's log: a file on the worker that becomes the backing log, streamed live to the server.

Everything the commands print and the worker's own lines (prefixed as generic-worker's:
`[taskcluster <time>] ...`, `[taskcluster:warn <time>] ...`, `[taskcluster:error] ...`) go to one
file. While the task runs, a flusher sends what is new to the queue's live-log route every
`interval` seconds, so `taskyard task log -f` can follow it from the server. Live-log trouble is
only a warning: the file, uploaded at the end, is the log of record.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import errno
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from taskyard.model import dates
from taskyard.model.client_errors import Refused

log = logging.getLogger(__name__)
CHUNK = 256 * 1024  # bytes per live-log append
Append = Callable[[int, str, bool], Awaitable[int]]  # (offset, text, final) -> length the server holds


def now_iso() -> str:
    return dates.to_iso(dates.now_ms())


def _first_line(exc: Exception) -> str:
    """A refusal's reason, without TaskCluster's block of request details."""
    return str(exc).split("\n", 1)[0].strip() or type(exc).__name__


class TaskLog:
    """Appends to `path`; `stream_to(append)` starts following it to the server."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("ab", buffering=0)
        self.size = 0
        self.write_error: OSError | None = None
        self._sent = 0  # bytes of the file sent to the server
        self._remote = 0  # bytes the server holds (UTF-8 text: not always the file's bytes)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._append: Append | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closed = False

    # Writing ------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Append raw bytes (command output). A full disk is remembered, not raised: the task's
        outcome says so, and the worker goes on."""
        if not data or self.write_error is not None or self._file.closed:
            return
        try:
            written = self._file.write(data) or 0
            if written < len(data):  # a partial write: the next one would fail
                raise OSError(errno.ENOSPC, f"only {written} of {len(data)} bytes could be written")
        except OSError as exc:
            self.write_error = exc
            log.warning("cannot write the task log %s: %s", self.path, exc)
            return
        finally:
            self.size = self._file.tell()
        if self.size - self._sent >= CHUNK:
            self._wake.set()

    def _lines(self, prefix: str, message: str) -> None:
        text = "".join(f"{prefix} {line}\n" for line in message.splitlines() or [""])
        self.write(text.encode())

    def info(self, message: str) -> None:
        self._lines(f"[taskcluster {now_iso()}]", message)

    def warn(self, message: str) -> None:
        self._lines(f"[taskcluster:warn {now_iso()}]", message)

    def error(self, message: str) -> None:
        self._lines("[taskcluster:error]", message)

    def raw_lines(self, lines: list[str]) -> None:
        """Lines already prefixed (the payload validator's)."""
        self.write("".join(f"{line}\n" for line in lines).encode())

    # Streaming ----------------------------------------------------------------------------

    def stream_to(self, append: Append, interval: float) -> None:
        """Send the log to the server every `interval` seconds while it grows (sooner past CHUNK).

        A task done within the first interval never streams: its uploaded log comes as soon, and
        it saves the server three calls per short task."""
        self._append = append
        self._flusher = asyncio.create_task(self._flush_forever(interval), name=f"live-log {self.path.name}")

    async def _flush_forever(self, interval: float) -> None:
        while not self._closed and self._append is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._wake.wait()
            self._wake.clear()
            if not self._closed:
                await self._flush(final=False)

    async def _flush(self, *, final: bool) -> None:
        """Send every byte the server lacks, in chunks; on any refusal stop streaming, with a warning."""
        while self._append is not None and (self._sent < self.size or final):
            data = await asyncio.to_thread(self._read, self._sent, CHUNK)
            if not data and not final:
                return
            last = final and self._sent + len(data) >= self.size
            text = self._decoder.decode(data, final=last)
            try:
                self._remote = await self._append(self._remote, text, last)
            except Exception as exc:  # the live log is a convenience; the backing log is the record
                self._append = None
                if not (isinstance(exc, Refused) and exc.status == 409):
                    self.warn(f"the live log stopped streaming: {_first_line(exc)}")
                # A 409: the run was resolved on the server (canceled, or its claim lost), which
                # closed its live log; the worker's own lines say what happened, once.
                return
            self._sent += len(data)
            if last:
                return

    def _read(self, offset: int, limit: int) -> bytes:
        with self.path.open("rb") as f:
            f.seek(offset)
            return f.read(min(limit, self.size - offset))

    async def close(self) -> None:
        """Stop following and send the rest, marked final. The file stays for the upload."""
        self._closed = True
        if self._flusher is not None:
            self._wake.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            if self._sent > 0:  # a log never streamed has no followers to release
                await self._flush(final=True)
        self._file.close()
