"""Declaring routes: method, path, name, the scope template it requires, and its handler.

Scope templates are TaskCluster's: a scope string, or `{"AllOf": [...]}` / `{"AnyOf": [...]}`,
with `<param>` placeholders filled from the path parameters, the body fields the route lists in
`scope_body`, and the values its service passes the guard (the fields it lists in `loads`).

A handler takes a `Call` and answers a `Body` (a 200 JSON object: a TypedDict of the service's,
usually), a list of them, or a `Reply`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar, cast

from taskyard.api import authz
from taskyard.auth import hawk
from taskyard.model import index_paths, schema
from taskyard.model.errors import InvalidRequestArguments
from taskyard.model.identifiers import CLIENT_ID, IDENT, SLUGID, TASK_QUEUE_ID
from taskyard.model.scopes import Template
from taskyard.model.types import JSONValue

if TYPE_CHECKING:  # api/app.py builds the Services and imports this module
    from taskyard.api.app import Services

ScopeExpression = Template
Body = Mapping[str, object]  # a JSON object: its TypedDict says which
B = TypeVar("B", bound=Mapping[str, object])

PARAM_PATTERNS = {
    "taskId": SLUGID,
    "taskGroupId": SLUGID,
    "taskGraphId": SLUGID,
    "provisionerId": IDENT,
    "workerType": IDENT,
    "workerGroup": IDENT,
    "workerId": IDENT,
    "taskQueueId": TASK_QUEUE_ID,
    "runId": r"^[1-9]*[0-9]+$",
    "clientId": CLIENT_ID,
    "roleId": r"^[\x20-\x7e]+$",
    "name": r"^[\x20-\x7e]+$",  # artifact names; `..` segments are refused by the handlers
    "indexPath": index_paths.INDEX_PATH_PARAM,
    "namespace": index_paths.NAMESPACE_PARAM,  # empty: the index's root
    "hookGroupId": r"^[a-zA-Z0-9-_]{1,1000}$",
    "hookId": r"^[a-zA-Z0-9-_/]{1,1000}$",  # may hold `/` (taskgraph's action hooks)
    "workerPoolId": TASK_QUEUE_ID,
}
_COMPILED = {k: re.compile(v) for k, v in PARAM_PATTERNS.items()}


@dataclass
class Call:
    """One API call as a handler sees it."""

    name: str
    params: dict[str, str]
    query: dict[str, str]
    body: JSONValue  # as parsed; `body_as()` gives it the shape the route's schema checked
    caller: authz.Caller
    services: Services
    scopes: ScopeExpression | None = None  # the route's scope template; None for public routes
    scope_body: tuple[str, ...] = ()  # body fields the template may read (never any others)
    authorized: bool = False
    gone: asyncio.Event = field(default_factory=asyncio.Event)  # set when the client disconnects
    request: hawk.Request | None = None  # for routes that authenticate by their own rules
    query_items: tuple[tuple[str, str], ...] = ()  # every query parameter, repeated ones too, in order
    headers: Mapping[str, str] = field(default_factory=dict)  # the request's, names in lower case

    @property
    def client_id(self) -> str:
        return self.caller.client_id or "anonymous"

    def authorize(self, **values: object) -> None:
        """Check the route's scope template with the path, the body and `values`; 403 if unmet.

        The one check of a route's scopes, and a `Guard`: the edge calls it before the handler,
        or the handler passes it to the service, which calls it with the record's fields.
        """
        if self.scopes is not None:
            authz.require(self.caller, self.scopes, {**self._from_body(), **self.params, **values})
        self.authorized = True

    def _from_body(self) -> dict[str, JSONValue]:
        body = self.body if isinstance(self.body, dict) else {}
        return {k: body[k] for k in self.scope_body if k in body}

    def body_as(self, shape: type[B]) -> B:
        """The body, typed as the TypedDict `shape` that the route's `input` schema has checked."""
        return cast(B, self.body)


@dataclass(frozen=True)
class Reply:
    """A handler's answer when it is not a plain 200 JSON body."""

    status: int
    body: Body | None = None
    headers: dict[str, str] = field(default_factory=dict)
    text: str | None = None  # a plain-text body instead (notify's `OK`, as Express's sendStatus)


@dataclass(frozen=True)
class Stream:
    """A handler's answer that streams `chunks` (a 200) until they end, the client leaves, or `stop`
    is set: the server gives up on the client, without waiting for a send that may never finish."""

    chunks: AsyncIterator[bytes]
    media_type: str
    stop: asyncio.Event
    headers: dict[str, str] = field(default_factory=dict)
    closed: Callable[[], None] = lambda: None  # called once the answer is over, however it ended
    farewell: bytes = b""  # sent, if the client takes it, when the stream is given up on (`stop`)


Answer = Body | Sequence[Body] | Reply | Stream
Handler = Callable[[Call], Awaitable[Answer]]


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    name: str
    handler: Handler
    scopes: ScopeExpression | None = None
    input: schema.Schema | None = None
    stability: str = "stable"
    long_poll: bool = False
    scope_body: tuple[str, ...] = ()  # body fields the scope template reads, for checking before the handler
    own_auth: bool = False  # the handler authenticates the request itself (testAuthenticate)
    # Template parameters the service supplies from the record it loads (or the input it derives),
    # calling the guard the handler passes it. Empty: the edge checks the scopes before the handler.
    loads: tuple[str, ...] = ()
    # The service validates `input` itself (createTask: it needs the body whole, defaults and all);
    # the edge leaves it alone, and the document still shows it.
    service_checks_input: bool = False
    # The 200 answer's schema, for the OpenAPI document (api/openapi.py); None: not described yet.
    output: schema.Schema | None = None
    # How error bodies' `requestInfo.payload` shows the body (None: as sent): a body holding a
    # secret value is shown without it (`secrets_v1.set`).
    echo: Callable[[JSONValue], JSONValue] | None = None

    @property
    def edge_input(self) -> schema.Schema | None:
        """The body schema the edge checks (None: none, or the service checks it)."""
        return None if self.service_checks_input else self.input


def check_params(params: dict[str, str]) -> dict[str, str]:
    """Refuse path parameters that break their pattern; answers them unchanged (`run_id()` reads runId)."""
    for name, value in params.items():
        pattern = _COMPILED.get(name)
        if pattern is not None and not pattern.fullmatch(value):
            raise InvalidRequestArguments(
                f"URL parameter {name} {value[:80]!r} must match {PARAM_PATTERNS[name]}"
            )
    return params


def run_id(call: Call) -> int:
    """The runId parameter; absurdly long ones become a run that cannot exist (404, not 500)."""
    value = call.params["runId"]
    return int(value) if len(value) <= 6 else 10**6
