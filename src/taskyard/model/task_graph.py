"""Task graphs: a createTaskGraph or extendTaskGraph body checked and brought to one shape.

Two forms are accepted. The final form (TaskCluster's) lists `tasks` as `{taskId, requires,
reruns, task}` with `requires` naming taskIds. The label form keys `tasks` by label, `requires`
names labels, the graph and each task may carry a `routing` (10 characters at most), and every
`{"$subs": "taskId:<label>"}` object in a task's payload becomes that label's taskId; its
taskIds are derived from the graph id and the label, so the same body always gives the same ids.

Every problem of a body is gathered into one InputError naming each task and rule. Cycles are
refused, naming the tasks on one of them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from taskyard.model import schema, slugid
from taskyard.model.errors import InputError
from taskyard.model.identifiers import SLUGID
from taskyard.model.types import LooseJSON

STATES = ("running", "blocked", "finished")
MAX_TASKS = 10_000  # per request
MAX_RERUNS = 100
MAX_ROUTING = 10
ROUTING_TAG = "taskyard:routing"  # the queue's seed routing key takes its words from this tag
SUBS = "$subs"

_METADATA = schema.obj(
    {
        "name": schema.string(max_length=255),
        "description": schema.string(max_length=32768),
        "owner": schema.string(max_length=255),
        "source": schema.string(max_length=4096),
    },
    required=["name", "description", "owner", "source"],
    additional=False,
)
_NODE = {
    "requires": schema.array(schema.string(min_length=1, max_length=255), max_items=MAX_TASKS),
    "reruns": schema.integer(minimum=0, maximum=MAX_RERUNS),
    "task": schema.any_object(),
}
_GRAPH = {
    "scopes": schema.array(schema.string(pattern=r"^[\x20-\x7e]*$")),
    "routes": schema.array(schema.string(min_length=1, max_length=249), max_items=10, unique=True),
    "metadata": _METADATA,
    "tags": schema.obj(additional=schema.string(max_length=4096)),
    "routing": schema.string(pattern=r"^[^\x00-\x1f\x7f]*$", max_length=MAX_ROUTING),
}
_FINAL_TASKS = schema.array(
    schema.obj(
        {"taskId": schema.string(pattern=SLUGID), **_NODE, "label": schema.string(max_length=255)},
        required=["taskId", "task"],
        additional=False,
    ),
    max_items=MAX_TASKS,
)
_LABELLED_TASKS = schema.obj(additional=schema.obj(_NODE, required=["task"], additional=False))
FINAL = schema.obj({**_GRAPH, "tasks": _FINAL_TASKS}, required=["tasks", "metadata"], additional=False)
LABELLED = schema.obj({**_GRAPH, "tasks": _LABELLED_TASKS}, required=["tasks"], additional=False)
# extendTaskGraph takes tasks only: the graph keeps its scopes, routes, metadata and routing.
EXTEND = schema.obj({"tasks": _FINAL_TASKS}, required=["tasks"], additional=False)
EXTEND_LABELLED = schema.obj({"tasks": _LABELLED_TASKS}, required=["tasks"], additional=False)
DEFAULT_METADATA = {
    "name": "task graph",
    "description": "",
    "owner": "nobody@localhost",
    "source": "http://localhost",
}


@dataclass
class Node:
    """One task of a graph as the scheduler keeps it."""

    task_id: str
    requires: list[str]
    reruns: int
    task: LooseJSON
    label: str | None = None


@dataclass
class Graph:
    """A checked request: its tasks in the order given, and the graph's own fields."""

    nodes: list[Node]
    scopes: list[str] = field(default_factory=list)
    routes: list[str] = field(default_factory=list)
    metadata: LooseJSON = field(default_factory=dict)
    tags: LooseJSON = field(default_factory=dict)
    routing: str = ""
    # Problems of the label form found as it was read (a `requires` or `$subs` naming no label):
    # `prepare` answers them with every other problem of the request, in one 400.
    problems: list[str] = field(default_factory=list)


