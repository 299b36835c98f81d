"""Lists and views: `task list`, `task def`, `group list|cancel|seal`, `queue list`, `worker list`.

Each is a few queue API calls, read with the current credentials; every page is fetched. There is
no API that lists every task or every task group, so `task list` needs a group or a task queue, and
`group list` finds the groups that have a pending or running task through the task queues.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from taskyard.cli import admin, http, output
from taskyard.cli.tasks import PAGE_SIZE, STATES, Result, task_group_id, task_id
from taskyard.model import dates
from taskyard.model.client_errors import Refused

Actions = Any  # argparse's sub-parsers action (a private type)


# ---------------------------------------------------------------------------------------------------
# Command line.


def add_task_commands(actions: Actions, connection: argparse.ArgumentParser) -> None:
    """`task list` and `task def`."""
    out = output.options()
    listing = actions.add_parser(
        "list",
        parents=[connection, out],
        help="list the tasks of a task group, or a task queue's pending and running tasks",
    )
    where = listing.add_mutually_exclusive_group(required=True)
    where.add_argument("--group", type=task_group_id, metavar="TASK_GROUP_ID", help="the tasks of this group")
    where.add_argument(
        "--task-queue", metavar="TASK_QUEUE_ID", help="this task queue's pending and running tasks"
    )
    listing.add_argument(
        "--state", action="append", choices=STATES, help="only tasks in this state (repeat for more)"
    )
    listing.set_defaults(handler=list_tasks)
    definition = actions.add_parser("def", parents=[connection, out], help="print a task's definition (YAML)")
    definition.add_argument("task_id", metavar="ID", type=task_id)
    definition.set_defaults(handler=task_definition)


def add_group_commands(actions: Actions, connection: argparse.ArgumentParser) -> None:
    """`group list`, `group cancel` and `group seal`."""
    out = output.options()
    listing = actions.add_parser(
        "list", parents=[connection, out], help="list the task groups that have pending or running tasks"
    )
    listing.set_defaults(handler=list_groups)
    for name, handler, help in (
        ("cancel", cancel_group, "cancel every unresolved task of a sealed task group"),
        ("seal", seal_group, "seal a task group: no task can be added to it any more"),
    ):
        action = actions.add_parser(name, parents=[connection, out], help=help)
        action.add_argument("task_group_id", metavar="ID", type=task_group_id)
        action.set_defaults(handler=handler)


def add_queue_command(commands: Actions, connection: argparse.ArgumentParser) -> None:
    """`queue list`."""
    queue = commands.add_parser("queue", help="list task queues with their pending and running tasks")
    actions = queue.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        parents=[connection, output.options()],
        help="task queues: pending, claimed and the oldest pending task's age",
    )
    listing.set_defaults(handler=list_queues)


def add_worker_list(worker: argparse.ArgumentParser) -> None:
    """`worker list`: `taskyard worker` runs a worker; with `list`, it lists the workers seen."""
    worker.add_argument(
        "action",
        nargs="?",
        choices=["list"],
        metavar="list",
        help="list the workers seen instead of running one",
    )
    worker.add_argument("--verbose", action="store_true", help="(list) print refusals in full")
    output.add_options(worker)
    worker.set_defaults(handler=list_workers)


# ---------------------------------------------------------------------------------------------------
# Tasks.


def pages(connection: http.Connection, path: str, key: str) -> Iterator[Any]:
    """Every item of a paged queue listing."""
    query = {"limit": str(PAGE_SIZE)}
    while True:
        page = http.call(connection, "GET", path, service="queue", query=query)
        yield from page[key]
        if not page.get("continuationToken"):
            return
        query = {**query, "continuationToken": page["continuationToken"]}


def list_tasks(connection: http.Connection, args: argparse.Namespace) -> Result:
    """listTaskGroup, or listPendingTasks and listClaimedTasks; filtered by `--state`."""
    if args.group:
        path = f"/task-group/{http.segment(args.group)}/list"
        found = [_row(e["status"], e["task"]) for e in pages(connection, path, "tasks")]
    else:
        queue = http.segment(args.task_queue)
        found = [
            {**_row({"taskId": e["taskId"], "state": state}, e["task"]), "since": e.get(since, "")}
            for part, state, since in (("pending", "pending", "inserted"), ("claimed", "running", "claimed"))
            for e in pages(connection, f"/task-queues/{queue}/{part}", "tasks")
        ]
    if args.state:
        found = [t for t in found if t["state"] in args.state]
    header = ["TASK ID", "STATE", "NAME"]
    rows = [[t["taskId"], t["state"], t["name"]] for t in found]
    wide = [
        [*row[:2], t["taskQueueId"], t["taskGroupId"], t["reason"] or "-", row[2]]
        for row, t in zip(rows, found, strict=True)
    ]
    none = "no tasks"
    return Result(
        found,
        admin.table(header, rows) if rows else none,
        wide=admin.table(["TASK ID", "STATE", "TASK QUEUE", "GROUP", "RESOLVED AS", "NAME"], wide)
        if rows
        else none,
    )


def _row(status: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, Any]:
    runs = status.get("runs") or [{}]
    return {
        "taskId": status["taskId"],
        "state": status["state"],
        "name": (task.get("metadata") or {}).get("name", ""),
        "taskQueueId": task.get("taskQueueId", ""),
        "taskGroupId": task.get("taskGroupId", ""),
        "reason": runs[-1].get("reasonResolved", ""),
    }


def task_definition(connection: http.Connection, args: argparse.Namespace) -> Result:
    """task: the definition as the queue holds it (YAML for people, `-o json` for scripts)."""
    import yaml  # imported when used: `serve` and most commands print no YAML

    task = http.call(connection, "GET", f"/task/{http.segment(args.task_id)}", service="queue")
    return Result(task, yaml.safe_dump(task, sort_keys=False, allow_unicode=True).rstrip())


# ---------------------------------------------------------------------------------------------------
# Task groups.


def list_groups(connection: http.Connection, args: argparse.Namespace) -> Result:
    """Task groups with pending or running tasks, found through every task queue's lists."""
    counts: dict[str, Counter[str]] = {}
    for queue in pages(connection, "/task-queues", "taskQueues"):
        segment = http.segment(queue["taskQueueId"])
        for part, state in (("pending", "pending"), ("claimed", "running")):
            for entry in pages(connection, f"/task-queues/{segment}/{part}", "tasks"):
                counts.setdefault(entry["task"]["taskGroupId"], Counter())[state] += 1
    found = [
        {"taskGroupId": g, "pending": c["pending"], "running": c["running"]}
        for g, c in sorted(counts.items())
    ]
    rows = [[g, str(c["pending"]), str(c["running"])] for g, c in sorted(counts.items())]
    text = (
        admin.table(["TASK GROUP ID", "PENDING", "RUNNING"], rows)
        if rows
        else "no task group has pending or running tasks"
    )
    return Result(found, text)


