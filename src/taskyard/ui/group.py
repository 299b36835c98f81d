"""The task-group pages: `/groups/{taskGroupId}` (its tasks, counts by state, a filter by state
and text) and `/groups/{taskGroupId}/graph` (its dependency graph, drawn on the server).

Both work without JavaScript: the filter is a GET form (`?state=failed&q=build`) the server
applies; `static/group.js` filters the rows already shown as one types, and follows the group's
live updates (`ui/live.py`). See docs/ui.md, "A task group and its graph".
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from taskyard.queue import groups
from taskyard.ui import graph_layout, group_rows, group_svg, live
from taskyard.ui.render import view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.ui.render import UI


async def group_page(ui: UI, request: Request) -> Response:
    task_group_id = request.path_params["taskGroupId"]
    keep = group_rows.Filter.parse(request.query_params)
    follow = live.group_url(ui, task_group_id)  # before reading: the stream replays what follows
    group, rows = await group_rows.read_group(ui.services.queue, task_group_id, "ui_group_tasks")
    table, shown = group_rows.table_rows(rows, keep, ui.now())
    return await ui.page(
        request,
        "group.html",
        group=group,
        counts=group_rows.counts(rows),
        total=len(rows),
        rows=table,
        shown=shown,
        filter=keep,
        states=graph_layout.STATES,
        live_url=follow,
    )


async def graph_page(ui: UI, request: Request) -> Response:
    task_group_id = request.path_params["taskGroupId"]
    group, rows = await group_rows.read_group(ui.services.queue, task_group_id, "ui_group_graph")
    drawing, picture = group_svg.graph_svg(rows, task_group_id, graph_layout.THRESHOLD)
    return await ui.page(
        request,
        "group_graph.html",
        group=group,
        counts=group_rows.counts(rows),
        total=len(rows),
        drawing=drawing,
        picture=picture,
        threshold=graph_layout.THRESHOLD,
        states=graph_layout.STATES,
    )


async def trailing_slash(ui: UI, request: Request) -> Response:
    """`/groups/<id>/` is the group's page, once the id is known to be one."""
    task_group_id = groups.check_group_id(request.path_params["taskGroupId"])
    query = request.url.query
    return RedirectResponse(f"/groups/{task_group_id}" + (f"?{query}" if query else ""), 308)


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/groups/{taskGroupId}", view(group_page)(ui), methods=["GET"]),
        Route("/groups/{taskGroupId}/", view(trailing_slash)(ui), methods=["GET"]),
        Route("/groups/{taskGroupId}/graph", view(graph_page)(ui), methods=["GET"]),
    ]