def parse(
    graph_id: str,
    body: object,
    *,
    extend: bool = False,
    earlier: Mapping[str, str] | None = None,
    checked: bool = False,
) -> Graph:
    """The request in one shape, its schema checked (InputValidationError naming the field).

    For extendTaskGraph (`extend`), `earlier` maps the labels of the graph's tasks so far to their
    taskIds: the label form's `requires` and `$subs` may name them, and an extend may hold no task
    at all (it then changes nothing). `checked`: `check_shape` has checked it already."""
    labelled = isinstance(body, dict) and isinstance(body.get("tasks"), dict)
    if not checked:
        check_shape(body, extend=extend)
    assert isinstance(body, dict)
    if not body["tasks"] and not extend:
        raise InputError("body.tasks must hold at least one task")
    if len(body["tasks"]) > MAX_TASKS:
        raise InputError(f"body.tasks may hold at most {MAX_TASKS} tasks")
    problems: list[str] = []
    graph = Graph(
        nodes=(
            _labelled_nodes(graph_id, body["tasks"], earlier or {}, problems)
            if labelled
            else _final_nodes(body["tasks"])
        ),
        scopes=list(body.get("scopes", [])),
        routes=list(body.get("routes", [])),
        metadata=dict(body.get("metadata", DEFAULT_METADATA)),
        tags=dict(body.get("tags", {})),
        routing=str(body.get("routing", "")),
        problems=problems,
    )
    return graph


def check_shape(body: object, *, extend: bool = False) -> bool:
    """Check `body` against its form's schema (InputValidationError naming the field); whether it
    is in the label form."""
    tasks = body.get("tasks") if isinstance(body, dict) else None
    labelled = isinstance(tasks, dict)
    if extend:
        schema.validate(EXTEND_LABELLED if labelled else EXTEND, body, where="body")
    else:
        schema.validate(LABELLED if labelled else FINAL, body, where="body")
    return labelled


def _final_nodes(items: list[LooseJSON]) -> list[Node]:
    return [
        Node(
            task_id=item["taskId"],
            requires=list(item.get("requires", [])),
            reruns=int(item.get("reruns", 0)),
            task=copy.deepcopy(item["task"]),
            label=item.get("label"),
        )
        for item in items
    ]


def task_id_of(graph_id: str, label: str) -> str:
    """The taskId of `label` in graph `graph_id`: the same every time."""
    return slugid.derived(f"taskyard-task-graph/{graph_id}/{label}")


def _labelled_nodes(
    graph_id: str, items: Mapping[str, LooseJSON], earlier: Mapping[str, str], problems: list[str]
) -> list[Node]:
    """`earlier`: the labels of the graph's tasks before this request, with their taskIds. A label
    of `items` that is one of them is that task, given again. A label named that is not one is
    added to `problems` (and left out of the requirements)."""
    ids = {**earlier, **{label: earlier.get(label) or task_id_of(graph_id, label) for label in items}}
    nodes = []
    for label, item in items.items():
        missing = [r for r in item.get("requires", []) if r not in ids]
        problems += [f"task {label}: requires label {r!r}, which is not in the graph" for r in missing]
        task = copy.deepcopy(item["task"])
        if isinstance(task.get("payload"), dict):
            task["payload"] = _substitute(task["payload"], ids, label, problems)
        nodes.append(
            Node(
                task_id=ids[label],
                requires=[ids[r] for r in item.get("requires", []) if r in ids],
                reruns=int(item.get("reruns", 0)),
                task=task,
                label=label,
            )
        )
    return nodes


def _substitute(value: object, ids: Mapping[str, str], label: str, problems: list[str]) -> object:
    """`value` with every `{"$subs": "taskId:<label>"}` object replaced by that label's taskId."""
    if isinstance(value, dict):
        if len(value) == 1 and SUBS in value:
            wanted = value[SUBS]
            name = (
                wanted[len("taskId:") :] if isinstance(wanted, str) and wanted.startswith("taskId:") else None
            )
            if name is not None and name in ids:
                return ids[name]
            problems.append(f"task {label}: {SUBS} {wanted!r} names no label of the graph")
            return value
        return {k: _substitute(v, ids, label, problems) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, ids, label, problems) for v in value]
    return value


def prepare(graph: Graph, graph_id: str, *, scheduler_id: str, known: Iterable[str] = ()) -> list[str]:
    """Fill in each task's schedulerId, taskGroupId, dependencies and routing; the problems found.

    `known` holds the taskIds already in the graph (extendTaskGraph). A task's `requires` become
    its in-queue `dependencies` (with `requires: all-completed`), so that the queue itself holds
    it back until they completed.
    """
    problems: list[str] = list(graph.problems)
    existing = set(known)
    ids = [n.task_id for n in graph.nodes]
    seen: set[str] = set()
    for task_id in ids:
        if task_id in seen:
            problems.append(f"task {task_id}: taskId appears more than once")
        seen.add(task_id)
    inside = set(ids) | existing
    for node in graph.nodes:
        problems += _check_node(node, graph_id, scheduler_id, inside)
        _fill(node, graph, graph_id, scheduler_id)
    if len(seen) == len(ids):  # a cycle, named beside the other problems (ids must be unique)
        problems += cycles(graph.nodes)
    return problems


