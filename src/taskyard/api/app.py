"""The ASGI application: routes of every service, body limits, authentication and error mapping."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from starlette.applications import Starlette
from starlette.datastructures import URL, QueryParams
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.routing import Route as StarletteRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from taskyard.api import (
    authz,
    azure_queue,
    blobs,
    calls,
    events_v1,
    index,
    livelog_v1,
    metrics,
    openapi,
    shedding,
)
from taskyard.api.errors import (
    HANDLERS,
    NO_CALL,
    CallInfo,
    answer_unexpected,
    describe_call,
    render,
    render_for,
)
from taskyard.api.limits import check_content_length
from taskyard.api.router import EmptyTailRoute, IndexedRouter, RawPathRoute
from taskyard.api.routing import Call, Reply, Route, Stream, check_params
from taskyard.api.streams import StreamAnswer
from taskyard.api.tables import service_tables
from taskyard.auth import hawk
from taskyard.auth.service import Auth
from taskyard.events.feed import EventFeed
from taskyard.hooks.service import Hooks
from taskyard.index.service import Index
from taskyard.internals.web import json_response
from taskyard.model import dates, task_definition
from taskyard.model.errors import (
    InputTooLarge,
    InputValidationError,
    InvalidRequestArguments,
    MalformedPayload,
    ResourceNotFound,
    TaskyardError,
)
from taskyard.notify.service import Notify
from taskyard.pools.service import WorkerManager
from taskyard.pools.service import static_only as static_worker_manager
from taskyard.queue.service import Queue
from taskyard.queue.signals import BEFORE_WAITING
from taskyard.scheduler.service import Scheduler
from taskyard.secrets.service import Secrets
from taskyard.storage.port import WAIT_TIMEOUT


@dataclass
class Services:
    """What the routes need: the queue, the auth service (clients, roles, Hawk), the task-graph
    scheduler, the secrets service and the body limit."""

    queue: Queue
    auth: Auth
    scheduler: Scheduler
    secrets: Secrets
    max_body_bytes: int = 10 * 1024 * 1024
    started: float = field(default_factory=time.monotonic)
    root_url: str | None = None  # the deployment's, for the page `/` (None: the request's)
    blob_origin: str | None = None  # where blobs and live logs are served (api/blobs.py's OriginGate)
    events: EventFeed | None = None  # the HTTP event stream's feed (None: this app serves no stream)
    limits: shedding.Limits = field(
        default_factory=shedding.Limits
    )  # what one process takes at once (api/shedding.py)
    hooks_service: Hooks | None = None  # the hooks service (None: one on the queue, with no bus)
    notifier: Notify | None = None  # the notify service as `serve` built it (None: `notify` makes one)
    worker_manager_service: WorkerManager | None = None  # as `serve` built it (None: static only)

    async def authenticate(self, request: hawk.Request) -> hawk.Authenticated | None:
        """Who signed `request` (None: nobody); 401 AuthenticationFailed if the signature is refused.
        A signed request is recorded with its first transaction: a replay is refused (auth/nonces.py)."""
        return await self.auth.authenticate(request, remember=True)

    async def expand(self, scopes: Iterable[str]) -> list[str]:
        """Role-expand `scopes` with the deployment's roles."""
        return await self.auth.expand(scopes)

    @functools.cached_property
    def index(self) -> Index:
        """The index service, on the queue's storage and clock."""
        return Index(self.queue)

    @functools.cached_property
    def hooks(self) -> Hooks:
        """The hooks service: the one `taskyard serve` built, or one on the queue without a bus."""
        return self.hooks_service or Hooks(self.queue, expand=self.auth.expand, sealer=self.secrets.sealer)

    @functools.cached_property
    def notify(self) -> Notify:
        """The notify service: the one `serve` built (with its SMTP server), else one without SMTP."""
        return self.notifier or Notify(self.queue, None, ui_url=self.root_url or "")

    @functools.cached_property
    def worker_manager(self) -> WorkerManager:
        """The worker-manager: the one `serve` built (with the local provider), else one with the
        static provider alone."""
        return self.worker_manager_service or static_worker_manager(self.queue)

    def uptime(self) -> float:
        return round(time.monotonic() - self.started, 3)


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, at most `limit` bytes (413 beyond); 400 if the client hangs up first."""
    return await receive_body(request.scope, request.receive, limit)


async def receive_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """`read_body()` on the ASGI request itself."""
    check_content_length(request_headers(scope).get("content-length"), limit, "the request body")
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # nobody will read the answer; it is no incident either
            raise MalformedPayload("the client hung up before sending the whole body")
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise InputTooLarge(f"the request body is larger than {limit} bytes, the most accepted")
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


MAX_DEPTH = 64


def parse_json(raw: bytes, route: Route) -> Any:
    # A DELETE reads its body only when it declares one (notify's deleteDenylistAddress does).
    if route.method in ("GET", "HEAD") or (route.method == "DELETE" and route.edge_input is None):
        return None
    if not raw.strip() and route.edge_input is None:
        return None
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MalformedPayload(f"the request body is not valid JSON: {exc}") from None
    # A body holding no more brackets than the limit can't nest deeper: no need to walk it.
    if raw.count(b"{") + raw.count(b"[") > MAX_DEPTH and _depth(body) > MAX_DEPTH:
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
    found: dict[str, str] | None = scope.get(_HEADERS_KEY)
    if found is None:
        found = {}
        for key, value in scope["headers"]:
            found.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
        scope[_HEADERS_KEY] = found
    return found


_HEADERS_KEY = "taskyard.headers"
TURN_KEY = "taskyard.turn"  # the request's `shedding.Turn`, put in the scope by `App`


def hawk_request(scope: Scope, raw: bytes) -> hawk.Request:
    headers = request_headers(scope)
    raw_path = scope.get("raw_path")
    path = URL(scope=scope).path if raw_path is None else raw_path.decode("latin-1")
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


async def _authenticate(services: Services, route: Route, signed: hawk.Request) -> authz.Caller:
    if route.scopes is None:
        return authz.Caller(None, ())
    who = await services.authenticate(signed)
    role_set = await services.auth.role_set()
    if who is None:
        return authz.caller(None, (), role_set.expand)
    return authz.caller(who.client_id, who.unexpanded_scopes, role_set.expand)


async def _watch_disconnect(receive: Receive, gone: asyncio.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


async def _run_watching_disconnect(receive: Receive, call: Call, route: Route) -> Any:
    """Run a long poll, telling it (never cancelling it mid-transaction) when the client goes away."""
    watcher = asyncio.create_task(_watch_disconnect(receive, call.gone))
    try:
        return await calls.run(route, call)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


def echo_payload(route: Route, params: dict[str, str]) -> Callable[[Any], Any] | None:
    """How error bodies show the route's payload: createTask's with its defaults, a route's own
    `echo` (a secret's value left out), others as sent."""
    if route.name == "createTask":
        return functools.partial(task_definition.with_defaults, params.get("taskId", ""))
    return route.echo


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def _check_path(path: str, params: dict[str, str]) -> None:
    # The router's patterns let `$` match before a final newline, cutting it off the parameter;
    # no valid parameter holds a control character, so refuse any left in the path.
    found = _CONTROL.search(path)
    if found is None:
        return
    bad = found.start()
    named = [name for name, value in params.items() if value and path.find(value) + len(value) == bad]
    which = f"URL parameter {named[0]}" if named else "URL parameters"
    raise InvalidRequestArguments(f"{which} may not contain control characters")


class Endpoint:
    """A route's ASGI app: its handler, wrapped in the checks every call gets. Errors are answered
    by the app's handlers (`api/errors.py`), which tell the call from what `describe()` was given.

    `App` calls `answer()` itself for a request its router finds here (see `App.__call__`);
    Starlette, calling it as ASGI, adds no wrapper of its own."""

    def __init__(self, route: Route, services: Services) -> None:
        self.__name__ = route.name
        self.route = route
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = await self.answer(scope, receive, scope["path_params"])
        await answer(scope, receive, send)

    async def answer(self, scope: Scope, receive: Receive, path_params: dict[str, Any]) -> Response:
        """The answer to the call: its handler's, once the call passed every check."""
        route, services = self.route, self.services
        params = {k: str(v) for k, v in path_params.items()}
        describe_call(scope, CallInfo(route.name, params))
        check_params(params)
        _check_path(scope["path"], params)
        raw = await receive_body(scope, receive, services.max_body_bytes)
        turn: shedding.Turn | None = scope.get(TURN_KEY)
        if turn is not None:  # the front's (App's): wait for the turn to be worked on, the body in
            await turn.take(None if route.long_poll else WAIT_TIMEOUT.get())
        body = parse_json(raw, route)
        describe_call(scope, CallInfo(route.name, params, body, echo_payload(route, params)))
        signed = hawk_request(scope, raw)
        who = await _authenticate(services, route, signed)
        shedding.hold_stream_as(scope, who.client_id)  # an event stream: its client's share (429 beyond)
        query_string = scope.get("query_string")
        query = QueryParams(query_string) if query_string else None
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
            headers=dict(request_headers(scope)),
        )
        # The one pipeline (api/calls.py): body schema, scopes, handler, and failing closed.
        if route.long_poll:
            result = await _run_watching_disconnect(receive, call, route)
        else:
            result = await calls.run(route, call)
        if isinstance(result, Reply):
            if result.text is not None:
                return Response(result.text, result.status, result.headers, "text/plain")
            return json_response(result.body, result.status, result.headers)
        if isinstance(result, Stream):
            return StreamAnswer(result)
        return json_response(result)