def cancel_group(connection: http.Connection, args: argparse.Namespace) -> Result:
    """cancelTaskGroup: how many of the group's tasks it canceled."""
    answer = http.call(
        connection, "POST", f"/task-group/{http.segment(args.task_group_id)}/cancel", service="queue"
    )
    size, canceled = answer["taskGroupSize"], answer["cancelledCount"]
    said = f"Canceled {canceled} of the {size} tasks of group {args.task_group_id}."
    return Result(answer, said if answer["cancelledCount"] else f"{said} (the rest were resolved already)")


def seal_group(connection: http.Connection, args: argparse.Namespace) -> Result:
    """sealTaskGroup: from now on createTask refuses tasks in this group."""
    answer = http.call(
        connection, "POST", f"/task-group/{http.segment(args.task_group_id)}/seal", service="queue"
    )
    return Result(answer, f"Sealed task group {args.task_group_id}: no task can be added to it.")


# ---------------------------------------------------------------------------------------------------
# Task queues and workers.


def list_queues(connection: http.Connection, args: argparse.Namespace) -> Result:
    """listTaskQueues, with taskQueueCounts and the oldest pending task of each."""
    now = dates.now_ms()
    found = []
    for queue in pages(connection, "/task-queues", "taskQueues"):
        segment = http.segment(queue["taskQueueId"])
        counts = http.call(connection, "GET", f"/task-queues/{segment}/counts", service="queue")
        first = http.call(
            connection, "GET", f"/task-queues/{segment}/pending", service="queue", query={"limit": "1"}
        )["tasks"]
        oldest = first[0].get("inserted", "") if first else ""
        found.append(
            {
                **queue,
                "pendingTasks": counts["pendingTasks"],
                "claimedTasks": counts["claimedTasks"],
                "oldestPending": oldest,
                "oldestPendingAge": _seconds(now, oldest),
            }
        )
    rows = [
        [q["taskQueueId"], str(q["pendingTasks"]), str(q["claimedTasks"]), age(q["oldestPendingAge"])]
        for q in found
    ]
    header = ["TASK QUEUE", "PENDING", "CLAIMED", "OLDEST PENDING"]
    wide = [
        [*row, q.get("lastDateActive", "") or "-", q.get("stability", "")]
        for row, q in zip(rows, found, strict=True)
    ]
    return Result(
        found,
        admin.table(header, rows) if rows else "no task queues",
        wide=admin.table([*header, "LAST ACTIVE", "STABILITY"], wide) if rows else "no task queues",
    )


