"""The ASGI application: routes of every service, body limits, authentication and error mapping."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route as StarletteRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from taskyard.api import (
    artifacts_v1,
    auth_v1,
    authz,
    azure_queue,
    blobs,
    events_v1,
    index,
    livelog_v1,
    metrics,
    openapi,
    queue_v1,
    scheduler_v1,
    shedding,
)
from taskyard.api.errors import HANDLERS, NO_CALL, CallInfo, describe, render
from taskyard.api.limits import check_content_length
from taskyard.api.router import IndexedRouter, RawPathRoute
from taskyard.api.routing import Call, Reply, Route, Stream, check_params
from taskyard.api.streams import StreamAnswer
from taskyard.auth import hawk, static
from taskyard.auth.service import Auth
from taskyard.events.feed import EventFeed
from taskyard.model import dates, schema, task_definition
from taskyard.model.errors import (
    InputTooLarge,
    InputValidationError,
    InvalidRequestArguments,
    MalformedPayload,
    ResourceNotFound,
    TaskyardError,
)
from taskyard.queue.service import Queue
from taskyard.scheduler.service import Scheduler
from taskyard.ui import app as ui_app


@dataclass
class Services:
    """What the routes need: the queue, the auth service (clients, roles, Hawk), the task-graph
    scheduler and the body limit."""

    queue: Queue
    auth: Auth
    scheduler: Scheduler
    max_body_bytes: int = 10 * 1024 * 1024
    started: float = field(default_factory=time.monotonic)
    skip_auth: bool = False  # benchmarks only: see ServerConfig.bench_skip_auth
    root_url: str | None = None  # the deployment's, for the page `/` (None: the request's)
    events: EventFeed | None = None  # the HTTP event stream's feed (None: this app serves no stream)
    limits: shedding.Limits = field(
        default_factory=shedding.Limits
    )  # what one process takes at once (api/shedding.py)

    async def authenticate(self, request: hawk.Request) -> hawk.Authenticated | None:
        """Who signed `request` (None: nobody); 401 AuthenticationFailed if the signature is refused."""
        return await self.auth.authenticate(request)

    async def expand(self, scopes: Iterable[str]) -> list[str]:
        """Role-expand `scopes` with the deployment's roles."""
        return await self.auth.expand(scopes)

    def uptime(self) -> float:
        return round(time.monotonic() - self.started, 3)


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    content = b"" if body is None else orjson.dumps(body)
    return Response(content, status, headers, media_type=None if body is None else "application/json")


async def read_body(request: Request, limit: int) -> bytes:
    check_content_length(request_headers(request.scope).get("content-length"), limit, "the request body")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise InputTooLarge(f"the request body is larger than {limit} bytes, the most accepted")
            chunks.append(chunk)
    except ClientDisconnect:  # nobody will read the answer; it is no incident either
        raise MalformedPayload("the client hung up before sending the whole body") from None
    return b"".join(chunks)


MAX_DEPTH = 64


def parse_json(raw: bytes, route: Route) -> Any:
    if route.method in ("GET", "HEAD", "DELETE") or (not raw.strip() and route.edge_input is None):
        return None
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MalformedPayload(f"the request body is not valid JSON: {exc}") from None
    if _depth(body) > MAX_DEPTH:
        raise InputValidationError(f"body is nested more than {MAX_DEPTH} levels deep, the most accepted")
    return body


def _depth(value: Any) -> int:
    """How deeply `value` nests, without recursion (bodies may be hostile)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        if children:
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                return depth
            stack.extend((child, depth + 1) for child in children)
    return deepest


def request_headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name, the first of any repeated one (as Starlette's
    `Headers` answers them), built once per request."""
    found: dict[str, str] = scope.get(_HEADERS_KEY) or {}
    if not found:
        for key, value in scope["headers"]:
            found.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
        scope[_HEADERS_KEY] = found
    return found


_HEADERS_KEY = "taskyard.headers"


