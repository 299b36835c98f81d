"""Declaring routes: method, path, name, the scope expression it requires, and its handler.

Scope expressions are TaskCluster's: a scope string, or `{"AllOf": [...]}` / `{"AnyOf": [...]}`,
with `<param>` placeholders filled from the path parameters and the handler's own values.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from taskyard.api import authz
from taskyard.model import schema
from taskyard.model.errors import InvalidRequestArguments
from taskyard.model.identifiers import IDENT, SLUGID, TASK_QUEUE_ID

ScopeExpression = str | dict[str, list[Any]]

PARAM_PATTERNS = {
    "taskId": SLUGID,
    "taskGroupId": SLUGID,
    "provisionerId": IDENT,
    "workerType": IDENT,
    "workerGroup": IDENT,
    "workerId": IDENT,
    "taskQueueId": TASK_QUEUE_ID,
    "runId": r"^[1-9]*[0-9]+$",
    "clientId": r"^[A-Za-z0-9!@/:.+|_-]+$",
    "roleId": r"^[\x20-\x7e]+$",
    "name": r"^[\x20-\x7e]+$",  # artifact names; `..` segments are refused by the handlers
}
_COMPILED = {k: re.compile(v) for k, v in PARAM_PATTERNS.items()}


@dataclass
class Call:
    """One API call as a handler sees it."""

    name: str
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    caller: authz.Caller
    services: Any
    scopes: Any = None  # the route's scope template; None for public routes
    scope_body: tuple[str, ...] = ()  # body fields the template may read (never any others)
    authorized: bool = False
    gone: asyncio.Event = field(default_factory=asyncio.Event)  # set when the client disconnects
    request: Any = None  # the `hawk.Request`, for routes that authenticate by their own rules

    @property
    def client_id(self) -> str:
        return self.caller.client_id or "anonymous"

    def authorize(self, **values: object) -> None:
        """Check the route's scope template with the path, the body and `values`; 403 if unmet."""
        if self.scopes is not None:
            authz.require(self.caller, self.scopes, {**self._from_body(), **self.params, **values})
        self.authorized = True

    def _from_body(self) -> dict[str, Any]:
        body = self.body if isinstance(self.body, dict) else {}
        return {k: body[k] for k in self.scope_body if k in body}

    def can_authorize_early(self) -> bool:
        """Whether the path and the route's declared body fields give every parameter the template needs."""
        return authz.template_names(self.scopes) <= set(self.params) | set(self._from_body())


Handler = Callable[[Call], Awaitable[Any]]


@dataclass(frozen=True)
class Reply:
    """A handler's answer when it is not a plain 200 JSON body."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


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
