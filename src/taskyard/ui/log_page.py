"""The log viewer: `/tasks/{taskId}/log?run=N`, a run's log on a page of its own.

The log is read as the task page reads it (`ui/task_log.py`: the same artifact, followed with the
viewer's getArtifact scopes through the pipeline; the last MiB, starting at a line), and shown a
line a row: each with its number in the whole log, a link to it (`#L<number>`, the line marked
when the page opens there), and, with `?q=`, the lines containing the text (ignoring case) marked
and counted. `static/log.js` searches as one types (Enter: the next match) and, while the run
runs, follows the live log from where the page ends, a line at a time, scrolled to the end
while "Follow" is on. The page needs the task page's scopes (`task`, `status`).
"""

from __future__ import annotations

from typing import cast

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from taskyard.api import calls
from taskyard.model.errors import InvalidRequestArguments
from taskyard.model.status import StatusAnswer
from taskyard.model.task_definition import TaskDefinition
from taskyard.queue.tasks import check_task_id
from taskyard.ui import access, ansi, task, task_log
from taskyard.ui.render import UI, view

MAX_QUERY = 200  # characters of a search


def search_of(request: Request) -> str:
    """`?q=`: the text to look for; 400 naming the parameter if it is too long or holds controls."""
    text = request.query_params.get("q", "")
    if len(text) > MAX_QUERY:
        raise InvalidRequestArguments(f"query parameter q is {len(text)} characters; at most {MAX_QUERY}")
    if any(ord(c) < 0x20 or c == "\x7f" for c in text):
        raise InvalidRequestArguments("query parameter q may not contain control characters")
    return text


def numbered(data: bytes, first: int, search: str) -> tuple[list[tuple[int, Markup, bool]], int]:
    """The shown part's lines as (number, html, matches `search`), and how many match."""
    folded = search.casefold()
    lines = []
    matches = 0
    for i, (html, plain) in enumerate(ansi.to_lines(ansi.decode(data))):
        hit = bool(folded) and folded in plain.casefold()
        matches += hit
        lines.append((first + i, html, hit))
    return lines, matches


async def log_page(ui: UI, request: Request) -> Response:
    task_id = check_task_id(request.path_params["taskId"])
    search = search_of(request)
    params = {"taskId": task_id}
    definition = cast(TaskDefinition, await access.read(ui, request, calls.route("task"), params))
    status = cast(StatusAnswer, await access.read(ui, request, calls.route("status"), params))["status"]
    run_id = task.chosen_run(request, status["runs"])
    log = None
    lines: list[tuple[int, Markup, bool]] = []
    matches = 0
    if run_id is not None:
        run_state = status["runs"][run_id]["state"]
        log = await task_log.read(ui, request, task_id, run_id, run_state, task_log.log_name(definition))
        lines, matches = numbered(log.data, log.first_line or 1, search)
    return await ui.page(
        request,
        "log.html",
        task_id=task_id,
        task=definition,
        state=status["state"],
        runs=status["runs"],
        run_id=run_id,
        log=log,
        lines=lines,
        numbers_known=log is None or log.first_line is not None,
        open_line=bool(lines) and log is not None and not log.data.endswith((b"\n", b"\r")),
        search=search,
        matches=matches,
    )


def routes(ui: UI) -> list[BaseRoute]:
    return [Route("/tasks/{taskId:taskid}/log", view(log_page)(ui), methods=["GET"])]
