"""The task page: `/tasks/{taskId}`, a task's definition, status, runs, artifacts, relations and log.

Everything a task holds was written by whoever created it, so the page only ever shows it through
the templates' escaping (and the log through `ui/ansi.py`). The page needs the scopes the API's
`task` and `status` need (its dependents are listed only with `listDependentTasks`'), and shows the
log as getArtifact would give it to the viewer. Every read goes through the API's call pipeline as
the viewer (`ui/access.py`): the `task`, `status` and `listDependentTasks` routes, and the guarded
operations of `api/pages.py` for what no route answers. `/tasks/{taskId}/status` answers the
task's status as JSON (the status the page shows, to the same viewers), which `static/task.js`
polls to update the page while the task is unresolved.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, cast

import yaml
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from taskyard.api import calls, pages
from taskyard.model import dates, digits
from taskyard.model.errors import InvalidRequestArguments, ResourceNotFound
from taskyard.model.status import RunStatus, StatusAnswer
from taskyard.model.task_definition import TaskDefinition
from taskyard.queue import inspect
from taskyard.queue.tasks import check_task_id
from taskyard.ui import access, task_log
from taskyard.ui.render import SECURITY_HEADERS, UI, view

UNRESOLVED = ("unscheduled", "pending", "running")
SHOWN_RELATIONS = pages.SHOWN_RELATIONS  # dependencies and dependents listed with their state
RUN_DIGITS = 3  # a task has at most a few dozen runs
TIMELINE_WIDTH = 1000


class TaskIdConvertor(Convertor[str]):
    """A path segment shaped like a taskId; other words under /tasks/ (/tasks/create) are other pages'."""

    regex = "[A-Za-z0-9_-]{22}"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("taskid", TaskIdConvertor())
DEPENDENTS = calls.route("listDependentTasks")


def chosen_run(request: Request, runs: list[RunStatus]) -> int | None:
    """The run whose log is shown: `?run=N`, else the latest (None: the task has no runs)."""
    asked = request.query_params.get("run")
    if asked is None or asked == "":
        return len(runs) - 1 if runs else None
    run_id = digits.parse_whole(asked, RUN_DIGITS)
    if run_id is None:
        raise InvalidRequestArguments(f"run must be a run's number (got {asked[:40]!r})")
    if run_id >= len(runs):
        raise ResourceNotFound(f"the task has no run {run_id}")
    return run_id


def _run_view(run: RunStatus, now: int) -> dict[str, Any]:
    """A run with its times in ms: scheduled, started (if), ended (resolved, or now while it lasts),
    and how long it waited and ran."""
    scheduled = dates.parse_iso(run["scheduled"])
    started = dates.parse_iso(run["started"]) if "started" in run else None
    ended = dates.parse_iso(run["resolved"]) if "resolved" in run else now
    waited = (started or ended) - scheduled
    ran = ended - started if started is not None else None
    times = {"at": scheduled, "from": started, "to": max(ended, scheduled)}
    return {**run, "waited": max(0, waited), "ran": None if ran is None else max(0, ran), "times": times}


# The runs' timeline, in SVG units: a row per run, labelled in a gutter on the left, then a time
# axis in UTC below them.
PLOT_LEFT, PLOT_RIGHT = 64, TIMELINE_WIDTH - 8
ROW = 18
MIN_BAR = 4  # the least width a bar is drawn with, so that a run of a moment (or one just made) shows
TICK_STEPS = (
    [100, 200, 500]  # a run of a second or two still gets an axis of two ticks or more
    + [s * 1000 for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200)]
    + [d * 86_400_000 for d in (1, 2, 7, 14, 30, 91, 365)]
)
MOST_TICKS = 6


