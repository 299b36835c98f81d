"""The local blob store's own URLs: signed PUT (bounded upload) and GET (streamed download).

These are not TaskCluster API calls: the URL's HMAC signature, not Hawk, is the credential, so
a downloader that followed getArtifact's 303 needs nothing more. An upload URL writes once: the
queue is asked before the body is read, and again before the blob is kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route as StarletteRoute

from taskyard.api.errors import CallInfo, describe
from taskyard.api.limits import check_content_length
from taskyard.artifacts.port import ServedStore
from taskyard.model import artifacts as rules
from taskyard.model.errors import MalformedPayload, ResourceNotFound
from taskyard.queue import artifacts
from taskyard.queue.service import Queue

PATH = "/api/queue/v1/_blobs/{key:path}"


def _store(queue: Queue) -> ServedStore:
    store = queue.blobs
    if not isinstance(store, ServedStore):
        raise ResourceNotFound("this deployment's blob store is not served here")
    return store


def _check_key(key: str) -> str:
    if key.count("/") < 2:
        raise ResourceNotFound("no such blob")
    return key


async def _put(queue: Queue, request: Request) -> Response:
    store = _store(queue)
    key = _check_key(request.path_params["key"])
    content_type = request.headers.get("content-type", "")
    encoding = rules.encoding_of_header(request.headers.get("content-encoding"))
    token = store.verify_put(key, dict(request.query_params), content_type, encoding)
    check_content_length(request.headers.get("content-length"), store.max_bytes, "the artifact")
    target = rules.split_blob_key(key)
    if target is None:  # signed, so never; but a key is no artifact until it says which
        raise ResourceNotFound("no such blob")
    task_id, run_id, name = target
    await artifacts.check_upload(queue, task_id, run_id, name, token)

    async def commit() -> None:
        await artifacts.record_upload(queue, task_id, run_id, name, token)

    stored_encoding = None if encoding == rules.IDENTITY else encoding
    await store.write(key, _body(request), content_type, stored_encoding, commit)
    return Response(status_code=200)


async def _body(request: Request) -> AsyncIterator[bytes]:
    """The upload's chunks; a client that hangs up mid-body is a 400, and the URL stays unused."""
    try:
        async for chunk in request.stream():
            yield chunk
    except ClientDisconnect:
        raise MalformedPayload("the client hung up before sending the whole body") from None


async def _get(queue: Queue, request: Request) -> Response:
    store = _store(queue)
    key = _check_key(request.path_params["key"])
    store.verify_get(key, dict(request.query_params))
    blob = store.open(key)
    headers = {"content-type": blob.content_type}
    if blob.content_encoding:
        headers["content-encoding"] = blob.content_encoding
    return FileResponse(blob.path, headers=headers, stat_result=None)


def routes(queue: Queue) -> list[StarletteRoute]:
    """The blob routes of `queue`'s store; their error bodies name the call `blobPut` or `blobGet`."""

    def handler(method: str) -> Callable[[Request], Awaitable[Response]]:
        act = _put if method == "PUT" else _get
        info = CallInfo(f"blob{method.title()}")

        async def handle(request: Request) -> Response:
            describe(request, info)
            return await act(queue, request)

        return handle

    return [
        StarletteRoute(PATH, handler("PUT"), methods=["PUT"]),
        StarletteRoute(PATH, handler("GET"), methods=["GET", "HEAD"]),
    ]
