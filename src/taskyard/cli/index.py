"""`taskyard index`: find, list and insert entries of the deployment's index.

Like `taskyard task`, the commands talk HTTP to the deployment at TASKCLUSTER_ROOT_URL with the
TASKCLUSTER_* credentials. Exit status: 0 done, 1 the server refused or could not be reached
(nothing indexed at the path: 1), 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from taskyard.cli import admin, http
from taskyard.cli.tasks import Result, _slugid
from taskyard.model import dates, schema
from taskyard.model.errors import ConfigError

COMMANDS = ("index",)
DEFAULT_EXPIRY_DAYS = 365


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `index find|list|insert` on `taskyard`'s sub-commands."""
    common = admin._common_options()
    index = commands.add_parser("index", help="find, list and insert indexed tasks")
    actions = index.add_subparsers(dest="action", required=True, metavar="ACTION")
    find = actions.add_parser("find", parents=[common], help="the task indexed at a path (a.b.c)")
    find.add_argument("path", metavar="PATH")
    find.set_defaults(handler=find_task)
    listing = actions.add_parser(
        "list",
        parents=[common],
        help="the namespaces and tasks directly under a namespace (default: the root)",
    )
    listing.add_argument("namespace", metavar="NAMESPACE", nargs="?", default="")
    listing.set_defaults(handler=list_namespace)
    insert = actions.add_parser("insert", parents=[common], help="index a task at a path")
    insert.add_argument("path", metavar="PATH")
    insert.add_argument("task_id", metavar="TASKID", type=_slugid)
    insert.add_argument("--rank", type=int, default=0, help="a higher rank is never replaced by a lower one")
    insert.add_argument(
        "--expires", metavar="DATE", help=f"an RFC 3339 date (default: in {DEFAULT_EXPIRY_DAYS} days)"
    )
    insert.add_argument("--data", metavar="JSON", default="{}", help="a JSON object stored with the entry")
    insert.set_defaults(handler=insert_task)


def _path(path: str) -> str:
    return http.segment(path)


def entry_text(entry: dict[str, Any]) -> str:
    data = json.dumps(entry["data"], sort_keys=True) if entry["data"] else ""
    head = f"{entry['namespace']}  {entry['taskId']}  rank {entry['rank']}"
    return f"{head}  expires {entry['expires']}  {data}".rstrip()


def find_task(connection: http.Connection, args: argparse.Namespace) -> Result:
    entry = http.call(connection, "GET", f"/task/{_path(args.path)}", service="index")
    return Result(entry, entry_text(entry))


def _all(connection: http.Connection, path: str, key: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        query = {"continuationToken": token} if token else None
        page = http.call(connection, "GET", path, service="index", query=query)
        found += page[key]
        token = page.get("continuationToken")
        if not token:
            return found


def list_namespace(connection: http.Connection, args: argparse.Namespace) -> Result:
    """Every namespace and task directly under NAMESPACE: namespaces first, then tasks."""
    where = f"/{_path(args.namespace)}" if args.namespace else ""
    namespaces = _all(connection, f"/namespaces{where}", "namespaces")
    found = _all(connection, f"/tasks{where}", "tasks")
    rows = [[n["namespace"] + ".", "-", "-", n["expires"]] for n in namespaces]
    rows += [[t["namespace"], t["taskId"], str(t["rank"]), t["expires"]] for t in found]
    text = admin.table(["PATH", "TASK ID", "RANK", "EXPIRES"], rows) if rows else "(nothing indexed here)"
    return Result({"namespaces": namespaces, "tasks": found}, text)


def insert_task(connection: http.Connection, args: argparse.Namespace) -> Result:
    try:
        data = json.loads(args.data)
    except json.JSONDecodeError as exc:
        raise ConfigError("--data", args.data, f"must be JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError("--data", args.data, "must be a JSON object")
    expires = args.expires or dates.to_iso(dates.now_ms() + DEFAULT_EXPIRY_DAYS * 24 * 3600 * 1000)
    try:
        schema.to_millis(expires)
    except ValueError:
        raise ConfigError(
            "--expires", expires, "must be an RFC 3339 date, like 2030-01-31T00:00:00Z"
        ) from None
    body = {"taskId": args.task_id, "rank": args.rank, "data": data, "expires": expires}
    entry = http.call(connection, "PUT", f"/task/{_path(args.path)}", service="index", body=body)
    return Result(entry, entry_text(entry))