def axis_ticks(start: int, end: int) -> list[tuple[int, str]]:
    """The axis' ticks between `start` and `end` (ms): round UTC times, at most MOST_TICKS of them,
    as (ms, label); a label shows what changes at that step (the date, the minute or the second)."""
    span = max(1, end - start)
    step = next((s for s in TICK_STEPS if span / s <= MOST_TICKS), TICK_STEPS[-1])
    first = -(-start // step) * step
    ticks = []
    for at in range(first, end + 1, step):
        iso = dates.to_iso(at)  # 2026-11-29T10:15:26.000Z
        if step >= 86_400_000:
            label = iso[5:10]  # 11-29
        elif step >= 60_000:
            label = iso[11:16]  # 10:15
        else:
            label = iso[11:19] if step >= 1000 else iso[11:21]  # 10:15:26, or 10:15:26.5
        ticks.append((at, label))
    return ticks


def timeline(runs: list[dict[str, Any]], width: int = TIMELINE_WIDTH) -> dict[str, Any]:
    """The runs on one time axis (the first run's scheduling to the last run's end): for each run,
    its row's bars as (x, width) in SVG units, waiting (scheduled to started) and running (started
    to its end), each at least MIN_BAR wide and inside the plot, so that a run of a moment, or a
    rerun's run just made at the end of a long axis, still shows; and the axis' ticks."""
    if not runs:
        return {"bars": [], "ticks": [], "height": 0, "axis": 0, "left": PLOT_LEFT, "right": PLOT_RIGHT}
    left, right = PLOT_LEFT, width - (TIMELINE_WIDTH - PLOT_RIGHT)
    plot = right - left
    start: int = runs[0]["times"]["at"]
    end: int = max(r["times"]["to"] for r in runs)
    span: int = max(1, end - start)

    def x(ms: int) -> int:
        return left + round((ms - start) * plot / span)

    def bar(x0: int, x1: int) -> tuple[int, int]:
        wide = max(MIN_BAR, x1 - x0)
        return min(x0, right - wide), wide

    bars = []
    for row, r in enumerate(runs):
        t = r["times"]
        begun = t["from"] if t["from"] is not None else t["to"]
        wait = bar(x(t["at"]), x(begun))
        ran = bar(max(x(begun), wait[0] + wait[1]), x(t["to"])) if t["from"] is not None else None
        bars.append({"runId": r["runId"], "state": r["state"], "y": row * ROW + 4, "wait": wait, "run": ran})
    axis = len(runs) * ROW + 6
    ticks = [
        {
            "x": x(at),
            "label": label,
            "anchor": "start" if x(at) < left + 24 else "end" if x(at) > right - 24 else "middle",
        }
        for at, label in axis_ticks(start, end)
    ]
    return {"bars": bars, "ticks": ticks, "height": axis + 22, "axis": axis, "left": left, "right": right}


async def _artifacts(ui: UI, request: Request, task_id: str) -> tuple[dict[int, list[dict[str, Any]]], bool]:
    """The task's artifacts by run (at most pages.SHOWN_ARTIFACTS), and whether there are more."""
    listed = await access.read(ui, request, pages.TASK_ARTIFACTS, {"taskId": task_id})
    by_run: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for entry in listed["artifacts"]:
        url = task_log.artifact_url(task_id, entry["runId"], entry["name"])
        by_run[entry["runId"]].append({**entry, "url": url})
    return dict(by_run), listed["more"]


async def _dependents(ui: UI, request: Request, task_id: str) -> tuple[list[dict[str, Any]], bool] | None:
    """The first dependents with their states, and whether there are more (listDependentTasks'
    answer); None: the viewer may not list them."""
    query = {"limit": str(SHOWN_RELATIONS)}
    answer = await access.attempt(ui, request, DEPENDENTS, {"taskId": task_id}, query)
    if answer is None:
        return None
    listed = cast(inspect.Dependents, answer)
    found = [
        {
            "taskId": t["status"]["taskId"],
            "name": t["task"]["metadata"]["name"],
            "state": t["status"]["state"],
        }
        for t in listed["tasks"]
    ]
    return found, "continuationToken" in listed


def _source_link(source: object) -> str | None:
    """metadata.source as a link only if it is a web address (never `javascript:` and the like)."""
    text = str(source)
    return text if text.startswith(("https://", "http://")) else None


def definition_texts(definition: Any) -> tuple[str, str]:
    """The definition as YAML and as JSON, keys in the order the task has them."""
    as_yaml = yaml.dump(
        definition,
        Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),  # libyaml's when there: a big payload is quick
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )
    return as_yaml, json.dumps(definition, indent=2, ensure_ascii=False)


