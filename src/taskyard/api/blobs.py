"""The local blob store's own URLs: signed PUT (bounded upload) and GET (streamed download).

These are not TaskCluster API calls: the URL's HMAC signature, not Hawk, is the credential, so
a downloader that followed getArtifact's 303 needs nothing more. An upload URL writes once: the
queue is asked before the body is read, and again before the blob is kept. A download carries
`model/served.py`'s headers: the bytes and their Content-Type are the uploader's, never a page of
ours (no script runs; an active type is an attachment).

With a blob origin (`--blob-origin`), `OriginGate` keeps the two hosts apart: the blob origin's
answers nothing but blobs and live logs, and the UI's host no blobs.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, MalformedRangeHeader, RangeNotSatisfiable, Response
from starlette.routing import Route as StarletteRoute
from starlette.types import Receive, Scope, Send

from taskyard.api.errors import NO_CALL, CallInfo, describe, render
from taskyard.api.limits import check_content_length
from taskyard.artifacts.port import ServedStore
from taskyard.internals.web import parse_range
from taskyard.model import artifacts as rules
from taskyard.model import errors, served, slugid
from taskyard.model.errors import MalformedPayload, ResourceNotFound
from taskyard.queue import artifacts, livelogs
from taskyard.queue.service import Queue

PATH = "/api/queue/v1/_blobs/{key:path}"
PREFIX = PATH.split("{", 1)[0]


class OriginGate:
    """What each host may be asked when blobs have an origin of their own, told by the request's
    Host header (which the proxy in front passes on, as Hawk needs it to): on the blob origin's
    host, blobs and live logs only, so that an uploaded document opened there reaches no API call
    and no UI page on its own origin; elsewhere, no blobs. Live logs stay on the UI's host too:
    the task page follows them there, and their type is ours (text/plain, served sandboxed)."""

    def __init__(self, blob_origin: str) -> None:
        self.host = urlsplit(blob_origin).hostname

    def refusal(self, scope: Scope) -> Response | None:
        """The 404 for a request the host it is addressed to does not serve; None to serve it."""
        path: str = scope["path"]
        blob = path.startswith(PREFIX)
        host = served.host_name(_host_header(scope))
        if host == self.host and not (blob or path.startswith(livelogs.STREAM_PREFIX)):
            problem = "this host serves artifacts and live logs only"
        elif host != self.host and blob:
            problem = "artifacts are served from the deployment's blob origin, not this host"
        else:
            return None
        return render(ResourceNotFound(f"{problem}: {scope['method']} {path[:200]}"), NO_CALL)


def _host_header(scope: Scope) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == b"host":
            return str(value.decode("latin-1"))
    return None


def _store(queue: Queue) -> ServedStore:
    store = queue.blobs
    if not isinstance(store, ServedStore):
        raise ResourceNotFound("this deployment's blob store is not served here")
    return store


def _check_key(key: str) -> tuple[str, int, str]:
    """404 unless `key` names an artifact's blob, `<taskId>/<runId>/<name>`, before any signature
    or file is looked at: only such keys are ever signed, and only they make a file name."""
    target = rules.split_blob_key(key)
    if target is None or not slugid.is_valid(target[0]):
        raise ResourceNotFound("no such blob")
    return target


async def _put(queue: Queue, request: Request) -> Response:
    store = _store(queue)
    key = request.path_params["key"]
    task_id, run_id, name = _check_key(key)
    content_type = request.headers.get("content-type", "")
    encoding = rules.encoding_of_header(request.headers.get("content-encoding"))
    token = store.verify_put(key, dict(request.query_params), content_type, encoding)
    check_content_length(request.headers.get("content-length"), store.max_bytes, "the artifact")
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
    key = request.path_params["key"]
    _check_key(key)
    store.verify_get(key, dict(request.query_params))
    blob = store.open(key)
    headers = {"content-type": blob.content_type, **served.headers_for(blob.content_type)}
    if blob.content_encoding:
        headers["content-encoding"] = blob.content_encoding
    use_range = _check_range(request.headers.get("range"), blob.size)
    return _BlobResponse(blob.path, headers=headers, stat_result=None, use_range=use_range)


def _check_range(value: str | None, size: int) -> bool:
    """Whether the blob's answer honours this Range. A malformed one is ignored and the whole blob
    sent, as S3 does; one beyond the blob is a 416 in our error shape. (FileResponse would answer
    both in plain text; its own parser decides, so the two never disagree.)"""
    if value is None:
        return False
    try:
        parse_range(value, size)
    except MalformedRangeHeader:
        return False
    except RangeNotSatisfiable:
        raise errors.RangeNotSatisfiable(
            f"the Range {value[:80]!r} is not within the blob's {size} bytes"
        ) from None
    return True


class _BlobResponse(FileResponse):
    """A FileResponse that, unless told to honour it, answers as if no Range had been sent."""

    def __init__(self, path: str | os.PathLike[str], *, use_range: bool, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.use_range = use_range

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.use_range:
            scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != b"range"]}
        await super().__call__(scope, receive, send)


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
