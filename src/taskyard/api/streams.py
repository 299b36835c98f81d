"""Answering a `Stream`: send its chunks until they end, the client leaves, or the server gives up.

Sending is a task of its own. A client that stops reading makes a send wait (the server holds
back once its socket's buffers are full), and a waiting send would never see that the stream was
given up on; so the answer waits for whichever comes first (the chunks end, the client hangs up,
the stream's `stop` is set) and cancels the rest. Given up on, the connection is closed without
the end of the response, which tells the client so.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import cast

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from taskyard.api.routing import Stream


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
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await task
            chunks = cast(AsyncGenerator[bytes, None], self._stream.chunks)
            await chunks.aclose()
            self._stream.closed()

    async def _send_all(self, send: Send) -> None:
        async for chunk in self._stream.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
