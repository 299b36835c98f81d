"""The OpenAPI 3.1 document of each service, built from its route table, and an HTML reference.

Nothing here is written twice: each operation's path, method, name, scopes and stability come
from its `Route`, its request body's schema is the one the API validates with (`Route.input`), and
its answer's is `Route.output` where the route has one, else the TypedDict its handler is
annotated to return (`api/answers.py`); the tests check real answers against both. A route whose
handler answers something else (a redirect, a stream) documents its answer as any JSON value.
Every error is TaskCluster's `{code, message, requestInfo}` (`ERROR`).

Served at `/api/<service>/v1/openapi.json` and, as a page, `/api/<service>/v1/reference`: the web
UI renders the page in its style (`Site.reference_page`, `ui/reference.py`) when the app has one,
else `reference_page` here answers plain HTML. Public.
"""

from __future__ import annotations

import html
import re

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route as StarletteRoute

from taskyard import __version__
from taskyard.api import answers
from taskyard.api.routing import PARAM_PATTERNS, Route
from taskyard.model import schema
from taskyard.model.apis import API_VERSION

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.api.app import Site

VERSION = API_VERSION
_PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")

ERROR = schema.obj(
    {
        "code": schema.string(),
        "message": schema.string(),
        "requestInfo": schema.obj(
            {
                "method": schema.string(),
                "params": schema.obj(additional=schema.string()),
                "payload": schema.anything(),  # the body as sent, whatever it was
                "time": schema.date_time(),
            },
            required=["method", "params", "time"],
        ),
    },
    required=["code", "message", "requestInfo"],
)
"""Every error answer, as `api/errors.py` renders it."""

HAWK = (
    "TaskCluster's Hawk authentication: an `Authorization: Hawk id=..., ts=..., nonce=..., "
    "hash=..., mac=...` header signed with a client's accessToken (sha256, payload hash over the "
    "body), as the TaskCluster clients send it; temporary credentials carry their certificate "
    "in `ext`. Each operation's `x-taskcluster-scopes` is the scope expression the client needs "
    "(`<param>` filled from the path and body)."
)


def document(service: str, table: list[Route]) -> dict[str, object]:
    """The OpenAPI 3.1 document of `service`, served below `/api/<service>/v1`."""
    paths: dict[str, dict[str, object]] = {}
    for route in table:
        paths.setdefault(_PARAM.sub(r"{\1}", route.path), {})[route.method.lower()] = operation(
            service, route
        )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": f"taskyard {service} API",
            "version": f"{VERSION} (taskyard {__version__})",
            "description": f"TaskCluster's {service} service as taskyard serves it.",
        },
        "servers": [{"url": f"/api/{service}/{VERSION}"}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "hawk": {"type": "apiKey", "in": "header", "name": "Authorization", "description": HAWK}
            },
            "schemas": {"Error": ERROR.json()},
        },
    }


def operation(service: str, route: Route) -> dict[str, object]:
    """One route as an OpenAPI operation."""
    error = {
        "description": "an error",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    answer = answers.answer_schema(route)
    op: dict[str, object] = {
        "operationId": route.name,
        "summary": route.name,
        "tags": [service],
        "parameters": [_parameter(name) for name in _PARAM.findall(route.path)],
        "responses": {
            "200": {"description": "the answer", "content": {"application/json": {"schema": answer}}},
            "4XX": error,
            "5XX": error,
        },
        "security": [] if route.scopes is None else [{"hawk": []}],
        "x-taskcluster-stability": route.stability,
    }
    if route.scopes is not None:
        op["x-taskcluster-scopes"] = route.scopes
    if route.input is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": route.input.json()}},
        }
    if route.stability == "deprecated":
        op["deprecated"] = True
    return op


def _parameter(name: str) -> dict[str, object]:
    rule: dict[str, object] = {"type": "string"}
    if name in PARAM_PATTERNS:
        rule["pattern"] = PARAM_PATTERNS[name]
    return {"name": name, "in": "path", "required": True, "schema": rule}


