"""The UI's routes: each page module's, the static files, and the HTML 404 for unknown pages.

The app holds them as one route, `Pages`, which builds them on the first request that could be
the UI's (any path outside `/api/`, where no page is): the page modules, Jinja2 and its templates
are most of what the server would otherwise import before answering its first request, and an
API-only deployment never needs them. Built, they answer as they would in the app's own list.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import Receive, Scope, Send

from taskyard.internals.web import get_route_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from starlette.datastructures import URLPath

    from taskyard.api.app import Services
    from taskyard.ui.render import UI

STATIC = Path(__file__).parent / "static"
API_PREFIX = "/api/"  # no page is served under it


def build(services: Services) -> tuple[UI, list[BaseRoute]]:
    """The UI bound to `services`, and every route it serves (`/`, `/groups/...`, `/ui/static/...`)."""
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from taskyard.ui import (
        actions,
        dashboard,
        group,
        hooks,
        index,
        live,
        log_page,
        pools,
        secrets,
        sessions,
        task,
        workers,
    )
    from taskyard.ui.render import UI

    ui = UI(services)
    found: list[BaseRoute] = [
        Mount("/ui/static", app=StaticFiles(directory=STATIC), name="static"),
        Route("/favicon.ico", favicon, methods=["GET"]),  # browsers ask for it whatever the page says
    ]
    # sessions and actions first: `/tasks/create` must match before a page module's `/tasks/{taskId}`.
    for module in (
        sessions,
        actions,
        dashboard,
        group,
        task,
        log_page,
        workers,
        index,
        secrets,
        hooks,
        pools,
        live,
    ):
        found += module.routes(ui)
    return ui, found


class Pages(BaseRoute):
    """Every route of the UI as one route of the app, built on first use (see the module's
    docstring). It matches as the UI's routes would in its place: the first that matches fully,
    else the first with the path but another method (405); the request is then handled by that
    route, which `scope["route"]` names (as the router would have put it there).

    It is the app's `Site` (`api.app.build_app(services, site)`): the server's composition root
    mounts it, and the API never imports the UI."""

    def __init__(self, services: Services) -> None:
        self._services = services
        self._built: tuple[UI, list[BaseRoute]] | None = None

    @property
    def route(self) -> BaseRoute:
        """The one route the app holds for the UI: this."""
        return self

    async def not_found(self, request: Request) -> Response | None:
        """The HTML 404 page for a browser asking for a page that does not exist; None otherwise."""
        if not wants_page(request):
            return None
        return await self.ui.error(request, 404, "Not found", f"There is no page at {request.url.path}.")

    async def apis_page(self, request: Request, root_url: str, services: list[str]) -> Response:
        from taskyard.ui import reference

        return await reference.apis_page(self.ui, request, root_url, services)

    async def reference_page(self, request: Request, service: str, document: dict[str, object]) -> Response:
        from taskyard.ui import reference

        return await reference.reference_page(self.ui, request, service, document)

    @property
    def built(self) -> bool:
        return self._built is not None

    @property
    def ui(self) -> UI:
        return self._build()[0]

    @property
    def routes(self) -> list[BaseRoute]:
        return self._build()[1]

    def _build(self) -> tuple[UI, list[BaseRoute]]:
        if self._built is None:
            self._built = build(self._services)
        return self._built

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if get_route_path(scope).startswith(API_PREFIX):
            return Match.NONE, {}
        partial: tuple[Match, Scope] | None = None
        for route in self.routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                return match, {**child, "route": route}
            if match is Match.PARTIAL and partial is None:
                partial = match, {**child, "route": route}
        return partial or (Match.NONE, {})

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        route: BaseRoute = scope["route"]  # the page's route, from `matches()`
        await route.handle(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        for route in self.routes:
            try:
                return route.url_path_for(name, **path_params)
            except NoMatchFound:
                pass
        raise NoMatchFound(name, path_params)


@functools.cache
def _favicon() -> bytes:
    return (STATIC / "favicon.ico").read_bytes()


async def favicon(request: Request) -> Response:
    """The site's icon, where every browser looks for one: its bytes whole, whatever `Range` the
    request has (a file response would answer a bad range with a bare 400)."""
    return Response(_favicon(), media_type="image/x-icon", headers={"cache-control": "max-age=86400"})


def wants_page(request: Request) -> bool:
    """A browser asking for a page outside the APIs (answered in HTML, not JSON)."""
    path = request.url.path
    return not path.startswith(API_PREFIX) and "text/html" in request.headers.get("accept", "")
