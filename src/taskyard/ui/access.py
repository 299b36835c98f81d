"""What the viewer may read: the API's own read scopes, checked for each page.

A page shows what the API's route of the same read would answer the viewer, and nothing more: the
viewer is the signed-in session's client (role-expanded, with `assume:anonymous`, as the API builds
a request's caller), or without a session the anonymous caller. `require(name, params)` checks the
scope template of the queue's route called `name` (taken from the API's route tables, never written
again here) with `params`, as the API checks it; a page refused answers the refusal page: 401 with a
"Sign in" link for an anonymous viewer, 403 naming the missing scopes for a signed-in one.
The viewer's scopes are computed once per request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from starlette.requests import Request

from taskyard.api import authz
from taskyard.auth import static
from taskyard.model import scopes
from taskyard.model.errors import InsufficientScopes
from taskyard.ui import calls, sessions
from taskyard.ui.render import UI, ReadRefused


async def viewer(ui: UI, request: Request) -> authz.Caller:
    """The caller the viewer is: the session's client, else the anonymous caller (once a request)."""
    found: authz.Caller | None = getattr(request.state, "ui_caller", None)
    if found is not None:
        return found
    if ui.services.skip_auth:  # benchmarks only: the API checks nothing either
        found = authz.Caller(static.ROOT_CLIENT_ID, ("*",), unchecked=True)
    else:
        session = await sessions.signed_in(ui, request)
        if session is not None:
            found = session.caller
        else:
            role_set = await ui.services.auth.role_set()
            found = authz.caller(None, (), role_set.expand)
    request.state.ui_caller = found
    return found


def check(who: authz.Caller, name: str, params: Mapping[str, object]) -> str | None:
    """None if `who` may call the queue's route `name` with `params`; else the API's refusal."""
    route = calls.api_route(name)
    if route.scopes is None:
        return None
    try:
        authz.require(who, route.scopes, params)
    except InsufficientScopes as exc:
        return exc.message
    return None


async def allowed(ui: UI, request: Request, name: str, params: Mapping[str, object]) -> bool:
    """Whether the viewer may read what the API's route `name` answers for `params`."""
    return check(await viewer(ui, request), name, params) is None


async def require(ui: UI, request: Request, name: str, params: Mapping[str, object]) -> None:
    """Raise ReadRefused (the page's refusal) unless the viewer holds route `name`'s scopes."""
    who = await viewer(ui, request)
    message = check(who, name, params)
    if message is not None:
        raise ReadRefused(message, anonymous=who.client_id is None)


def needs(name: str, params: Mapping[str, object]) -> str:
    """The scope expression the queue's route `name` asks for with `params`, as the API shows it."""
    route = calls.api_route(name)
    expression = scopes.render(route.scopes, params) if route.scopes is not None else None
    if expression is None:
        return ""
    return expression if isinstance(expression, str) else json.dumps(expression)
