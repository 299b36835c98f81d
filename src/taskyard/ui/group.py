"""The task-group pages: `/groups/{taskGroupId}` (its tasks, counts by state, a filter by state
and text) and `/groups/{taskGroupId}/graph` (its dependency graph, drawn on the server).

Both work without JavaScript: the filter is a GET form (`?state=failed&q=build`) the server
applies; `static/group.js` filters the rows already shown as one types, and follows the group's
live updates (`ui/live.py`). See docs/ui.md, "A task group and its graph".
"""

from __future__ import annotations

from urllib.parse import urlencode

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from taskyard.api import pages as reads
from taskyard.queue import groups
from taskyard.ui import access, graph_layout, group_rows, group_svg, live
from taskyard.ui.render import view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.api.calls import Operation
    from taskyard.api.pages import GroupTask
    from taskyard.queue.groups import TaskGroup
    from taskyard.ui.render import UI


async def group_page(ui: UI, request: Request) -> Response:
    task_group_id = groups.check_group_id(request.path_params["taskGroupId"])
    keep = group_rows.Filter.parse(request.query_params)
    follow = live.group_url(ui, task_group_id)  # before reading: the stream replays what follows
    group, rows = await read_group(ui, request, task_group_id, reads.GROUP_TABLE)
    kept = group_rows.matching(rows, keep, ui.now())
    first = (keep.page - 1) * group_rows.PAGE_ROWS
    shown = kept[first : first + group_rows.PAGE_ROWS]
    return await ui.page(
        request,
        "group.html",
        group=group,
        counts=group_rows.counts(rows),
        total=len(rows),
        rows=group_rows.table_rows(shown, ui.now()),
        matching=len(kept),
        first=first,
        shown=len(shown),
        pages=pages(request, keep, len(kept)),
        page_rows=group_rows.PAGE_ROWS,
        filter=keep,
        sorts=sort_links(keep),
        states=graph_layout.STATES,
        live_url=follow,
    )


async def read_group(
    ui: UI, request: Request, task_group_id: str, step: Operation[reads.GroupRows]
) -> tuple[TaskGroup, list[GroupTask]]:
    """The group and its tasks' rows (`reads.GROUP_TABLE`'s or `GROUP_GRAPH`'s), if the viewer may
    list the group as the API's listTaskGroup would; else the refusal. 404 for an unknown group."""
    found = await access.read(ui, request, step, {"taskGroupId": task_group_id})
    return found.group, found.rows


def pages(request: Request, keep: group_rows.Filter, matching: int) -> dict[str, str]:
    """The links to the previous and next page of the table (none where there is none)."""
    found = {}
    last = max(1, -(-matching // group_rows.PAGE_ROWS))
    for name, page in (("previous", keep.page - 1), ("next", keep.page + 1)):
        if 1 <= page <= last:
            found[name] = "?" + urlencode(keep.query(page=str(page)))
    return found


def sort_links(keep: group_rows.Filter) -> dict[str, dict[str, str]]:
    """For each sortable column: the link that sorts by it (the other way if it is the order now,
    on the first page, with the filter kept) and its `aria-sort` (ascending, descending or none)."""
    found = {}
    for column in group_rows.SORTS:
        now = "ascending" if keep.sort == column else "descending" if keep.sort == "-" + column else "none"
        then = "-" + column if now == "ascending" else column
        found[column] = {"href": "?" + urlencode(keep.query(sort=then, page="1")), "aria": now, "sort": then}
    return found


async def rows_json(ui: UI, request: Request) -> Response:
    """Every task of the group as the page's script filters them: `{taskGroupId, rows}`."""
    task_group_id = groups.check_group_id(request.path_params["taskGroupId"])
    group, rows = await read_group(ui, request, task_group_id, reads.GROUP_TABLE)
    body = {"taskGroupId": group["taskGroupId"], "rows": group_rows.json_rows(rows, ui.now())}
    return Response(orjson.dumps(body), 200, {"cache-control": "no-store"}, "application/json")


async def graph_page(ui: UI, request: Request) -> Response:
    task_group_id = groups.check_group_id(request.path_params["taskGroupId"])
    group, rows = await read_group(ui, request, task_group_id, reads.GROUP_GRAPH)
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
        Route("/groups/{taskGroupId}/rows", view(rows_json)(ui), methods=["GET"]),
    ]