def list_workers(connection: http.Connection, args: argparse.Namespace) -> Result:
    """listWorkers of `--task-queue-id`'s queue if it was given, else of every task queue."""
    queues = (
        [args.task_queue_id]
        if args.task_queue_id
        else [q["taskQueueId"] for q in pages(connection, "/task-queues", "taskQueues")]
    )
    now = dates.now_ms()
    found = []
    for queue in queues:
        provisioner, _, worker_type = queue.partition("/")
        path = f"/provisioners/{http.segment(provisioner)}/worker-types/{http.segment(worker_type)}/workers"
        try:
            listed = [{"taskQueueId": queue, **w} for w in pages(connection, path, "workers")]
        except Refused as exc:
            if exc.status != 404:
                raise
            continue
        running = _running_by_worker(connection, queue) if listed else {}
        for w in listed:
            w["running"] = running.get((w["workerGroup"], w["workerId"]), [])
        found += listed
    rows = [
        [
            w["taskQueueId"],
            f"{w['workerGroup']}/{w['workerId']}",
            str(len(w["running"])),
            age(_seconds(now, w.get("lastDateActive", ""))),
            (w.get("latestTask") or {}).get("taskId", "-"),
        ]
        for w in found
    ]
    wide = [
        [
            *row[:3],
            ", ".join(
                f"{r['taskId']}/{r['runId']} ({age(_seconds(now, r['claimed']))})" for r in w["running"]
            )
            or "-",
            row[3],
            age(_seconds(now, w.get("firstClaim", ""))),
            _quarantined(now, w.get("quarantineUntil", "")),
        ]
        for row, w in zip(rows, found, strict=True)
    ]
    # LAST ACTIVE: its last claimWork, claim or reclaim (recorded at most once a minute).
    header = ["TASK QUEUE", "WORKER", "RUNNING", "LAST ACTIVE", "LATEST TASK"]
    wide_header = [
        "TASK QUEUE",
        "WORKER",
        "RUNNING",
        "RUNS (CLAIMED)",
        "LAST ACTIVE",
        "FIRST CLAIM",
        "QUARANTINED",
    ]
    none = "no workers seen"
    return Result(
        found,
        admin.table(header, rows) if rows else none,
        wide=admin.table(wide_header, wide) if rows else none,
    )


def _running_by_worker(
    connection: http.Connection, queue: str
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The task queue's running runs (listClaimedTasks), by the worker that claimed each."""
    running: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        claimed = list(pages(connection, f"/task-queues/{http.segment(queue)}/claimed", "tasks"))
    except Refused:  # credentials that may not list them: the workers without their runs
        return running
    for entry in claimed:
        run = {"taskId": entry["taskId"], "runId": entry["runId"], "claimed": entry.get("claimed", "")}
        running.setdefault((entry["workerGroup"], entry["workerId"]), []).append(run)
    return running


def _quarantined(now: int, until: str) -> str:
    if not until or dates.parse_iso(until) <= now:
        return "-"
    return f"until {until}"


def _seconds(now: int, iso: str) -> int | None:
    return max(0, (now - dates.parse_iso(iso)) // 1000) if iso else None


def age(seconds: int | None) -> str:
    """`-`, `42s`, `5m`, `3h`, `2d`."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"