def endpoint(route: Route, services: Services) -> Endpoint:
    """The route's handler, wrapped in the checks every call gets (see `Endpoint`)."""
    return Endpoint(route, services)


async def not_found(request: Request, exc: Exception) -> Response:
    """The router's 404 and 405: no route takes this path with this method. Under the poll
    protocol's Azure-queue prefix, in Azure's words."""
    if request.url.path.startswith(azure_queue.PREFIX):
        return azure_queue.unmatched(request)
    site: Site | None = request.app.state.site
    if site is not None and request.method in ("GET", "HEAD"):
        page = await site.not_found(request)
        if page is not None:
            return page
    error: TaskyardError = ResourceNotFound(f"no such route: {request.method} {request.url.path}")
    try:
        _check_path(request.scope["path"], {})
    except InvalidRequestArguments as invalid:
        error = invalid  # a control character kept the path from matching its route
    return render(error, NO_CALL)


_PATH_TAIL = re.compile(r"^[^{]*/\{(\w+):path\}$")  # a path whose one parameter is its tail


def routes_for(
    prefix: str, table: list[Route], services: Services, *, raw_paths: bool = False, empty_tails: bool = False
) -> list[StarletteRoute]:
    """Starlette routes for a service's table; a path ending in `/` also answers without it, and
    with `empty_tails` one ending in `/{param:path}` without that, the parameter empty."""
    kind = RawPathRoute if raw_paths else StarletteRoute
    found = []
    for r in table:
        paths = [r.path] + ([r.path.rstrip("/")] if len(r.path) > 1 and r.path.endswith("/") else [])
        found += [kind(prefix + path, endpoint(r, services), methods=[r.method]) for path in paths]
        if empty_tails and (tail := _PATH_TAIL.search(r.path)):
            bare = prefix + r.path[: r.path.rindex("/{")]
            found.append(EmptyTailRoute(bare, endpoint(r, services), methods=[r.method], param=tail[1]))
    return found


