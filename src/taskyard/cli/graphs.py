"""`taskyard graph`: submit a task graph to the scheduler, follow it, inspect its tasks.

Like `taskyard task`, the commands talk HTTP to the deployment at TASKCLUSTER_ROOT_URL with the
TASKCLUSTER_* credentials. Exit status: 0 done (for `status`, the graph finished), 1 the server
refused or could not be reached, or the graph is blocked, 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from taskyard.cli import admin, http, tasks
from taskyard.cli.tasks import Result
from taskyard.model import dates, slugid
from taskyard.model.errors import ConfigError

COMMANDS = ("graph",)
STATES = ("unscheduled", "scheduled", "completed", "failed", "exception")
BAR_WIDTH = 30


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `graph submit|status|inspect` on `taskyard`'s sub-commands."""
    common = admin._common_options()
    graph = commands.add_parser("graph", help="submit task graphs to the scheduler and follow them")
    actions = graph.add_subparsers(dest="action", required=True, metavar="ACTION")
    submit = actions.add_parser(
        "submit",
        parents=[common],
        help="create a task graph from a YAML or JSON file",
        description="Create a task graph from FILE (YAML or JSON), in either form: `tasks` a list "
        "of {taskId, requires, reruns, task}, or an object keyed by label. Each task's created, "
        "deadline (now + 1 day) and missing metadata are filled in, and the graph's metadata; "
        "prints the graph id.",
    )
    submit.add_argument("file", metavar="FILE", help="the task graph (YAML or JSON)")
    submit.add_argument("--graph-id", type=tasks._slugid, help="the taskGraphId (default: a new slugid)")
    submit.set_defaults(handler=submit_graph)
    status = actions.add_parser(
        "status",
        parents=[common],
        help="follow a graph until it finishes or blocks (exit 0 only when finished)",
    )
    status.add_argument("graph_id", metavar="ID")
    status.add_argument("--interval", type=float, default=1.0, metavar="SECONDS", help="between checks")
    status.add_argument("--no-wait", action="store_true", help="show the state once, without waiting")
    status.set_defaults(handler=graph_status)
    inspect = actions.add_parser("inspect", parents=[common], help="a table of a graph's tasks")
    inspect.add_argument("graph_id", metavar="ID")
    inspect.set_defaults(handler=inspect_graph)


def with_defaults(body: Mapping[str, Any], path: str, now: int) -> dict[str, Any]:
    """The graph with each task's created, deadline and metadata, and its own metadata, filled in."""
    graph = dict(body)
    tasks_in = graph.get("tasks")
    if isinstance(tasks_in, list):
        graph["tasks"] = [_node_defaults(n, path, now, _list_label(n)) for n in tasks_in]
    elif isinstance(tasks_in, dict):
        graph["tasks"] = {label: _node_defaults(n, path, now, str(label)) for label, n in tasks_in.items()}
    if graph.get("metadata") is None:
        graph["metadata"] = {
            "name": Path(path).stem or "task graph",
            "description": f"submitted with `taskyard graph submit {Path(path).name}`",
            "owner": tasks.DEFAULT_OWNER,
            "source": tasks.DEFAULT_SOURCE,
        }
    return graph


def _list_label(node: object) -> str | None:
    if not isinstance(node, dict):
        return None
    label = node.get("label") or node.get("taskId")
    return label if isinstance(label, str) else None


def _node_defaults(node: object, path: str, now: int, label: str | None) -> object:
    """The node with its task's defaults: named after its label (not the file), described as a
    task of the graph."""
    if not isinstance(node, dict) or not isinstance(node.get("task"), dict):
        return node  # the server says what is wrong with it
    task = dict(node["task"])
    metadata = task.get("metadata")
    if label is not None and (metadata is None or isinstance(metadata, dict)):
        task["metadata"] = {
            "name": label,
            "description": f"task {label} of graph {Path(path).name}, submitted with `taskyard graph submit`",
            **(metadata or {}),
        }
    return {**node, "task": tasks.with_defaults(task, path, now)}


def submit_graph(connection: http.Connection, args: argparse.Namespace) -> Result:
    """createTaskGraph from a file, defaults filled; prints the graph id."""
    body = tasks.read_definition(args.file)
    if "tasks" not in body:
        raise ConfigError("FILE", args.file, "must hold a task graph: an object with `tasks`")
    graph = with_defaults(body, args.file, dates.now_ms())
    graph_id = args.graph_id or slugid.nice()
    answer = http.call(
        connection, "PUT", f"/task-graph/{http.segment(graph_id)}", service="scheduler", body=graph
    )
    return Result({"taskGraphId": graph_id, **answer}, graph_id)


def inspection(connection: http.Connection, graph_id: str) -> Any:
    return http.call(connection, "GET", f"/task-graph/{http.segment(graph_id)}/inspect", service="scheduler")


def progress(graph: Mapping[str, Any]) -> str:
    """`[#####-----] 5/10 completed  2 scheduled ...  running`: one line."""
    counts = Counter(t["state"] for t in graph["tasks"])
    total = len(graph["tasks"])
    done = counts.get("completed", 0)
    filled = BAR_WIDTH * done // total if total else BAR_WIDTH
    bar = "#" * filled + "-" * (BAR_WIDTH - filled)
    others = "  ".join(f"{counts[s]} {s}" for s in STATES if counts.get(s) and s != "completed")
    return f"[{bar}] {done}/{total} completed  {others}  {graph['status']['state']}".rstrip()


def graph_status(connection: http.Connection, args: argparse.Namespace) -> Result:
    """Until the graph leaves `running` (unless --no-wait): a progress bar on stderr; exit 0 only
    when it finished."""
    graph = inspection(connection, args.graph_id)
    tty = sys.stderr.isatty()
    last = 0.0
    while not args.no_wait and graph["status"]["state"] == "running":
        if tty:
            print(f"\r{progress(graph)}", end="", file=sys.stderr, flush=True)
        elif time.monotonic() - last >= max(args.interval, 10.0):
            print(progress(graph), file=sys.stderr, flush=True)
            last = time.monotonic()
        time.sleep(max(args.interval, 0.1))
        graph = inspection(connection, args.graph_id)
    if tty and not args.no_wait:
        print(f"\r{progress(graph)}", file=sys.stderr, flush=True)
    status = graph["status"]
    text = f"{status['taskGraphId']} {status['state']}  {progress(graph)}"
    return Result(status, text, 0 if status["state"] == "finished" else 1)


def inspect_graph(connection: http.Connection, args: argparse.Namespace) -> Result:
    """A table of the graph's tasks: label or name, taskId, state, reruns left, what it waits for."""
    graph = inspection(connection, args.graph_id)
    names = {t["taskId"]: t.get("label") or t.get("name") or t["taskId"] for t in graph["tasks"]}
    rows = [
        [
            names[t["taskId"]],
            t["taskId"],
            t["state"],
            str(t["rerunsLeft"]),
            ", ".join(names.get(r, r) for r in t["requiresLeft"]) or "-",
        ]
        for t in graph["tasks"]
    ]
    head = f"{graph['status']['taskGraphId']} {graph['status']['state']}"
    table = admin.table(["TASK", "TASK ID", "STATE", "RERUNS LEFT", "WAITS FOR"], rows)
    return Result(graph, f"{head}\n\n{table}")