def _check_node(node: Node, graph_id: str, scheduler_id: str, inside: set[str]) -> list[str]:
    name = node.label or node.task_id
    problems = []
    task = node.task
    if task.setdefault("schedulerId", scheduler_id) != scheduler_id:
        problems.append(f"task {name}: schedulerId must be {scheduler_id!r} (got {task['schedulerId']!r})")
    if task.setdefault("taskGroupId", graph_id) != graph_id:
        problems.append(
            f"task {name}: taskGroupId must be the graph id {graph_id} (got {task['taskGroupId']!r})"
        )
    if len(set(node.requires)) != len(node.requires):
        problems.append(f"task {name}: requires lists a task more than once")
    if node.task_id in node.requires:
        problems.append(f"task {name}: requires itself")
    outside = [r for r in node.requires if r not in inside]
    problems += [f"task {name}: requires {r}, which is not a task of the graph" for r in outside]
    routing = task.get("routing", "")
    if not isinstance(routing, str) or len(routing) > MAX_ROUTING:
        problems.append(f"task {name}: routing must be a string of at most {MAX_ROUTING} characters")
    return problems


def _fill(node: Node, graph: Graph, graph_id: str, scheduler_id: str) -> None:
    task = node.task
    deps = task.get("dependencies")
    if isinstance(deps, list):
        task["dependencies"] = list(dict.fromkeys([*deps, *node.requires]))
    elif node.requires:
        task["dependencies"] = list(node.requires)
    # Every task of a graph, in either form, is keyed `<graph routing>.<task routing>` after its
    # schedulerId and graph id, `_` for an empty part: its queue events' seed keys all have the
    # same number of words, so `...<taskGraphId>.<graph routing>.*` sees each of them.
    routing = task.pop("routing", "")
    tags = task.get("tags") if isinstance(task.get("tags"), dict) else None
    words = f"{graph.routing or '_'}.{routing or '_'}"
    task["tags"] = {**(tags or {}), ROUTING_TAG: words}


def cycles(nodes: list[Node]) -> list[str]:
    """One problem naming the tasks of a cycle, if the nodes' requirements hold one."""
    names = {n.task_id: n.label or n.task_id for n in nodes}
    requires = {n.task_id: [r for r in n.requires if r in names] for n in nodes}
    order = topological(nodes)
    if len(order) == len(nodes):
        return []
    left = {i for i in names if i not in set(order)}
    start = next(i for i in names if i in left)
    path, seen = [start], {start: 0}
    while True:  # every task left waits on another task left: walk until a task repeats
        nxt = next(r for r in requires[path[-1]] if r in left)
        if nxt in seen:
            loop = [*path[seen[nxt] :], nxt]
            return [f"the requirements form a cycle: {' -> '.join(names[i] for i in loop)}"]
        seen[nxt] = len(path)
        path.append(nxt)


def topological(nodes: list[Node]) -> list[str]:
    """The nodes' taskIds, each after every node of the list it requires (those in a cycle left out)."""
    ids = {n.task_id for n in nodes}
    waiting = {n.task_id: {r for r in n.requires if r in ids} for n in nodes}
    dependents: dict[str, list[str]] = {}
    for task_id, reqs in waiting.items():
        for r in reqs:
            dependents.setdefault(r, []).append(task_id)
    ready = [n.task_id for n in nodes if not waiting[n.task_id]]
    order = []
    while ready:
        task_id = ready.pop()
        order.append(task_id)
        for d in dependents.get(task_id, []):
            waiting[d].discard(task_id)
            if not waiting[d]:
                ready.append(d)
    return order


def _gathered(problems: list[str]) -> str:
    shown = problems[:50]
    more = f"\n... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
    return "Errors found in task nodes:\n" + "\n".join(f"- {p}" for p in shown) + more


def refuse(problems: list[str]) -> None:
    """InputError listing `problems`, if there are any."""
    if problems:
        raise InputError(_gathered(problems))


def status(graph_id: str, scheduler_id: str, state: str, routing: str) -> LooseJSON:
    """The graph's status structure."""
    return {"taskGraphId": graph_id, "schedulerId": scheduler_id, "state": state, "routing": routing}