class Site(Protocol):
    """What the app serves besides the APIs (the web UI, `ui/app.py`'s `Pages`): one route of the
    app, matched last, with its own answer to a path nothing takes (None: the API's JSON 404), and
    its rendering of the API's human pages (`/api`, each service's reference) in its own style.
    The API never imports it: whoever builds the app (`cli/serve.py`) hands it over."""

    @property
    def route(self) -> BaseRoute: ...

    async def not_found(self, request: Request) -> Response | None: ...

    async def apis_page(self, request: Request, root_url: str, services: list[str]) -> Response:
        """`/api`: the deployment's APIs, as a page of the site."""
        ...

    async def reference_page(self, request: Request, service: str, document: dict[str, object]) -> Response:
        """`/api/<service>/v1/reference`: the service's OpenAPI `document`, as a page of the site."""
        ...


class App(Starlette):
    """The app: Starlette, with a front of its own that every HTTP request goes through first.

    The front does what middleware would, in one layer: it applies a trusted proxy's headers (see
    `trust_proxies()`), asks `shedding.Shedding` whether the request may come in, times its
    answer (`metrics.Metrics.observe`) and answers any exception that is no `TaskyardError` as an
    incident (`errors.answer_unexpected`) before the answer begins; one after goes on to the server,
    which logs it and closes the connection. It then finds the request's route (`IndexedRouter`):
    an API route's `Endpoint` is answered at once, its `TaskyardError`s rendered as Starlette's
    handler renders them; anything else (the UI, blobs, a route taking another method: 405...)
    goes through Starlette's `ExceptionMiddleware` and router, as before. Starlette's own
    `ServerErrorMiddleware` is left out: the front answers unexpected errors."""

    shedding: shedding.Shedding
    metrics: metrics.Metrics
    api_router: IndexedRouter
    proxy: ASGIApp | None = None
    blob_gate: blobs.OriginGate | None = None  # with a blob origin: what each host may be asked

    def build_middleware_stack(self) -> ASGIApp:
        app: ASGIApp = ExceptionMiddleware(self.router, handlers=self.exception_handlers, debug=self.debug)
        for cls, args, kwargs in reversed(self.user_middleware):
            app = cls(app, *args, **kwargs)
        return app

    def trust_proxies(self, rewrite: ASGIApp) -> None:
        """Apply a trusted proxy's `X-Forwarded-Proto` and `-For` headers to each request that
        carries one: `rewrite` changes the request's scope and answers nothing. The server gives
        the uvicorn middleware that would otherwise wrap the whole app (`cli/connections.py`), so
        that a request without those headers costs nothing."""
        self.proxy = rewrite

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = self
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        if self.proxy is not None:
            headers = request_headers(scope)
            if "x-forwarded-proto" in headers or "x-forwarded-for" in headers:
                await self.proxy(scope, receive, send)
        if self.blob_gate is not None and (misdirected := self.blob_gate.refusal(scope)) is not None:
            await misdirected(scope, receive, send)
            return
        kind = shedding.kind_of(scope["method"], scope["path"])
        refusal = self.shedding.admit(kind, scope)
        if refusal is not None:  # refusing is cheap: not timed
            await refusal(scope, receive, send)
            return
        receive = self.shedding.receiving(scope, receive)  # in flight once its body has arrived
        waits = WAIT_TIMEOUT.set(self.shedding.limits.db_wait_timeout) if kind == "request" else None
        turn = None
        if kind in ("request", "long_poll"):  # a stream would hold its turn as long as it lasts
            if kind == "long_poll":
                scope[TURN_KEY] = turn = self.shedding.long_poll_turns.turn()
                BEFORE_WAITING.set(turn.give_back)  # the request's own context: its task's
            else:
                scope[TURN_KEY] = turn = self.shedding.turns.turn()
        try:
            await self._timed(scope, receive, send)
        finally:
            if turn is not None:
                turn.give_back()
            if waits is not None:
                WAIT_TIMEOUT.reset(waits)
            self.shedding.leave(kind, scope)

    async def _timed(self, scope: Scope, receive: Receive, send: Send) -> None:
        started, status = time.perf_counter(), 0  # 0: the answer has not begun
        try:
            point = self._endpoint(scope)
            if point is not None:
                try:
                    answer = await point.answer(scope, receive, scope["path_params"])
                except TaskyardError as error:
                    answer = render_for(error, scope)
                finally:
                    turn: shedding.Turn | None = scope.get(TURN_KEY)
                    if turn is not None:  # the work is done: sending the answer takes no turn
                        turn.give_back()
                status = answer.status_code
                await answer(scope, receive, send)
            else:

                async def timed(message: Message) -> None:
                    nonlocal status
                    if message["type"] == "http.response.start":
                        status = int(message["status"])
                    await send(message)

                if self.middleware_stack is None:
                    self.middleware_stack = self.build_middleware_stack()
                await self.middleware_stack(scope, receive, timed)
        except Exception:
            if status:  # the answer had begun (a live-log stream): the server logs it, closes the connection
                raise
            status = 500
            await answer_unexpected(scope, receive, send)
        finally:
            template = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.observe(template, scope["method"], status or 500, time.perf_counter() - started)

    def _endpoint(self, scope: Scope) -> Endpoint | None:
        """The API endpoint taking the request, its route and parameters put in `scope` as
        Starlette's router puts them; None for any other route, or none."""
        found = self.api_router.find(scope)
        if found is None:
            return None
        route, child = found
        point, methods = getattr(route, "endpoint", None), getattr(route, "methods", None) or ()
        if not isinstance(point, Endpoint) or scope["method"] not in methods:
            return None
        scope["route"] = route
        scope.update(child)
        return point


