"""`TaskLog`: generic-worker's line prefixes, live streaming to the server's append route, and a
full disk."""

from __future__ import annotations

import asyncio
import errno
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from taskyard.model.client_errors import Refused
from taskyard.worker import tasklog
from taskyard.worker.tasklog import TaskLog

TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[TaskLog]:
    task_log = TaskLog(tmp_path / "live_backing.log")
    yield task_log
    await task_log.close()


def lines(log: TaskLog) -> list[str]:
    return log.path.read_text().splitlines()


# Prefixes ----------------------------------------------------------------------------------


def test_info_lines_carry_the_time_in_milliseconds(log: TaskLog) -> None:
    log.info("Executing command 0: true")
    assert re.fullmatch(rf"\[taskcluster {TIME}\] Executing command 0: true", lines(log)[0])


def test_warnings_carry_the_time_and_errors_do_not(log: TaskLog) -> None:
    log.warn("careful")
    log.error("broken")
    warn, error = lines(log)
    assert re.fullmatch(rf"\[taskcluster:warn {TIME}\] careful", warn)
    assert error == "[taskcluster:error] broken"


@pytest.mark.parametrize("level", ["info", "warn", "error"])
def test_every_line_of_a_multi_line_message_is_prefixed(log: TaskLog, level: str) -> None:
    getattr(log, level)("one\ntwo\n\nfour\n")
    written = lines(log)
    prefix = written[0].split("] ", 1)[0] + "]"
    assert prefix.startswith("[taskcluster")
    assert written == [f"{prefix} one", f"{prefix} two", f"{prefix} ", f"{prefix} four"]


def test_size_counts_the_bytes_in_the_file(log: TaskLog) -> None:
    log.write("héllo\n".encode())
    log.info("done")
    assert log.size == log.path.stat().st_size
    assert log.write_error is None


# Streaming ---------------------------------------------------------------------------------


@dataclass
class LiveLog:
    """The server's live-log route, in memory: it holds UTF-8 text and answers its byte length."""

    data: bytearray = field(default_factory=bytearray)
    calls: list[tuple[int, str, bool]] = field(default_factory=list)
    misplaced: list[tuple[int, int]] = field(default_factory=list)  # (offset asked, length held)
    fail_on_call: int | None = None
    finished: bool = False

    async def append(self, offset: int, text: str, final: bool) -> int:
        self.calls.append((offset, text, final))
        if len(self.calls) == self.fail_on_call:
            raise Refused(503, "", "the live log is unavailable")
        if offset != len(self.data) or self.finished:
            self.misplaced.append((offset, len(self.data)))
        self.data += text.encode()
        self.finished = final
        return len(self.data)

    @property
    def text(self) -> str:
        return self.data.decode()

    @property
    def finals(self) -> int:
        return sum(1 for _, _, final in self.calls if final)


async def test_streaming_sends_the_log_in_order_and_close_sends_the_rest_once(log: TaskLog) -> None:
    server = LiveLog()
    log.info("before streaming")
    log.stream_to(server.append, interval=0.01)
    for i in range(5):
        log.write(f"line {i}\n".encode())
        await asyncio.sleep(0.02)
    log.write(b"the last words\n")
    await log.close()
    assert server.text == log.path.read_text()
    assert server.misplaced == []
    assert server.finals == 1 and server.calls[-1][2] is True
    assert len(server.calls) > 2  # it streamed while the log grew, not only at close


async def test_close_sends_a_final_append_even_with_nothing_new(log: TaskLog) -> None:
    server = LiveLog()
    log.write(b"all of it\n")
    log.stream_to(server.append, interval=0.01)
    while server.text != "all of it\n":
        await asyncio.sleep(0.01)
    await log.close()
    assert server.calls[-1] == (len(b"all of it\n"), "", True)
    assert server.finals == 1 and server.misplaced == []


async def test_characters_split_across_chunks_arrive_whole(
    log: TaskLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasklog, "CHUNK", 3)  # most chunk boundaries now fall inside a character
    server = LiveLog()
    log.stream_to(server.append, interval=0.001)
    encoded = "aé€𝄞 ünïcödé ✓\n".encode()
    for i in range(len(encoded)):  # one byte at a time: flushes fall between a character's bytes
        log.write(encoded[i : i + 1])
        await asyncio.sleep(0.002)
    await log.close()
    assert server.text == log.path.read_bytes().decode() == encoded.decode()
    assert server.misplaced == []


async def test_invalid_utf8_is_replaced_and_offsets_count_what_the_server_holds(
    log: TaskLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasklog, "CHUNK", 4)
    server = LiveLog()
    raw = b"ok \xff\xfe bytes \xc3( then \xe2\x82"  # ends inside a character
    log.write(raw)
    log.stream_to(server.append, interval=0.01)
    while not server.calls:
        await asyncio.sleep(0.01)
    await log.close()
    assert server.text == raw.decode("utf-8", errors="replace")
    assert server.misplaced == []  # each replacement is 3 bytes on the server for 1 in the file


@pytest.mark.parametrize("failing_call", [1, 2], ids=["while-streaming", "the-final-append"])
async def test_a_failing_append_stops_streaming_with_a_warning_and_close_does_not_raise(
    log: TaskLog, failing_call: int
) -> None:
    server = LiveLog(fail_on_call=failing_call)
    log.write(b"first\n")
    log.stream_to(server.append, interval=0.01)
    while not server.calls:
        await asyncio.sleep(0.01)
    log.write(b"second\n")
    await log.close()
    assert len(server.calls) == failing_call  # nothing more once an append failed
    warning = rf"\[taskcluster:warn {TIME}\] the live log stopped streaming: 503: the live log is unavailable"
    assert [line for line in lines(log) if re.fullmatch(warning, line)] != []
    assert "second" in lines(log)  # the file, the log of record, still has everything


# A full disk -------------------------------------------------------------------------------


class ShortWrites:
    """A file that takes only `room` more bytes, then says so as a short write or ENOSPC."""

    def __init__(self, file: Any, room: int, *, raise_when_full: bool) -> None:
        self._file = file
        self._room = room
        self._raise = raise_when_full

    def write(self, data: bytes) -> int:
        if self._raise and len(data) > self._room:
            raise OSError(errno.ENOSPC, "No space left on device")
        taken = self._file.write(data[: self._room])
        self._room -= taken
        return int(taken)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


@pytest.mark.parametrize("raise_when_full", [False, True], ids=["short-write", "enospc"])
def test_a_full_disk_is_remembered_and_size_counts_only_what_was_written(
    log: TaskLog, raise_when_full: bool
) -> None:
    log.write(b"0123456789")
    log._file = ShortWrites(log._file, room=5, raise_when_full=raise_when_full)  # type: ignore[assignment]
    log.write(b"abcdefghij")
    assert log.write_error is not None and log.write_error.errno == errno.ENOSPC
    written = log.path.read_bytes()
    assert log.size == len(written)
    assert written == (b"0123456789" if raise_when_full else b"0123456789abcde")
    log.write(b"later\n")
    log.error("later too")
    assert log.path.read_bytes() == written and log.size == len(written)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
async def test_a_log_on_a_full_device_records_the_error_and_writes_nothing() -> None:
    log = TaskLog(Path("/dev/full"))
    log.info("hello")
    assert log.write_error is not None and log.write_error.errno == errno.ENOSPC
    assert log.size == 0
    log.write(b"ignored\n")  # does not raise
    await log.close()
