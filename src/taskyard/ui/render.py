"""What every page shares: the template environment, the page wrapper and the error page.

`UI` holds the services and renders templates with the signed-in viewer (if any) and the session's
CSRF token. `view` wraps a page handler: a taskyard error (unknown task, bad id) becomes an HTML page
with the error's status and message, never a traceback or a JSON body.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from taskyard import __version__
from taskyard.model import dates
from taskyard.model.errors import TaskyardError
from taskyard.ui import formats

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.api.app import Services

Handler = Callable[["UI", Request], Awaitable[Response]]


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("taskyard.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(formats.FILTERS)
    env.globals["version"] = __version__
    return env


ENVIRONMENT = _environment()


@dataclass
class UI:
    """The UI's share of the app: the services it reads and acts through."""

    services: Services

    def now(self) -> int:
        return int(self.services.queue.clock())

    async def page(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        """`template` rendered with `context`, the viewer and the CSRF token; never cached."""
        from taskyard.ui import sessions  # sessions renders pages too

        viewer = await sessions.current(self, request)
        body = ENVIRONMENT.get_template(template).render(
            request_path=request.url.path,
            viewer=viewer,
            csrf=viewer.csrf if viewer is not None else "",
            now=self.now(),
            flash=NOTICES.get(request.query_params.get("done", ""), ""),
            **context,
        )
        response = HTMLResponse(body, status, headers=SECURITY_HEADERS)
        sessions.settle(request, response)  # a stale or forged session cookie is cleared
        return response

    async def error(self, request: Request, status: int, title: str, message: str) -> HTMLResponse:
        return await self.page(request, "error.html", status, title=title, message=message)


# The one-line notice a page shows after an action sent the browser back to it (`?done=<key>`).
NOTICES = {
    "signed-in": "You are signed in.",
    "signed-out": "You are signed out.",
    "cancelled": "The task was cancelled.",
    "rerun": "The task will run again.",
    "scheduled": "The task was scheduled.",
    "created": "The task was created.",
    "quarantined": "The worker is quarantined.",
    "unquarantined": "The worker is no longer quarantined.",
    "hook-triggered": "The hook fired: its task is the newest of its last fires.",
    "hook-declined": "The hook declined: its template rendered to nothing, and no task was made.",
}

# No page runs script from anywhere but this server, nor is framed by another site.
SECURITY_HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


def view(handler: Handler) -> Callable[[UI], Callable[[Request], Awaitable[Response]]]:
    """`handler` as a Starlette endpoint for `ui`: taskyard errors answered as an HTML page."""

    def bind(ui: UI) -> Callable[[Request], Awaitable[Response]]:
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(ui, request)
            except ReadRefused as exc:
                return await refused_read(ui, request, exc)
            except TaskyardError as exc:
                status = exc.status
                return await ui.error(request, status, TITLES.get(status, "Refused"), exc.message)

        return endpoint

    return bind


class ReadRefused(TaskyardError):
    """The viewer lacks the scopes the API asks for this read (`ui/access.py` raises it)."""

    code = "InsufficientScopes"
    status = 403

    def __init__(self, message: str, anonymous: bool) -> None:
        super().__init__(message)
        self.anonymous = anonymous


async def refused_read(ui: UI, request: Request, exc: ReadRefused) -> HTMLResponse:
    """The refusal page: 401 with a "Sign in" link for an anonymous viewer, else 403; both name
    the scopes the read needs."""
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return await ui.page(
        request,
        "refused.html",
        401 if exc.anonymous else 403,
        title="Not signed in" if exc.anonymous else "Not allowed",
        message=exc.message,
        signin_next=here,
        signin_purpose="to see this page",
        back="/",
    )


TITLES = {400: "Bad request", 401: "Not signed in", 403: "Not allowed", 404: "Not found", 409: "Conflict"}

__all__ = ["ENVIRONMENT", "UI", "dates", "view"]
