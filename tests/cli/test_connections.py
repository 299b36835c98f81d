"""The server's connection transport sends a response's head with its body, in one write, and
never reorders or loses bytes: a head alone goes out at the loop's next turn, and before a close."""

from __future__ import annotations

import asyncio
from typing import Any

from taskyard.cli.connections import _HeadWithBody


class Recording(asyncio.Transport):
    """A transport that keeps what was written to it, one entry per write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def write_eof(self) -> None:
        self.writes.append(b"<eof>")

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default


HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


async def test_a_head_and_its_body_go_out_in_one_write() -> None:
    inner = Recording()
    transport = _HeadWithBody(inner, asyncio.get_running_loop())
    transport.write(HEAD)
    assert inner.writes == []
    transport.write(b"{}")
    transport.write(b"more")  # a later write goes straight through
    assert inner.writes == [HEAD + b"{}", b"more"]
    await asyncio.sleep(0)  # the flush scheduled for the head finds nothing held
    assert inner.writes == [HEAD + b"{}", b"more"]


async def test_a_head_without_a_body_goes_out_at_the_next_turn_or_before_a_close() -> None:
    inner = Recording()
    transport = _HeadWithBody(inner, asyncio.get_running_loop())
    transport.write(b"HTTP/1.1 204 No Content\r\n\r\n")
    await asyncio.sleep(0)
    assert inner.writes == [b"HTTP/1.1 204 No Content\r\n\r\n"]
    transport.write(HEAD)
    transport.close()
    assert inner.writes[-1] == HEAD and inner.closed


async def test_other_ways_of_writing_keep_the_order() -> None:
    inner = Recording()
    transport = _HeadWithBody(inner, asyncio.get_running_loop())
    transport.write(HEAD)
    transport.writelines([b"{", b"}"])
    transport.write(HEAD)
    transport.write_eof()
    assert inner.writes == [HEAD + b"{}", HEAD, b"<eof>"]


async def test_the_rest_is_the_transports_own() -> None:
    inner = Recording()
    transport = _HeadWithBody(inner, asyncio.get_running_loop())
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)
    transport.write(b"body bytes, not a head")
    assert inner.writes == [b"body bytes, not a head"]