def build_app(services: Services, site: Site | None = None) -> App:
    """The ASGI app serving every service under `/api/<service>/v1/`, and `site` (the web UI)
    after them; errors answered by class."""
    routes = (
        blobs.routes(services.queue) + livelog_v1.routes(services.queue) + azure_queue.routes(services.queue)
    )
    tables = service_tables()
    routes += routes_for("/api/queue/v1", tables["queue"], services)
    routes += routes_for("/api/auth/v1", tables["auth"], services, raw_paths=True)
    routes += routes_for("/api/scheduler/v1", tables["scheduler"], services)
    routes += routes_for("/api/secrets/v1", tables["secrets"], services)
    routes += routes_for("/api/index/v1", tables["index"], services, raw_paths=True, empty_tails=True)
    routes += routes_for("/api/hooks/v1", tables["hooks"], services, raw_paths=True)
    routes += routes_for("/api/notify/v1", tables["notify"], services)
    routes += routes_for("/api/worker-manager/v1", tables["worker-manager"], services, raw_paths=True)
    if services.events is not None:  # an app built without a feed (a test's) serves no stream
        tables["events"] = events_v1.ROUTES  # not in service_tables(): `taskyard api` can't stream
        routes += routes_for("/api/events/v1", tables["events"], services)
    routes += index.routes(services.root_url, tables)  # `/api` and `/api/<service>/v1/`
    routes += openapi.routes(tables)  # `/api/<service>/v1/openapi.json` and its HTML reference
    measured = metrics.Metrics(services.queue, feed=services.events)
    routes += measured.routes()
    # The web UI (`/`, `/tasks/...`, `/groups/...`), if given; last, since no other route shares a
    # path with it: none of its pages is under `/api/`, nor at `/metrics`.
    if site is not None:
        routes.append(site.route)
    shed = shedding.Counts()
    measured.registry.register(shedding.CountsCollector(shed))
    app = App(routes=routes, exception_handlers={**HANDLERS, 404: not_found, 405: not_found})
    app.shedding = shedding.Shedding(services.limits, shed)
    app.metrics = app.state.metrics = measured
    app.state.site = site
    if services.blob_origin is not None:
        app.blob_gate = blobs.OriginGate(services.blob_origin)
    # no slash redirects: a redirect would point at a URL the Hawk signature does not cover
    app.router = app.api_router = IndexedRouter(routes, redirect_slashes=False)
    return app


__all__ = ["App", "Services", "Site", "build_app", "dates", "service_tables"]
