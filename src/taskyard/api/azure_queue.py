"""taskyard's Azure Queue Storage endpoint: the poll protocol's queues, at
`/api/queue/v1/_azure/<queue>/messages`.

Not a TaskCluster call: the URL's SAS (`sv`, `st`, `se`, `sp`, `sig`), not Hawk, is the credential,
and answers and errors are Azure's (XML, `x-ms-*` headers), so that Azure's own clients and the
workers of the seeds' era work unchanged. Get Messages, Peek Messages, Delete Message and Update
Message are served; putting or clearing messages is the queue's alone (403, as for a SAS without
that permission). The operations are in `queue/poll.py`, the formats in `model/azure_queue.py`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.routing import Route as StarletteRoute

from taskyard.model import azure_queue, dates
from taskyard.model.azure_queue import AzureError
from taskyard.model.errors import TaskyardError
from taskyard.queue import poll
from taskyard.queue.service import Queue

QUEUE_NAME = re.compile(r"[a-z0-9](?:[a-z0-9]|-(?!-)){1,61}[a-z0-9]")
PREFIX = poll.PATH_PREFIX
MAX_UPDATE_BODY = 96 * 1024  # a 64 KiB message, base64 and XML around it
XML_TYPE = "application/xml"
Operation = Callable[[Queue, Request, str], Awaitable[Response]]


def _headers(request: Request, request_id: str) -> dict[str, str]:
    version = request.headers.get("x-ms-version", "")
    return {
        "x-ms-request-id": request_id,
        "x-ms-version": version if re.fullmatch(r"\d{4}-\d{2}-\d{2}", version) else azure_queue.SAS_VERSION,
        "cache-control": "no-cache",
    }


def _query(request: Request) -> dict[str, str]:
    return dict(request.query_params)


async def _get(queue: Queue, request: Request, name: str) -> Response:
    if request.method == "HEAD":  # Starlette routes HEAD with GET; it must not receive messages
        raise AzureError(405, "UnsupportedHttpVerb", "The resource doesn't support specified Http Verb.")
    query = _query(request)
    if query.get("peekonly", "").lower() == "true":
        messages = await poll.peek_messages(queue, name, query)
    else:
        messages = await poll.get_messages(queue, name, query)
    return Response(azure_queue.messages_xml(messages), 200, media_type=XML_TYPE)


async def _delete(queue: Queue, request: Request, name: str) -> Response:
    await poll.delete_message(queue, name, request.path_params["message_id"], _query(request))
    return Response(status_code=204)


async def _update(queue: Queue, request: Request, name: str) -> Response:
    text = _message_text(await _body(request))
    receipt, visible = await poll.update_message(
        queue, name, request.path_params["message_id"], _query(request), text
    )
    headers = {"x-ms-popreceipt": receipt, "x-ms-time-next-visible": azure_queue.http_date(visible)}
    return Response(status_code=204, headers=headers)


async def _refused(queue: Queue, request: Request, name: str) -> Response:
    """Put Message and Clear Messages: the queue writes its own messages."""
    raise azure_queue.permission_mismatch(
        "Messages on this queue are put and cleared by taskyard's queue only."
    )


async def _body(request: Request) -> bytes:
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_UPDATE_BODY:
                raise AzureError(413, "RequestBodyTooLarge", "The request body is too large.")
            chunks.append(chunk)
    except ClientDisconnect:
        raise AzureError(400, "InvalidInput", "The client hung up before sending the whole body.") from None
    return b"".join(chunks)


def _message_text(body: bytes) -> str | None:
    """The `MessageText` of an Update Message body; None without a body."""
    if not body.strip():
        return None
    import xml.etree.ElementTree as ElementTree  # only Update Message reads XML: not at start-up

    try:
        root = ElementTree.fromstring(body)
    except (ElementTree.ParseError, ValueError):
        raise AzureError(400, "InvalidXmlDocument", "XML specified is not syntactically valid.") from None
    text = root.findtext("MessageText") if root.tag == "QueueMessage" else None
    if text is None:
        raise AzureError(400, "InvalidXmlDocument", "The XML has no QueueMessage with a MessageText.")
    return text


def _answer_error(error: AzureError, request: Request, request_id: str) -> Response:
    headers = {**_headers(request, request_id), "x-ms-error-code": error.code}
    body = azure_queue.error_xml(error, request_id, dates.now_ms())
    if request.method == "HEAD":
        body = b""
    return Response(body, error.status, headers, media_type=XML_TYPE)


def _as_azure(exc: TaskyardError) -> AzureError:
    """A storage error (a database restarting: 503) in Azure's words."""
    if exc.status == 503:
        return AzureError(
            503, "ServerBusy", "The server is currently unable to receive requests. Please retry."
        )
    return AzureError(exc.status, "InternalError", "The server encountered an internal error. Please retry.")


def _handler(queue: Queue, operation: Operation) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        request_id = str(uuid.uuid4())
        try:
            name = request.path_params["queue"]
            if not QUEUE_NAME.fullmatch(name):
                raise AzureError(
                    400, "InvalidResourceName", "The specifed resource name contains invalid characters."
                )
            response = await operation(queue, request, name)
        except AzureError as error:
            return _answer_error(error, request, request_id)
        except TaskyardError as exc:
            return _answer_error(_as_azure(exc), request, request_id)
        response.headers.update(_headers(request, request_id))
        return response

    return handle


async def _unsupported(request: Request) -> Response:
    error = AzureError(405, "UnsupportedHttpVerb", "The resource doesn't support specified Http Verb.")
    return _answer_error(error, request, str(uuid.uuid4()))


def unmatched(request: Request) -> Response:
    """A path under the prefix that no route takes (a control character in it, a method no
    operation has): Azure's 400 InvalidUri."""
    error = AzureError(400, "InvalidUri", "The requested URI does not represent any resource on the server.")
    return _answer_error(error, request, str(uuid.uuid4()))


async def _no_such_resource(request: Request) -> Response:
    error = AzureError(400, "InvalidUri", "The requested URI does not represent any resource on the server.")
    return _answer_error(error, request, str(uuid.uuid4()))


def routes(queue: Queue) -> list[BaseRoute]:
    """The Azure-queue routes of `queue`'s poll queues, under one prefix (other requests pay a single
    prefix check for them); every answer, errors too, in Azure's format."""
    every = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
    inner = [
        StarletteRoute("/{queue}/messages", _handler(queue, _get), methods=["GET"]),
        StarletteRoute("/{queue}/messages", _handler(queue, _refused), methods=["POST", "DELETE"]),
        StarletteRoute("/{queue}/messages/{message_id}", _handler(queue, _delete), methods=["DELETE"]),
        StarletteRoute("/{queue}/messages/{message_id}", _handler(queue, _update), methods=["PUT"]),
        StarletteRoute("/{queue}/messages", _unsupported, methods=["PUT", "PATCH", "OPTIONS"]),
        StarletteRoute(
            "/{queue}/messages/{message_id}",
            _unsupported,
            methods=["GET", "HEAD", "POST", "PATCH", "OPTIONS"],
        ),
        StarletteRoute("/{rest:path}", _no_such_resource, methods=every),
    ]
    return [
        Mount(poll.PATH_PREFIX, routes=inner),
        StarletteRoute(poll.PATH_PREFIX, _no_such_resource, methods=every),
    ]
