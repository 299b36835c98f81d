"""`GET /index` and `GET /index/{namespace}`: browse the index service's namespaces and entries.

A page lists the namespaces directly under `namespace` (the root for `/index`) and the tasks
indexed directly in it, each a page at a time (`?namespaces=<token>`, `?tasks=<token>`), each
task linked to its page and its artifacts. It reads through the API's call pipeline as the
viewer: the index's own `listNamespaces` and `listTasks`, with their scopes
(`index:list-namespaces:<namespace>`, `index:list-tasks:<namespace>`).
"""

from __future__ import annotations

from typing import cast

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from taskyard.api import calls
from taskyard.api.routing import check_params
from taskyard.index import entries
from taskyard.ui import access
from taskyard.ui.render import UI, view

PAGE = 100  # namespaces, and tasks, shown a page


async def index_page(ui: UI, request: Request) -> Response:
    namespace = request.path_params.get("namespace", "")
    params = check_params({"namespace": namespace})
    spaces_query, tasks_query = {"limit": str(PAGE)}, {"limit": str(PAGE)}
    if token := request.query_params.get("namespaces"):
        spaces_query["continuationToken"] = token
    if token := request.query_params.get("tasks"):
        tasks_query["continuationToken"] = token
    spaces = cast(
        entries.NamespaceList,
        await access.read(ui, request, calls.route("listNamespaces", "index"), params, spaces_query),
    )
    listed = cast(
        entries.TaskList,
        await access.read(ui, request, calls.route("listTasks", "index"), params, tasks_query),
    )
    parts = namespace.split(".") if namespace else []
    crumbs = [(".".join(parts[: i + 1]), part) for i, part in enumerate(parts)]
    tasks = [
        {**t, "data_text": orjson.dumps(t["data"]).decode() if t["data"] else ""} for t in listed["tasks"]
    ]
    return await ui.page(
        request,
        "index.html",
        namespace=namespace,
        crumbs=crumbs,
        namespaces=spaces["namespaces"],
        more_namespaces=spaces.get("continuationToken"),
        tasks=tasks,
        more_tasks=listed.get("continuationToken"),
    )


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/index", view(index_page)(ui), methods=["GET"]),
        Route("/index/{namespace}", view(index_page)(ui), methods=["GET"]),
    ]
