"""What the viewer may read: every page reads through the API's call pipeline, as the viewer.

The viewer is the signed-in session's client (role-expanded, with `assume:anonymous`, as the API
builds a request's caller), or without a session the anonymous caller; it is computed once a
request. `read()` runs an API route (`calls.route("status")`) or a guarded operation of the pages
(`api/pages.py`) through `api.calls`, the pipeline every API request goes through: its scope check
is the API's, and a step whose check never ran answers nothing (`UncheckedScopes`). A page refused
answers the refusal page: 401 with a "Sign in" link for an anonymous viewer, 403 naming the missing
scopes for a signed-in one. `attempt()` answers None instead, for a part of a page shown only to
a viewer who may read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from starlette.requests import Request

from taskyard.api import authz, calls
from taskyard.model.errors import InsufficientScopes
from taskyard.model.types import JSONValue
from taskyard.ui import sessions
from taskyard.ui.render import UI, ReadRefused

T = TypeVar("T")


async def viewer(ui: UI, request: Request) -> authz.Caller:
    """The caller the viewer is: the session's client, else the anonymous caller (once a request)."""
    found: authz.Caller | None = getattr(request.state, "ui_caller", None)
    if found is not None:
        return found
    session = await sessions.signed_in(ui, request)
    if session is not None:
        found = session.caller
    else:
        role_set = await ui.services.auth.role_set()
        found = authz.caller(None, (), role_set.expand)
    request.state.ui_caller = found
    return found


async def read(
    ui: UI,
    request: Request,
    step: calls.Step[T],
    params: Mapping[str, str],
    query: Mapping[str, str] | None = None,
    body: JSONValue = None,
) -> T:
    """What `step` answers the viewer for `params`; ReadRefused (the refusal page) if its scopes
    refuse the viewer, and the API's other errors (404, 400) as they are."""
    who = await viewer(ui, request)
    try:
        return await calls.call(ui.services, who, step, params, body, query)
    except InsufficientScopes as exc:
        raise ReadRefused(exc.message, anonymous=who.client_id is None) from None


async def attempt(
    ui: UI,
    request: Request,
    step: calls.Step[T],
    params: Mapping[str, str],
    query: Mapping[str, str] | None = None,
) -> T | None:
    """What `step` answers the viewer, or None if its scopes refuse the viewer."""
    try:
        return await read(ui, request, step, params, query)
    except ReadRefused:
        return None


def needs(step: calls.Step[object], params: Mapping[str, object]) -> str:
    """The scope expression `step` asks for with `params`, as the API's refusal shows it."""
    return calls.needs(step.scopes, params)