def reference_page(service: str, doc: dict[str, object]) -> str:
    """The document as a page: one section per operation, its scopes and schemas shown as JSON."""
    paths = doc["paths"]
    assert isinstance(paths, dict)
    sections = [
        _section(method, path, op) for path, methods in paths.items() for method, op in methods.items()
    ]
    toc = "\n".join(
        f'<li><a href="#{html.escape(op["operationId"])}">{html.escape(op["operationId"])}</a></li>'
        for methods in paths.values()
        for op in methods.values()
    )
    title = f"taskyard {html.escape(service)} API {VERSION}"
    return f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:60rem;margin:auto;padding:1rem}}
pre{{background:#f4f4f4;padding:.5rem;overflow-x:auto}}code{{background:#f4f4f4}}</style></head>
<body>
<h1>{title}</h1>
<p>Base URL <code>/api/{html.escape(service)}/{VERSION}</code>; the same as
<a href="openapi.json">an OpenAPI 3.1 document</a>. Calls with scopes are signed with Hawk, as the
TaskCluster clients sign them. Errors answer <code>{{code, message, requestInfo}}</code>.</p>
<nav><ul>
{toc}
</ul></nav>
{"".join(sections)}
</body>
</html>
"""


def _section(method: str, path: str, op: dict[str, object]) -> str:
    name = html.escape(str(op["operationId"]))
    parts = [f'<section id="{name}"><h2>{name}</h2>', f"<p><code>{method.upper()} {html.escape(path)}</code>"]
    parts.append(f" ({html.escape(str(op['x-taskcluster-stability']))})</p>")
    scopes = op.get("x-taskcluster-scopes")
    parts.append("<p>Public: no scopes needed.</p>" if scopes is None else f"<p>Scopes:</p>{_json(scopes)}")
    body = op.get("requestBody")
    if isinstance(body, dict):
        parts.append(f"<p>Request body:</p>{_json(body['content']['application/json']['schema'])}")
    responses = op["responses"]
    assert isinstance(responses, dict)
    parts.append(
        f"<p>Answer:</p>{_json(responses['200']['content']['application/json']['schema'])}</section>\n"
    )
    return "".join(parts)


def _json(value: object) -> str:
    return f"<pre>{html.escape(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())}</pre>"


class Documents:
    """A service's document, as JSON and as its reference page, built on the first request for
    either (not with the app: the server's start would wait for every service's)."""

    def __init__(self, service: str, table: list[Route]) -> None:
        self.service = service
        self.table = table
        self._built: tuple[dict[str, object], bytes] | None = None
        self._page: str | None = None

    def built(self) -> tuple[dict[str, object], bytes]:
        """The document, and its JSON."""
        if self._built is None:
            doc = document(self.service, self.table)
            self._built = doc, orjson.dumps(doc)
        return self._built

    def page(self) -> str:
        """The plain HTML reference (an app without a site)."""
        if self._page is None:
            self._page = reference_page(self.service, self.built()[0])
        return self._page


def routes(tables: dict[str, list[Route]]) -> list[StarletteRoute]:
    """`GET /api/<service>/v1/openapi.json` and `/api/<service>/v1/reference` for each table."""
    found = []
    for service, table in tables.items():
        documents = Documents(service, table)

        async def as_json(request: Request, documents: Documents = documents) -> Response:
            return Response(documents.built()[1], media_type="application/json")

        async def as_page(request: Request, documents: Documents = documents) -> Response:
            site: Site | None = request.app.state.site
            if site is not None:
                return await site.reference_page(request, documents.service, documents.built()[0])
            return HTMLResponse(documents.page())

        prefix = f"/api/{service}/{VERSION}"
        found += [
            StarletteRoute(prefix + "/openapi.json", as_json, methods=["GET"]),
            StarletteRoute(prefix + "/reference", as_page, methods=["GET"]),
        ]
    return found