async def task_page(ui: UI, request: Request) -> Response:
    task_id = check_task_id(request.path_params["taskId"])
    params = {"taskId": task_id}
    definition = cast(TaskDefinition, await access.read(ui, request, calls.route("task"), params))
    status = cast(StatusAnswer, await access.read(ui, request, calls.route("status"), params))["status"]
    run_id = chosen_run(request, status["runs"])
    log = None
    if run_id is not None:
        run_state = status["runs"][run_id]["state"]
        log = await task_log.read(ui, request, task_id, run_id, run_state, task_log.log_name(definition))
    by_run, more_artifacts = await _artifacts(ui, request, task_id)
    listed = await _dependents(ui, request, task_id)
    dependents, more_dependents = listed if listed is not None else ([], False)
    as_yaml, as_json = definition_texts(definition)
    runs = [_run_view(r, ui.now()) for r in status["runs"]]
    dependencies = (
        cast(list[Any] | None, await access.read(ui, request, pages.TASK_DEPENDENCIES, params)) or []
    )
    blocked_by, waiting_for = _unscheduled(definition, dependencies)
    return await ui.page(
        request,
        "task.html",
        task_id=task_id,
        task=definition,
        task_status=status,
        state=status["state"],
        resolved=status["state"] not in UNRESOLVED,
        runs=runs,
        timeline=timeline(runs),
        run_id=run_id,
        log=log,
        artifacts=by_run,
        more_artifacts=more_artifacts,
        dependencies=dependencies,
        blocked_by=blocked_by,
        waiting_for=waiting_for,
        dependency_count=len(definition.get("dependencies", [])),
        dependents=dependents,
        dependents_shown=listed is not None,
        dependents_need=access.needs(DEPENDENTS, params),
        more_dependents=more_dependents,
        source_link=_source_link(definition["metadata"]["source"]),
        definition_yaml=as_yaml,
        definition_json=as_json,
        signature=signature(status["state"], [r["state"] for r in status["runs"]]),
        shown=SHOWN_RELATIONS,
    )


def _unscheduled(definition: TaskDefinition, shown: list[Any]) -> tuple[Any, int]:
    """Why an unscheduled task has no run: the first dependency (of those shown) that did not
    complete when the task requires all-completed (it is blocked for good), and how many of its
    dependencies it still waits for (those shown that are not done, and all beyond them)."""
    requires = definition.get("requires", "all-completed")
    if requires == "all-completed":
        for dependency in shown:
            if dependency["state"] in ("failed", "exception", "gone"):
                return dependency, 0
    done = ("completed",) if requires == "all-completed" else ("completed", "failed", "exception")
    total = len(definition.get("dependencies", []))
    return None, total - sum(1 for d in shown if d["state"] in done)


def signature(state: str, run_states: list[str]) -> str:
    """What task.js compares to know the page is out of date: the state and every run's."""
    return f"{state}:{','.join(run_states)}"


async def task_status(ui: UI, request: Request) -> Response:
    """The task's status as JSON, for the page's script (to whoever may read the page)."""
    task_id = check_task_id(request.path_params["taskId"])
    answer = await access.read(ui, request, pages.TASK_STATUS, {"taskId": task_id})
    return JSONResponse({"status": answer["status"]}, headers=SECURITY_HEADERS)


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/tasks/{taskId:taskid}", view(task_page)(ui), methods=["GET"]),
        Route("/tasks/{taskId:taskid}/status", view(task_status)(ui), methods=["GET"]),
    ]