def hawk_request(request: Request, raw: bytes) -> hawk.Request:
    scope, headers = request.scope, request_headers(request.scope)
    raw_path = scope.get("raw_path")
    path = request.url.path if raw_path is None else raw_path.decode("latin-1")
    query = scope.get("query_string", b"").decode("latin-1")
    host, port = hawk.host_port(
        headers.get("host"),
        scope.get("scheme", "http"),
        headers.get("x-forwarded-port"),
        headers.get("x-forwarded-proto"),
    )
    return hawk.Request(
        method=scope["method"],
        resource=path + ("?" + query if query else ""),
        host=host,
        port=port,
        authorization=headers.get("authorization"),
        body=raw,
        content_type=headers.get("content-type", ""),
    )


class UncheckedScopes(Exception):
    """A handler answered without checking its route's scopes: a bug, answered as a 500."""


async def _authenticate(services: Services, route: Route, signed: hawk.Request) -> authz.Caller:
    if route.scopes is None:
        return authz.Caller(None, ())
    if services.skip_auth:
        return authz.Caller(static.ROOT_CLIENT_ID, ("*",), unchecked=True)
    who = await services.authenticate(signed)
    role_set = await services.auth.role_set()
    if who is None:
        return authz.caller(None, (), role_set.expand)
    return authz.caller(who.client_id, who.unexpanded_scopes, role_set.expand)


async def _watch_disconnect(request: Request, gone: asyncio.Event) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
    gone.set()


async def _run_watching_disconnect(request: Request, call: Call, handler: Route) -> Any:
    """Run a long poll, telling it (never cancelling it mid-transaction) when the client goes away."""
    watcher = asyncio.create_task(_watch_disconnect(request, call.gone))
    try:
        return await handler.handler(call)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


def echo_payload(route: Route, params: dict[str, str]) -> Callable[[Any], Any] | None:
    """How error bodies show the route's payload: createTask's with its defaults, others as sent."""
    if route.name == "createTask":
        return functools.partial(task_definition.with_defaults, params.get("taskId", ""))
    return None


def _check_path(path: str, params: dict[str, str]) -> None:
    # The router's patterns let `$` match before a final newline, cutting it off the parameter;
    # no valid parameter holds a control character, so refuse any left in the path.
    bad = next((i for i, c in enumerate(path) if ord(c) < 0x20 or c == "\x7f"), None)
    if bad is None:
        return
    named = [name for name, value in params.items() if value and path.find(value) + len(value) == bad]
    which = f"URL parameter {named[0]}" if named else "URL parameters"
    raise InvalidRequestArguments(f"{which} may not contain control characters")


class Endpoint:
    """A route's ASGI app: its `handle(request)`, answered. Called as ASGI, Starlette adds no
    wrapper of its own: errors go straight to the app's handlers (`api/errors.py`)."""

    def __init__(self, name: str, handle: Callable[[Request], Awaitable[Response]]) -> None:
        self.__name__ = name
        self.handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.handle(Request(scope, receive, send))
        await response(scope, receive, send)


def endpoint(route: Route, services: Services) -> Endpoint:
    """The route's handler, wrapped in the checks every call gets. Errors are answered by the
    app's handlers (`api/errors.py`), which tell the call from what `describe()` was given."""

    async def handle(request: Request) -> Response:
        params = {k: str(v) for k, v in request.path_params.items()}
        describe(request, CallInfo(route.name, params))
        check_params(params)
        _check_path(request.scope["path"], params)
        raw = await read_body(request, services.max_body_bytes)
        body = parse_json(raw, route)
        describe(request, CallInfo(route.name, params, body, echo_payload(route, params)))
        signed = hawk_request(request, raw)
        who = await _authenticate(services, route, signed)
        if route.edge_input is not None:
            schema.validate(route.edge_input, body, where="body")
        query = request.query_params if request.scope.get("query_string") else None
        call = Call(
            route.name,
            params,
            {} if query is None else dict(query),
            body,
            who,
            services,
            route.scopes,
            scope_body=route.scope_body,
            request=signed if route.own_auth else None,
            query_items=() if query is None else tuple(query.multi_items()),
            headers=dict(request_headers(request.scope)),
        )
        if route.scopes is not None and not route.loads:
            call.authorize()
        if route.long_poll:
            result = await _run_watching_disconnect(request, call, route)
        else:
            result = await route.handler(call)
        if route.scopes is not None and not call.authorized:
            raise UncheckedScopes(f"{route.name} answered without checking its scopes")
        if isinstance(result, Reply):
            return json_response(result.body, result.status, result.headers)
        if isinstance(result, Stream):
            return StreamAnswer(result)
        return json_response(result)

    return Endpoint(route.name, handle)


