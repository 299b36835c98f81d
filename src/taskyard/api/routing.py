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

from taskyard.model import schema
from taskyard.model.errors import InvalidRequestArguments

ScopeExpression = str | dict[str, list[Any]]

SLUGID = r"^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$"
IDENT = r"^[a-zA-Z0-9-_]{1,38}$"
PARAM_PATTERNS = {
    "taskId": SLUGID,
    "taskGroupId": SLUGID,
    "provisionerId": IDENT,
    "workerType": IDENT,
    "workerGroup": IDENT,
    "workerId": IDENT,
    "taskQueueId": r"^[a-zA-Z0-9-_]{1,38}/[a-z]([-a-z0-9]{0,36}[a-z0-9])?$",
    "runId": r"^[1-9]*[0-9]+$",
}
_COMPILED = {k: re.compile(v) for k, v in PARAM_PATTERNS.items()}


@dataclass
class Call:
    """One API call as a handler sees it."""

    name: str
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    client_id: str
    services: Any
    headers: dict[str, str] = field(default_factory=dict)
    gone: asyncio.Event = field(default_factory=asyncio.Event)  # set when the client disconnects


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


def check_params(params: dict[str, str]) -> dict[str, str]:
    """Refuse path parameters that break their pattern; answers them with runId made canonical."""
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
