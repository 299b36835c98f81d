"""Every error answer the API gives, rendered here and only here: TaskCluster's `{code, message,
requestInfo}` body, `WWW-Authenticate` on a 401, `Retry-After` when the error says how long to
wait, and a 500 with an incident id for anything unexpected.

`build_app()` registers them once for the whole app: `HANDLERS` with Starlette by exception
class (every `TaskyardError`; the router's 404 and 405 go to `app.not_found()`, which renders
here too; an API endpoint the app's front answers itself goes to `render_for()`), and
`answer_unexpected()` for every other exception (the front, `app.App`, calls it). A route says
what its error bodies' `requestInfo` tells of the call by calling `describe()` with a `CallInfo`
before it does anything that may fail.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ExceptionHandler, Receive, Scope, Send

from taskyard.model import dates, slugid
from taskyard.model.errors import TaskyardError

log = logging.getLogger(__name__)
_SCOPE_KEY = "taskyard.call"  # where a request's scope holds its CallInfo


class CallInfo(NamedTuple):
    """What an error body's `requestInfo` says of the call being answered: TaskCluster's method
    name, the path parameters, and the payload once the body has been read (`echo` shows it as
    the method does, e.g. createTask's with its defaults filled in)."""

    method: str
    params: dict[str, str] = {}  # a tuple's field: shared, never changed
    payload: Any = None
    echo: Callable[[Any], Any] | None = None

    def shown_payload(self) -> Any:
        return self.payload if self.echo is None else self.echo(self.payload)


NO_CALL = CallInfo("")  # a request no route took: an unknown path, a method no route answers


def describe(request: Request, info: CallInfo) -> None:
    """Let the error renderers say what call `request` is (see `CallInfo`)."""
    request.scope[_SCOPE_KEY] = info


def describe_call(scope: Scope, info: CallInfo) -> None:
    """`describe()`, given the request's ASGI scope."""
    scope[_SCOPE_KEY] = info


def _described(scope: Scope) -> CallInfo:
    info = scope.get(_SCOPE_KEY)
    return info if isinstance(info, CallInfo) else NO_CALL


def error_body(error: TaskyardError, *, method: str, params: dict[str, str], payload: Any) -> dict[str, Any]:
    """The JSON body for `error`; the message ends with a footer naming the call, as TaskCluster's do."""
    time = dates.to_iso(dates.now_ms())
    footer = (
        f"\n\n---\n\n* method:     {method}\n* errorCode:  {error.code}\n"
        f"* statusCode: {error.status}\n* time:       {time}"
    )
    return {
        "code": error.code,
        "message": error.message + footer,
        "requestInfo": {"method": method, "params": params, "payload": payload, "time": time},
    }


def render(error: TaskyardError, info: CallInfo) -> Response:
    """The answer for `error`: its status and body, `WWW-Authenticate` on a 401, `Retry-After` when
    the error says how long to wait (a database restarting)."""
    headers = {}
    if error.status == 401:
        headers["www-authenticate"] = "hawk"
    if error.retry_after is not None:
        headers["retry-after"] = str(error.retry_after)
    body = error_body(error, method=info.method, params=info.params, payload=info.shown_payload())
    return _json(body, error.status, headers)


def render_incident(incident: str, info: CallInfo) -> Response:
    """The 500 for an unexpected failure: the incident id, never the exception's text."""
    error = TaskyardError(f"internal error; the incident id is {incident}")
    body = error_body(error, method=info.method, params=info.params, payload=None)
    body["requestInfo"]["incidentId"] = incident
    return _json(body, error.status, {})


def _json(body: dict[str, Any], status: int, headers: dict[str, str]) -> Response:
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


def render_for(error: TaskyardError, scope: Scope) -> Response:
    """`render()` for the call the request's scope was described as (`describe()`)."""
    return render(error, _described(scope))


async def _taskyard_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TaskyardError)
    return render_for(exc, request.scope)


HANDLERS: dict[Any, ExceptionHandler] = {TaskyardError: _taskyard_error}
"""Starlette's exception handlers, by class: every `TaskyardError` a route raises."""


async def answer_unexpected(scope: Scope, receive: Receive, send: Send) -> None:
    """Answer an exception that is no `TaskyardError`, a bug, before the answer began: log it once,
    with its traceback and a new incident id, and answer 500 with that id. Nothing is raised on to
    the server, which would log it a second time. The app's front (`app.App`) calls it, around the
    whole app; an exception after the answer began (a live-log stream) can't be answered: it goes
    on to the server, which logs it and closes the connection."""
    incident = slugid.nice()
    request = Request(scope)
    log.exception("incident %s: %s %s failed", incident, request.method, request.url.path)
    await render_incident(incident, _described(scope))(scope, receive, send)
