"""An action of the UI is a call of the API's own route, made as the signed-in client.

`invoke` runs the route, found by name in the API's route tables, through the API's call pipeline
(`api.calls`) with the session's client as the caller: the path parameters, the body schema, the
scope check before the handler (or the service's, on the record it loads), and a refusal to answer
if the scopes were never checked, exactly as for an HTTP request. So the UI asks for exactly the
scopes the API asks for, and says no with the API's own messages.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from taskyard.api import calls
from taskyard.api.routing import Answer
from taskyard.model.types import JSONValue
from taskyard.ui import forms, sessions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.ui.render import UI


async def invoke(
    ui: UI, session: sessions.Session, name: str, params: dict[str, str], body: JSONValue = None
) -> Answer:
    """The API route `name` called with `params` and `body` as the session's client; raises the
    API's errors (403 InsufficientScopes naming the missing scopes, 404, 409, 400 naming the field)."""
    return await calls.call(ui.services, session.caller, calls.route(name), params, body)


async def not_signed_in(ui: UI, request: Request, back: str) -> Response:
    """The 401 page for an action tried without a session: a link to sign in and come back."""
    return await ui.page(
        request,
        "refused.html",
        401,
        title="Not signed in",
        message="Sign in to act: cancelling, rerunning or scheduling a task, quarantining a worker and "
        "creating a task need a signed-in client with the scopes the API asks for. Nothing was done.",
        signin_next=back,
        back=back,
    )


async def refused(ui: UI, request: Request, status: int, message: str, back: str) -> Response:
    """The page for an action the API refused (403 with the missing scopes, 404, 409, 400)."""
    titles = {400: "Bad request", 403: "Not allowed", 404: "Not found", 409: "Conflict"}
    return await ui.page(
        request,
        "refused.html",
        status,
        title=titles.get(status, "Refused"),
        message=message,
        signin_next=back if status == 403 else "",
        back=back,
    )


async def signed_form(
    ui: UI, request: Request, fallback: str
) -> tuple[sessions.Session, dict[str, str], str] | Response:
    """The session and the posted form, with where to go back to; or the page refusing them: 401
    without a session, 403 without the session's CSRF token (nothing done either way)."""
    form = await forms.read(request, ui.services.max_body_bytes)
    back = forms.back(request, form, fallback)
    session = await sessions.signed_in(ui, request)
    if session is None:
        return await not_signed_in(ui, request, back)
    if not sessions.csrf_ok(session, form.get("csrf")):
        return await sessions.csrf_refused(ui, request)
    return session, form, back
