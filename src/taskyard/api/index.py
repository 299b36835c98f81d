"""What is served here: `/api/<service>/v1/` answers a JSON index of the service's routes, and `/api`
a small page naming the deployment, its API indexes and how to use the command line, rendered by the
web UI as one of its pages when the app has one (`Site.apis_page`). Public. (`/` is the web UI's
dashboard.)"""

from __future__ import annotations

import html

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route as StarletteRoute

from taskyard import __version__
from taskyard.api.routing import Route
from taskyard.model.apis import API_VERSION, command_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.api.app import Site

VERSION = API_VERSION


def service_index(service: str, table: list[Route]) -> dict[str, object]:
    """The JSON index of `service`: its version, taskyard's, and every route in its table."""
    return {
        "service": service,
        "version": VERSION,
        "taskyard": __version__,
        "routes": [{"name": r.name, "method": r.method, "path": r.path} for r in table],
        "docs": "/api",
        "openapi": f"/api/{service}/{VERSION}/openapi.json",
        "reference": f"/api/{service}/{VERSION}/reference",
    }


def root_page(root_url: str, services: list[str]) -> str:
    """The page `/api` answers: what this deployment is and where to go from here."""
    url = html.escape(root_url)
    indexes = "\n".join(
        f'<li><a href="/api/{s}/{VERSION}/"><code>{url}/api/{s}/{VERSION}/</code></a>: '
        f"the {s} API, its routes as JSON; its "
        f'<a href="/api/{s}/{VERSION}/reference">reference</a> and '
        f'<a href="/api/{s}/{VERSION}/openapi.json">OpenAPI document</a></li>'
        for s in services
    )
    return f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>taskyard {__version__}</title></head>
<body>
<h1>taskyard {__version__}</h1>
<p><a href="/">The dashboard</a>: task queues, groups, tasks and workers in the browser.</p>
<p>TaskCluster's queue (and the auth service it needs), served at <code>{url}</code>.
Use it with any TaskCluster client, setting <code>TASKCLUSTER_ROOT_URL={url}</code>.</p>
<h2>APIs</h2>
<ul>
{indexes}
</ul>
<p>Prometheus metrics: <a href="/metrics"><code>{url}/metrics</code></a>.</p>
<h2>The command line</h2>
<pre>
{html.escape(command_line(root_url))}</pre>
</body>
</html>
"""


def routes(root_url: str | None, tables: dict[str, list[Route]]) -> list[StarletteRoute]:
    """`GET /api`, and `GET /api/<service>/v1/` (with or without the final `/`) for each table."""
    found = []
    for service, table in tables.items():
        body = service_index(service, table)

        async def index(request: Request, content: bytes = orjson.dumps(body)) -> Response:
            return Response(content, media_type="application/json")

        prefix = f"/api/{service}/{VERSION}"
        found += [StarletteRoute(path, index, methods=["GET"]) for path in (prefix + "/", prefix)]

    async def root(request: Request) -> Response:
        here = root_url or str(request.base_url).rstrip("/")
        site: Site | None = request.app.state.site  # the web UI renders it as one of its pages, if any
        if site is not None:
            return await site.apis_page(request, here, list(tables))
        return HTMLResponse(root_page(here, list(tables)))

    return [
        *found,
        StarletteRoute("/api", root, methods=["GET"]),
        StarletteRoute("/api/", root, methods=["GET"]),
    ]
