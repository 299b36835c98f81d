"""createTaskGraph, extendTaskGraph, and reading a graph: status, info, inspect, inspectTask.

A graph's tasks are created in the queue in the same transaction as the graph, each with the
tasks it requires as its in-queue `dependencies`: the queue holds a task back until they all
completed, even while no scheduler runs, and a refused graph leaves no task behind. The queue
creates them as the graph's scopes allow, never as the caller's wider ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

import orjson

from taskyard.model import dates, scopes, slugid, task_graph
from taskyard.model.errors import (
    InputError,
    InsufficientScopes,
    RequestConflict,
    ResourceNotFound,
    TaskyardError,
)
from taskyard.model.guard import Guard
from taskyard.model.messages import graph_message
from taskyard.model.task_definition import TaskDefinition
from taskyard.model.task_graph import Graph, Node
from taskyard.model.types import LooseJSON
from taskyard.queue import service as queue_service
from taskyard.queue import tasks
from taskyard.scheduler.service import Scheduler, status_of
from taskyard.storage.port import Row, Tx, UniqueViolation


class GraphStatus(TypedDict):
    status: LooseJSON


def check_graph_id(graph_id: str) -> str:
    if not slugid.is_valid(graph_id):
        raise InputError(f"taskGraphId {graph_id!r} is not a valid slugid (22 URL-safe base64 characters)")
    return graph_id


def _dumps(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _request(graph: Graph) -> str:
    """What create-or-compare compares: the graph as checked and filled in."""
    nodes = [
        {"taskId": n.task_id, "label": n.label, "requires": n.requires, "reruns": n.reruns, "task": n.task}
        for n in graph.nodes
    ]
    fields = {"scopes": graph.scopes, "routes": graph.routes, "metadata": graph.metadata, "tags": graph.tags}
    return _dumps({**fields, "routing": graph.routing, "tasks": nodes})


async def create_task_graph(s: Scheduler, graph_id: str, body: object, *, guard: Guard) -> GraphStatus:
    """Create a graph and its tasks, or answer the status of the same graph created before (409 if
    different). `guard` checks the graph's scopes and routes once the body is known to be valid."""
    graph = task_graph.parse(check_graph_id(graph_id), body)
    guard(scopes=graph.scopes, routes=graph.routes)
    problems = task_graph.prepare(graph, graph_id, scheduler_id=s.scheduler_id)
    request = _request(graph)
    async with s.storage.reader() as session:
        existing = await session.fetchrow("get_task_graph", graph_id)
    if existing is not None:
        return _same_or_conflict(existing, request)
    # One 400 naming every problem: the graph's (labels, a cycle) and each task's definition.
    definitions, more = await _definitions(s, graph, graph.scopes)
    task_graph.refuse(problems + more)
    try:
        async with s.storage.transaction() as tx:
            return await _insert_tx(s, tx, graph_id, graph, request, definitions)
    except UniqueViolation:  # a racing create of the same graph (or a task id taken)
        async with s.storage.reader() as session:
            existing = await session.fetchrow("get_task_graph", graph_id)
        if existing is None:
            raise
        return _same_or_conflict(existing, request)


def _same_or_conflict(row: Row, request: str) -> GraphStatus:
    if row["body"] != request:
        raise RequestConflict(
            f"Different TaskGraph with given taskGraphId {row['task_graph_id']} already exists; "
            "a graph id can be created again only with the same body"
        )
    return {"status": status_of(row)}


async def _definitions(
    s: Scheduler, graph: Graph, graph_scopes: list[str]
) -> tuple[dict[str, TaskDefinition], list[str]]:
    """Each task's definition as the queue checks it, and allowed by the graph's scopes; and the
    problems of every task that is not."""
    held = await s.expand(graph_scopes)
    guard = _scopes_guard(held, {})
    problems: list[str] = []
    found: dict[str, TaskDefinition] = {}
    for node in graph.nodes:
        name = node.label or node.task_id
        try:
            definition = tasks.define(s.queue, node.task_id, node.task)
        except TaskyardError as exc:
            problems.append(f"task {name}: {exc.message}")
            continue
        if not scopes.satisfies_all(held, definition["scopes"]):
            missing = [x for x in definition["scopes"] if not scopes.satisfies(held, x)]
            problems.append(
                f"task {name}: its scopes are not covered by the graph's scopes: {', '.join(missing)}"
            )
            continue
        try:
            tasks.guard_definition(guard, definition)
        except InsufficientScopes as exc:
            problems.append(
                f"task {name}: the graph's scopes do not allow creating it in the queue: {exc.message}"
            )
            continue
        found[node.task_id] = definition
    return found, problems


def _scopes_guard(held: list[str], allowed: dict[str, bool]) -> Guard:
    """createTask's check against `held`; `allowed` remembers the values already found allowed
    (the tasks of a graph mostly share them)."""

    def guard(**values: object) -> None:
        key = repr(sorted(values.items()))
        if allowed.get(key):
            return
        expression = scopes.render(tasks.CREATE_TASK_SCOPES, values)
        if expression is not None and scopes.satisfies_expression(held, expression):
            allowed[key] = True
            return
        if expression is None:
            return
        unsatisfied = scopes.remove_given_scopes(held, expression)
        assert unsatisfied is not None
        raise InsufficientScopes(scopes.format_insufficient("the task graph", unsatisfied, expression))

    return guard