async def not_found(request: Request, exc: Exception) -> Response:
    """The router's 404 and 405: no route takes this path with this method. Under the poll
    protocol's Azure-queue prefix, in Azure's words."""
    if request.url.path.startswith(azure_queue.PREFIX):
        return azure_queue.unmatched(request)
    if ui_app.wants_page(request) and request.method in ("GET", "HEAD"):
        return await ui_app.not_found(request.app.state.ui, request)
    error: TaskyardError = ResourceNotFound(f"no such route: {request.method} {request.url.path}")
    try:
        _check_path(request.scope["path"], {})
    except InvalidRequestArguments as invalid:
        error = invalid  # a control character kept the path from matching its route
    return render(error, NO_CALL)


def routes_for(
    prefix: str, table: list[Route], services: Services, *, raw_paths: bool = False
) -> list[StarletteRoute]:
    """Starlette routes for a service's table; a path ending in `/` also answers without it."""
    kind = RawPathRoute if raw_paths else StarletteRoute
    found = []
    for r in table:
        paths = [r.path] + ([r.path.rstrip("/")] if len(r.path) > 1 and r.path.endswith("/") else [])
        found += [kind(prefix + path, endpoint(r, services), methods=[r.method]) for path in paths]
    return found


def service_tables() -> dict[str, list[Route]]:
    """Each service's routes, by the name in `/api/<service>/v1/` (`taskyard api` reads these too)."""
    return {
        "queue": queue_v1.ROUTES + artifacts_v1.ROUTES,
        "auth": auth_v1.ROUTES,
        "scheduler": scheduler_v1.ROUTES,
    }


class _App(Starlette):
    """Starlette without its outermost `ServerErrorMiddleware`: `metrics.Timing` answers every
    exception before the answer begins, and one after goes on to the server either way."""

    def build_middleware_stack(self) -> ASGIApp:
        app: ASGIApp = ExceptionMiddleware(self.router, handlers=self.exception_handlers, debug=self.debug)
        for cls, args, kwargs in reversed(self.user_middleware):
            app = cls(app, *args, **kwargs)
        return app


def build_app(services: Services) -> Starlette:
    """The ASGI app serving every service under `/api/<service>/v1/`; errors answered by class."""
    routes = (
        blobs.routes(services.queue) + livelog_v1.routes(services.queue) + azure_queue.routes(services.queue)
    )
    tables = service_tables()
    routes += routes_for("/api/queue/v1", tables["queue"], services)
    routes += routes_for("/api/auth/v1", tables["auth"], services, raw_paths=True)
    routes += routes_for("/api/scheduler/v1", tables["scheduler"], services)
    if services.events is not None:  # an app built without a feed (a test's) serves no stream
        tables["events"] = events_v1.ROUTES  # not in service_tables(): `taskyard api` can't stream
        routes += routes_for("/api/events/v1", tables["events"], services)
    routes += index.routes(services.root_url, tables)  # `/api` and `/api/<service>/v1/`
    ui, pages = ui_app.routes(services)  # the web UI: `/`, `/tasks/...`, `/groups/...`
    routes += pages
    routes += openapi.routes(tables)  # `/api/<service>/v1/openapi.json` and its HTML reference
    measured = metrics.Metrics(services.queue, feed=services.events)
    routes += measured.routes()
    shed = shedding.Counts()
    measured.registry.register(shedding.CountsCollector(shed))
    app = _App(
        routes=routes,
        exception_handlers={**HANDLERS, 404: not_found, 405: not_found},
        middleware=[
            Middleware(shedding.Shedding, limits=services.limits, counts=shed),  # first: refusing is cheap
            Middleware(metrics.Timing, metrics=measured),  # unexpected errors too
        ],
    )
    app.state.metrics = measured
    app.state.ui = ui
    # no slash redirects: a redirect would point at a URL the Hawk signature does not cover
    app.router = IndexedRouter(routes, redirect_slashes=False)
    return app


__all__ = ["Services", "build_app", "dates", "service_tables"]
