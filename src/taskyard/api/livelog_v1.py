"""The live-log stream: `GET /api/queue/v1/_livelog/<taskId>/<runId>?e=<expires>&s=<signature>`.

Not a TaskCluster API call: like the local blob store's URLs, the URL's HMAC signature is the
credential, so whoever followed the live-log artifact's 303 (a browser, curl, `taskyard task
log -f`) needs nothing more. `follow=0` answers what is stored and ends; otherwise the stream
stays open, sending each chunk as it is appended, until the log is closed or its run resolved.
`start=N` begins at byte N of the log instead of its first (the task page starts at its last
megabyte): the query is not signed, so any start may be asked of a URL one holds.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route as StarletteRoute
from starlette.types import Message, Receive, Scope, Send

from taskyard.api.errors import CallInfo, describe
from taskyard.api.routing import check_params
from taskyard.api.streams import send_in_time
from taskyard.model import digits, served
from taskyard.model.errors import InvalidRequestArguments
from taskyard.queue import livelogs
from taskyard.queue.service import Queue

PATH = "/api/queue/v1/_livelog/{taskId}/{runId}"
RUN_ID_DIGITS = 6  # runs are numbered below 50; a signed URL only ever names a real one
START_DIGITS = 18  # a byte offset below 10**18 (a log is far smaller)
# No proxy may hold chunks back; the text is the worker's, served as uploaded bytes are (model/served.py).
HEADERS = {
    "cache-control": "no-store",
    "x-accel-buffering": "no",
    **served.headers_for(livelogs.CONTENT_TYPE),
}


class FollowingResponse(StreamingResponse):
    """Streams the log, setting `gone` when the client disconnects so the follower stops waiting.

    A chunk the client takes no room for within `streams.SEND_TIMEOUT` seconds ends the stream.
    Under ASGI 2.4 servers (uvicorn), Starlette's own streaming notices a disconnect only when a
    send fails, and an idle follower sends nothing; cancelling the stream instead, as it does
    under older servers, could interrupt it in the middle of a query.
    """

    def __init__(
        self, queue: Queue, task_id: str, run_id: int, *, keep_following: bool, start: int = 0
    ) -> None:
        self.gone = asyncio.Event()
        self._chunks = livelogs.follow(
            queue, task_id, run_id, keep_following=keep_following, gone=self.gone, start=start
        )
        super().__init__(self._chunks, headers=HEADERS, media_type=livelogs.CONTENT_TYPE)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = asyncio.create_task(_watch_disconnect(receive, self.gone))

        async def send_chunk(message: Message) -> None:
            await send_in_time(send, message)

        try:
            await self.stream_response(send_chunk)
        except OSError:
            # The client went away while we sent (ASGI 2.4 servers say so this way), or took
            # nothing for SEND_TIMEOUT s (TimeoutError): the connection is closed unfinished.
            pass
        finally:
            watcher.cancel()
            await self._chunks.aclose()


async def _watch_disconnect(receive: Receive, gone: asyncio.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


async def _get(queue: Queue, request: Request) -> Response:
    task_id, run = request.path_params["taskId"], request.path_params["runId"]
    check_params({"taskId": task_id})  # only real tasks' URLs are signed; others never reach storage
    run_id = digits.parse_whole(run, RUN_ID_DIGITS)
    if run_id is None:
        raise InvalidRequestArguments(f"URL parameter runId {run[:40]!r} must be a whole number")
    query = dict(request.query_params)
    livelogs.verify_url(queue, task_id, run, query)  # a signed URL names a real task and run
    start = digits.parse_whole(query.get("start", "0"), START_DIGITS)
    if start is None:
        raise InvalidRequestArguments(f"query start {query['start'][:40]!r} must be a whole number of bytes")
    await livelogs.check_exists(queue, task_id, run_id)
    return FollowingResponse(queue, task_id, run_id, keep_following=query.get("follow") != "0", start=start)


def routes(queue: Queue) -> list[StarletteRoute]:
    """The stream route of `queue`'s live logs; its error bodies name the call `liveLog`."""

    async def handle(request: Request) -> Response:
        describe(request, CallInfo("liveLog", {k: str(v) for k, v in request.path_params.items()}))
        return await _get(queue, request)

    return [StarletteRoute(PATH, handle, methods=["GET"])]