async def _insert_tx(
    s: Scheduler, tx: Tx, graph_id: str, graph: Graph, request: str, definitions: dict[str, TaskDefinition]
) -> GraphStatus:
    await tx.execute(
        "insert_task_graph",
        task_graph_id=graph_id,
        scheduler_id=s.scheduler_id,
        routing=graph.routing,
        scopes=_dumps(graph.scopes),
        routes=_dumps(graph.routes),
        metadata=_dumps(graph.metadata),
        tags=_dumps(graph.tags),
        body=request,
        tasks_left=len(graph.nodes),
        created=s.clock(),
        expires=_latest_expiry(definitions.values()),
    )
    # The graph is announced running before its tasks' own events (their task-pending first of
    # all): a listener hears of the graph before any of its tasks.
    status = task_graph.status(graph_id, s.scheduler_id, "running", graph.routing)
    message = graph_message("task-graph-running", status, graph.routes)
    await queue_service.publish_tx(s.queue, tx, [message])
    await _add_tasks_tx(s, tx, graph_id, graph.nodes, definitions, first_position=0)
    return {"status": status}


def _latest_expiry(definitions: Iterable[TaskDefinition]) -> int:
    """When the graph may go, as far as these tasks say: the latest of their expiries (epoch ms)."""
    return max(dates.parse_iso(d["expires"]) for d in definitions)


async def _add_tasks_tx(
    s: Scheduler,
    tx: Tx,
    graph_id: str,
    nodes: list[Node],
    definitions: dict[str, TaskDefinition],
    *,
    first_position: int,
) -> None:
    """The graph's rows for `nodes`, then each task in the queue, every task after those it requires."""
    rows = [
        [n.task_id, first_position + i, n.label, _dumps(n.requires), n.reruns] for i, n in enumerate(nodes)
    ]
    await tx.execute("insert_task_graph_tasks", graph_id, _dumps(rows))
    order = task_graph.topological(nodes)
    try:
        await tasks.create_tasks_tx(s.queue, tx, [(task_id, definitions[task_id]) for task_id in order])
    except UniqueViolation as exc:
        raise RequestConflict(
            "a taskId of the graph is already used by a task of the queue; give the graph new taskIds"
        ) from exc


async def extend_task_graph(s: Scheduler, graph_id: str, body: object) -> GraphStatus:
    """Add tasks to a running graph; a task already in it must be given the same again.

    Tasks may require tasks already in the graph, including completed ones (they are scheduled at
    once); in the label form, by their labels. 409 unless the graph is running. An extend with no
    task changes nothing and answers the running graph's status.
    """
    check_graph_id(graph_id)
    task_graph.check_shape(body, extend=True)  # a malformed body is 400 before an unknown graph's 404
    row, known, labels = await _graph_and_ids(s, graph_id)
    graph = task_graph.parse(graph_id, body, extend=True, earlier=labels, checked=True)
    _check_running(row)
    if not graph.nodes:
        return {"status": status_of(row)}  # nothing to add: the graph as it is, no event
    graph.routing = row["routing"]
    problems = task_graph.prepare(graph, graph_id, scheduler_id=s.scheduler_id, known=known)
    new = [n for n in graph.nodes if n.task_id not in known]
    definitions, more = await _definitions(s, graph, orjson.loads(row["scopes"]))
    task_graph.refuse(problems + more)
    async with s.storage.transaction() as tx:
        locked = await tx.fetchrow("lock_task_graph", graph_id)
        assert locked is not None
        _check_running(locked)
        await _same_again_tx(s, tx, graph_id, [n for n in graph.nodes if n.task_id in known], definitions)
        if new:
            latest = _latest_expiry(definitions[n.task_id] for n in new)
            await tx.execute("add_task_graph_tasks", graph_id, len(new), latest)
            await _add_tasks_tx(s, tx, graph_id, new, definitions, first_position=locked["task_count"])
        status = status_of(locked)
        message = graph_message("task-graph-extended", status, orjson.loads(locked["routes"]))
        await queue_service.publish_tx(s.queue, tx, [message])
    return {"status": status}


async def _graph_and_ids(s: Scheduler, graph_id: str) -> tuple[Row, set[str], dict[str, str]]:
    """The graph's row, its tasks' taskIds, and the taskId of each label its tasks have."""
    async with s.storage.reader() as session:
        row = await session.fetchrow("get_task_graph", graph_id)
        if row is None:
            raise ResourceNotFound(f"task-graph not found! (no task graph {graph_id})")
        rows = await session.fetch("task_graph_task_ids", graph_id)
    labels = {r["label"]: r["task_id"] for r in rows if r["label"] is not None}
    return row, {r["task_id"] for r in rows}, labels


def _check_running(row: Row) -> None:
    if row["state"] != "running":
        raise RequestConflict(
            f"task graph {row['task_graph_id']} is {row['state']}; only a running graph can be extended"
        )


