"""Answering a `Stream`: send its chunks until they end, the client leaves, or the server gives up.

Sending is a task of its own. A client that stops reading makes a send wait (the server holds
back once its socket's buffers are full), and a waiting send would never see that the stream was
given up on; so the answer waits for whichever comes first (the chunks end, the client hangs up,
the stream's `stop` is set) and cancels the rest.

What a client that reads slowly, or not at all, makes the server hold is bounded: the stream's
source holds at most so much for it (the event feed's `buffer`; a live log is read as it is
sent), a chunk is only written once the connection's buffer has room, and a chunk that waits more
than `SEND_TIMEOUT` seconds for room gives the stream up. A stream given up on (`stop`) is sent
its `farewell` (for the event stream, an SSE `dropped` event telling the client to reconnect with
its last id) and the end of the response, if the client takes them within `FAREWELL_SECONDS`;
otherwise the connection is closed without the end of the response, which tells the client so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from typing import cast

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from taskyard.api.routing import Stream

log = logging.getLogger(__name__)
SEND_TIMEOUT = 60.0  # seconds a chunk may wait for a client that does not read
FAREWELL_SECONDS = 1.0  # seconds a stream given up on waits for its client to take the farewell


class StreamAnswer(Response):
    def __init__(self, stream: Stream) -> None:
        super().__init__(None, 200, stream.headers, stream.media_type)
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]  # it has none
        self._stream = stream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        sending = asyncio.create_task(self._send_all(send))
        leaving = asyncio.create_task(_disconnected(receive))
        stopping = asyncio.create_task(self._stream.stop.wait())
        tasks = {sending, leaving, stopping}
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            sent_all = sending.done() and not sending.cancelled() and sending.exception() is None
            given_up = self._stream.stop.is_set() and not sent_all and not leaving.done()
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await task
            chunks = cast(AsyncGenerator[bytes, None], self._stream.chunks)
            await chunks.aclose()
            self._stream.closed()
        if given_up:
            await self._say_farewell(send)

    async def _say_farewell(self, send: Send) -> None:
        """The farewell and the end of the response, if the client takes them soon."""
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(FAREWELL_SECONDS):
                if self._stream.farewell:
                    await send(
                        {"type": "http.response.body", "body": self._stream.farewell, "more_body": True}
                    )
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _send_all(self, send: Send) -> None:
        async for chunk in self._stream.chunks:
            await send_in_time(send, {"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def send_in_time(send: Send, message: Message) -> None:
    """`send(message)`, given up (TimeoutError) if the client takes no data for `SEND_TIMEOUT` s."""
    try:
        async with asyncio.timeout(SEND_TIMEOUT):
            await send(message)
    except TimeoutError:
        log.warning("gave up on a stream: its client took no data for %s s", SEND_TIMEOUT)
        raise


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
