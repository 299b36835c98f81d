"""The UI's routes: each page module's, the static files, and the HTML 404 for unknown pages."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from taskyard.ui import actions, dashboard, group, live, sessions, task, workers
from taskyard.ui.render import UI

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.api.app import Services

STATIC = Path(__file__).parent / "static"
# sessions and actions first: `/tasks/create` must match before a page module's `/tasks/{taskId}`.
MODULES = (sessions, actions, dashboard, group, task, workers, live)


def routes(services: Services) -> tuple[UI, list[BaseRoute]]:
    """The UI bound to `services`, and every route it serves (`/`, `/groups/...`, `/ui/static/...`)."""
    ui = UI(services)
    found: list[BaseRoute] = [Mount("/ui/static", app=StaticFiles(directory=STATIC), name="static")]
    for module in MODULES:
        found += module.routes(ui)
    return ui, found


def wants_page(request: Request) -> bool:
    """A browser asking for a page outside the APIs (answered in HTML, not JSON)."""
    path = request.url.path
    return not path.startswith("/api/") and "text/html" in request.headers.get("accept", "")


async def not_found(ui: UI, request: Request) -> Response:
    return await ui.error(request, 404, "Not found", f"There is no page at {request.url.path}.")