async def _same_again_tx(
    s: Scheduler, tx: Tx, graph_id: str, nodes: list[Node], definitions: dict[str, TaskDefinition]
) -> None:
    """Tasks given again by an extend: the same requires, reruns and definition, or 409."""
    for node in nodes:
        row = await tx.fetchrow("task_graph_task", graph_id, node.task_id)
        assert row is not None
        if orjson.loads(row["requires"]) != node.requires or row["reruns"] != node.reruns:
            raise RequestConflict(
                f"task {node.task_id} is already in the graph with other requires or reruns"
            )
        await tasks.create_task_tx(s.queue, tx, node.task_id, definitions[node.task_id])


async def _load(s: Scheduler, graph_id: str) -> Row:
    async with s.storage.reader() as session:
        row = await session.fetchrow("get_task_graph", check_graph_id(graph_id))
    if row is None:
        raise ResourceNotFound(f"task-graph not found! (no task graph {graph_id})")
    return row


async def status(s: Scheduler, graph_id: str) -> GraphStatus:
    return {"status": status_of(await _load(s, graph_id))}


class GraphInfo(TypedDict):
    status: LooseJSON
    metadata: LooseJSON
    tags: LooseJSON


async def info(s: Scheduler, graph_id: str) -> GraphInfo:
    row = await _load(s, graph_id)
    return {
        "status": status_of(row),
        "metadata": orjson.loads(row["metadata"]),
        "tags": orjson.loads(row["tags"]),
    }


class GraphInspection(TypedDict):
    status: LooseJSON
    tasks: list[LooseJSON]
    metadata: LooseJSON
    tags: LooseJSON
    scopes: list[str]


async def inspect(s: Scheduler, graph_id: str) -> GraphInspection:
    """The graph with every task: what it requires and still waits for, its reruns, its state."""
    row = await _load(s, graph_id)
    async with s.storage.reader() as session:
        rows = await session.fetch("task_graph_tasks", graph_id)
    entries = _entries(rows, s.root_url)
    return {
        "status": status_of(row),
        "tasks": entries,
        "metadata": orjson.loads(row["metadata"]),
        "tags": orjson.loads(row["tags"]),
        "scopes": orjson.loads(row["scopes"]),
    }


async def inspect_task(s: Scheduler, graph_id: str, task_id: str) -> LooseJSON:
    await _load(s, graph_id)
    tasks.check_task_id(task_id)
    async with s.storage.reader() as session:
        rows = await session.fetch("task_graph_tasks", graph_id)
    for entry in _entries(rows, s.root_url):
        if entry["taskId"] == task_id:
            return entry
    raise ResourceNotFound(f"task {task_id} is not in task graph {graph_id}")


# The scheduler's word for each queue state of a graph's task.
_STATES = {"unscheduled": "unscheduled", "pending": "scheduled", "running": "scheduled"}


def _entries(rows: list[Row], root_url: str) -> list[LooseJSON]:
    states = {r["task_id"]: _STATES.get(r["state"], r["state"] or "unscheduled") for r in rows}
    dependents: dict[str, list[str]] = {r["task_id"]: [] for r in rows}
    requires = {r["task_id"]: orjson.loads(r["requires"]) for r in rows}
    for task_id, reqs in requires.items():
        for req in reqs:
            dependents.setdefault(req, []).append(task_id)
    entries = []
    for r in rows:
        task_id = r["task_id"]
        definition = orjson.loads(r["definition"]) if r["definition"] else {}
        entry: LooseJSON = {
            "taskId": task_id,
            "name": definition.get("metadata", {}).get("name", ""),
            "requires": requires[task_id],
            "requiresLeft": [x for x in requires[task_id] if states.get(x) != "completed"],
            "reruns": r["reruns"],
            "rerunsLeft": r["reruns_left"],
            "state": states[task_id],
            "satisfied": states[task_id] == "completed",
            "dependents": dependents[task_id],
            "deadline": definition.get("deadline"),
            "resolution": _resolution(
                task_id, states[task_id], orjson.loads(r["runs"]) if r["runs"] else [], root_url
            ),
        }
        if r["label"] is not None:
            entry["label"] = r["label"]
        entries.append(entry)
    return entries


def _resolution(task_id: str, state: str, runs: list[LooseJSON], root_url: str) -> LooseJSON | None:
    """How the task was resolved, as the scheduler document's task entity keeps it: None until it
    is; `success` when it completed; `completed` when a worker ran its last run to the end
    (completed or failed, not an exception), with the URLs of that run's artifacts (`resultUrl`)
    and log (`logsUrl`)."""
    if state not in ("completed", "failed", "exception") or not runs:
        return None
    resolution: LooseJSON = {"success": state == "completed", "completed": state != "exception"}
    if state != "exception":
        run_url = f"{root_url}/api/queue/v1/task/{task_id}/runs/{len(runs) - 1}/artifacts"
        resolution["resultUrl"] = run_url
        resolution["logsUrl"] = f"{run_url}/public/logs/live.log"
    return resolution
