"""`taskyard pool list|show|create|update|delete|workers|errors`: the worker-manager's pools from
the command line.

Like `taskyard hook`, the commands talk HTTP to the deployment at TASKCLUSTER_ROOT_URL with the
TASKCLUSTER_* credentials. A pool's id is its task queue's id, `provisionerId/workerType`; one that
is not is refused before any request. `create` and `update` build the pool's config from flags
(the local provider's capacities), or take it whole from `--config FILE` (YAML or JSON; `-` for
standard input), the flags then changing the file's values; `update` reads the pool, changes what
it is told to and writes it back. Exit status: 0 done, 1 the server refused or could not be
reached, 2 bad usage or an unusable file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from taskyard.cli import admin, http
from taskyard.cli.tasks import DEFAULT_OWNER, BadFile, Result
from taskyard.model.client_errors import Refused
from taskyard.model.errors import InputError
from taskyard.model.identifiers import TASK_QUEUE_ID

COMMANDS = ("pool",)
SERVICE = "worker-manager"
PAGE_SIZE = 1000  # the server's maximum page
STATES = ("requested", "running", "stopping", "stopped")
PROVIDERS = ("local", "static")
ERRORS_SHOWN = 100  # `pool errors` without --limit: the newest hundred
DELETED = "null-provider"  # the provider of a deleted pool, until its last worker stops
# The local provider's config, flag by flag: (flag, dest, config key, help).
LOCAL_FLAGS = (
    ("--max-capacity", "max_capacity", "maxCapacity", "most capacity its workers may have at once"),
    ("--min-capacity", "min_capacity", "minCapacity", "capacity kept running with no work (default 0)"),
    ("--capacity-per-worker", "capacity_per_worker", "capacityPerWorker", "tasks each worker runs at once"),
    (
        "--idle-timeout",
        "idle_timeout",
        "idleTimeoutSeconds",
        "seconds a worker beyond the minimum waits for work before it stops",
    ),
)
_POOL_ID = re.compile(TASK_QUEUE_ID)


# ---------------------------------------------------------------------------------------------------
# Command line.


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `pool ...` on `taskyard`'s sub-commands."""
    common = admin._common_options()
    pool = commands.add_parser(
        "pool", help="create, change and inspect worker pools: their capacity, workers and errors"
    )
    actions = pool.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        parents=[common],
        help="the pools: provider, capacity, pending tasks, workers by state "
        "(needs worker-manager:list-worker-pools)",
    )
    listing.set_defaults(handler=list_pools)
    show = actions.add_parser(
        "show",
        parents=[common],
        help="a pool's definition and state (needs worker-manager:get-worker-pool:ID)",
    )
    _id(show)
    show.set_defaults(handler=show_pool)
    for name, handler, text in (
        ("create", create_pool, "create a pool"),
        ("update", update_pool, "change a pool: what is not given is kept"),
    ):
        action = actions.add_parser(
            name,
            parents=[common],
            help=text,
            description=f"{text.capitalize()}. Needs worker-manager:manage-worker-pool:ID and "
            "worker-manager:provider:PROVIDER.",
        )
        _id(action)
        _definition_options(action, create=name == "create")
        action.set_defaults(handler=handler)
    delete = actions.add_parser(
        "delete",
        parents=[common],
        help="delete a pool: its workers stop, and it goes once none is left "
        "(needs worker-manager:manage-worker-pool:ID)",
    )
    _id(delete)
    delete.set_defaults(handler=delete_pool)
    workers = actions.add_parser(
        "workers",
        parents=[common],
        help="a pool's workers: state, capacity, created (needs worker-manager:list-workers:ID)",
    )
    _id(workers)
    workers.add_argument("--state", choices=STATES, help="only the workers in this state")
    workers.set_defaults(handler=list_workers)
    errors = actions.add_parser(
        "errors",
        parents=[common],
        help="a pool's errors, newest first (needs worker-manager:list-worker-pool-errors:ID)",
    )
    _id(errors)
    errors.add_argument(
        "--limit",
        type=_positive,
        default=ERRORS_SHOWN,
        metavar="N",
        help=f"how many of the newest (default {ERRORS_SHOWN})",
    )
    errors.set_defaults(handler=list_errors)


def _id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pool_id", metavar="ID", type=pool_id, help="the pool's id: provisionerId/workerType")


def pool_id(text: str) -> str:
    """A worker pool id, `provisionerId/workerType` as a task queue's id is written."""
    if not _POOL_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a worker pool id: provisionerId/workerType, the pool's task queue, "
            "like local/default (1-38 of A-Z a-z 0-9 - _, then / and 1-38 of a-z 0-9 -, "
            "starting with a letter, not ending with -)"
        )
    return text


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 0")
    return value


def _definition_options(parser: argparse.ArgumentParser, *, create: bool) -> None:
    parser.add_argument(
        "--provider",
        choices=PROVIDERS,
        required=create,
        help="local: worker processes the server starts; static: machines someone else runs"
        + ("" if create else " (a new provider starts from an empty config)"),
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="the whole config, YAML or JSON (- for stdin); the flags below change its values",
    )
    for flag, dest, _, text in LOCAL_FLAGS:
        number = _count if dest in ("max_capacity", "min_capacity") else _positive
        metavar = "SECONDS" if dest == "idle_timeout" else "N"
        parser.add_argument(flag, dest=dest, type=number, metavar=metavar, help=f"(local) {text}")
    parser.add_argument("--description", help="what the pool is for" + (" (default: none)" if create else ""))
    parser.add_argument(
        "--owner",
        help="the email address of who runs it" + (f" (default {DEFAULT_OWNER})" if create else ""),
    )
    parser.add_argument(
        "--email-on-error",
        action=argparse.BooleanOptionalAction,
        help="email the owner of the pool's errors" + (" (default: no)" if create else ""),
    )


def _path(args: argparse.Namespace, base: str = "/worker-pool") -> str:
    return f"{base}/{http.segment(args.pool_id)}"


# ---------------------------------------------------------------------------------------------------
# Reading pools.


def pages(
    connection: http.Connection, path: str, key: str, query: Mapping[str, str] | None = None
) -> Iterator[Any]:
    """Every item of a paged worker-manager listing."""
    asked = {"limit": str(PAGE_SIZE), **(query or {})}
    while True:
        page = http.call(connection, "GET", path, service=SERVICE, query=asked)
        yield from page[key]
        if not page.get("continuationToken"):
            return
        asked = {**asked, "continuationToken": page["continuationToken"]}


def pending_tasks(connection: http.Connection, task_queue_id: str) -> int | None:
    """The pool's task queue's pending tasks (taskQueueCounts); None if the caller may not count them."""
    try:
        counts = http.call(
            connection, "GET", f"/task-queues/{http.segment(task_queue_id)}/counts", service="queue"
        )
    except Refused as exc:
        if exc.status in (401, 403):
            return None
        raise
    return int(counts["pendingTasks"])


def counts_scopes(pool: Mapping[str, Any]) -> str:
    """What taskQueueCounts asks of the caller for the pool's task queue."""
    pool_id = pool["workerPoolId"]
    return f"queue:pending-count:{pool_id} and queue:claimed-count:{pool_id}"


def capacity(pool: Mapping[str, Any]) -> str:
    """`current/min-max` for a local pool, else the current capacity alone."""
    current = str(pool.get("currentCapacity", 0))
    config = pool.get("config") or {}
    if pool.get("providerId") == "local" and "maxCapacity" in config:
        return f"{current}/{config.get('minCapacity', 0)}-{config['maxCapacity']}"
    return current


def workers_by_state(pool: Mapping[str, Any]) -> str:
    """`2 running, 1 requested`: the states that have workers; `none` if none does."""
    said = [f"{pool.get(f'{state}Count', 0)} {state}" for state in STATES if pool.get(f"{state}Count")]
    return ", ".join(said) or "none"


def provider(pool: Mapping[str, Any]) -> str:
    return "(deleted)" if pool["providerId"] == DELETED else pool["providerId"]


def list_pools(connection: http.Connection, args: argparse.Namespace) -> Result:
    """listWorkerPools, with each pool's pending tasks (taskQueueCounts; `-` without its scopes)."""
    found = [
        {**pool, "pendingTasks": pending_tasks(connection, pool["workerPoolId"])}
        for pool in pages(connection, "/worker-pools", "workerPools")
    ]
    if not found:
        none = "no worker pools"
        return Result(found, none, wide=none)
    header = ["POOL", "PROVIDER", "CAPACITY", "PENDING", "WORKERS"]
    rows = [
        [
            p["workerPoolId"],
            provider(p),
            capacity(p),
            "-" if p["pendingTasks"] is None else str(p["pendingTasks"]),
            workers_by_state(p),
        ]
        for p in found
    ]
    wide = [[*row[:4], p["owner"], p["lastModified"], row[4]] for row, p in zip(rows, found, strict=True)]
    return Result(
        found,
        admin.table(header, rows),
        wide=admin.table([*header[:4], "OWNER", "LAST MODIFIED", "WORKERS"], wide),
    )


def show_pool(connection: http.Connection, args: argparse.Namespace) -> Result:
    """workerPool, and its task queue's pending tasks."""
    pool = http.call(connection, "GET", _path(args), service=SERVICE)
    pending = pending_tasks(connection, pool["workerPoolId"])
    return Result({**pool, "pendingTasks": pending}, pool_text(pool, pending))


def pool_text(pool: Mapping[str, Any], pending: int | None) -> str:
    capacities = [
        f"{pool.get(f'{state}Capacity', 0)} {state}" for state in STATES if pool.get(f"{state}Capacity")
    ]
    rows: list[tuple[str, str | list[str]]] = [
        ("workerPoolId", pool["workerPoolId"]),
        ("provider", provider(pool)),
        ("description", pool["description"].splitlines() or ["(none)"]),
        ("owner", pool["owner"]),
        ("emailOnError", "yes" if pool["emailOnError"] else "no"),
        ("created", pool["created"]),
        ("lastModified", pool["lastModified"]),
        ("capacity", capacity(pool) + (f" ({', '.join(capacities)})" if capacities else "")),
        ("pending tasks", str(pending) if pending is not None else f"- (needs {counts_scopes(pool)})"),
        ("workers", workers_by_state(pool)),
        ("config", json.dumps(pool["config"], indent=2, sort_keys=True).splitlines()),
    ]
    return admin.fields(rows)


# ---------------------------------------------------------------------------------------------------
# Changing pools.


def read_config(path: str) -> dict[str, Any]:
    """The config object in `path` (`-`: standard input), YAML or JSON; BadFile if unusable."""
    from taskyard.model import definition_yaml

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadFile(
            path, f"cannot be read: {getattr(exc, 'strerror', None) or type(exc).__name__}"
        ) from None
    try:
        value = definition_yaml.load(text, aliases=True)  # JSON is YAML too
    except definition_yaml.YamlProblem as exc:
        context = f" ({exc.context})" if exc.context else ""
        raise BadFile(path, f"{exc.where}not valid YAML or JSON: {exc.problem}{context}") from None
    try:
        definition_yaml.check_json(value, "config")
    except InputError as exc:
        raise BadFile(path, exc.message) from None
    if not isinstance(value, dict):
        raise BadFile(path, "must hold an object: the pool's config")
    return value


def _edited(current: Mapping[str, Any] | None, args: argparse.Namespace) -> dict[str, Any]:
    """The pool definition the flags make of `current` (None: a new pool)."""
    body: dict[str, Any] = (
        {k: current[k] for k in ("providerId", "description", "config", "owner", "emailOnError")}
        if current is not None
        else {"providerId": args.provider, "description": "", "config": {}, "owner": DEFAULT_OWNER}
    )
    body["emailOnError"] = bool(body.get("emailOnError"))
    if args.provider is not None and args.provider != body["providerId"]:
        body["providerId"], body["config"] = args.provider, {}  # another provider's config would not do
    config = read_config(args.config) if args.config is not None else dict(body["config"])
    for _, dest, key, _ in LOCAL_FLAGS:
        value = getattr(args, dest)
        if value is not None:
            config[key] = value
    body["config"] = config
    for dest, key in (("description", "description"), ("owner", "owner"), ("email_on_error", "emailOnError")):
        if getattr(args, dest) is not None:
            body[key] = getattr(args, dest)
    return body


def create_pool(connection: http.Connection, args: argparse.Namespace) -> Result:
    body = _edited(None, args)
    answer = http.call(connection, "PUT", _path(args), service=SERVICE, body=body)
    return Result(answer, f"Created worker pool {args.pool_id} (provider {args.provider}).")


def update_pool(connection: http.Connection, args: argparse.Namespace) -> Result:
    given = (
        "provider",
        "config",
        *(d for _, d, _, _ in LOCAL_FLAGS),
        "description",
        "owner",
        "email_on_error",
    )
    if all(getattr(args, name) is None for name in given):
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        args._parser.error(f"nothing to change: pass one of {flags}")
    current = http.call(connection, "GET", _path(args), service=SERVICE)
    if current["providerId"] == DELETED and args.provider is None:
        raise http.Failed(
            f"worker pool {args.pool_id} is deleted (its workers are stopping): "
            "pass --provider to bring it back"
        )
    body = _edited(current, args)
    answer = http.call(connection, "POST", _path(args), service=SERVICE, body=body)
    return Result(answer, f"Updated worker pool {args.pool_id}.")


def delete_pool(connection: http.Connection, args: argparse.Namespace) -> Result:
    answer = http.call(connection, "DELETE", _path(args), service=SERVICE)
    live = sum(answer.get(f"{state}Count", 0) for state in STATES if state != "stopped")
    then = f"it goes once its {live} worker(s) have stopped" if live else "it goes at the next upkeep"
    return Result(answer, f"Deleted worker pool {args.pool_id}: {then}.")


# ---------------------------------------------------------------------------------------------------
# Workers and errors.


def list_workers(connection: http.Connection, args: argparse.Namespace) -> Result:
    """listWorkersForWorkerPool, every page; `--state` asks the server for that state alone."""
    query = {"state": args.state} if args.state else {}
    found = list(pages(connection, _path(args, "/workers"), "workers", query))
    if not found:
        none = f"no {args.state} workers" if args.state else "no workers"
        return Result(found, none, wide=none)
    header = ["WORKER", "STATE", "CAPACITY", "CREATED"]
    rows = [
        [f"{w['workerGroup']}/{w['workerId']}", w["state"], str(w["capacity"]), w["created"]] for w in found
    ]
    wide = [
        [*row, w["providerId"], w["lastModified"], w["expires"]] for row, w in zip(rows, found, strict=True)
    ]
    return Result(
        found,
        admin.table(header, rows),
        wide=admin.table([*header, "PROVIDER", "LAST MODIFIED", "EXPIRES"], wide),
    )


def list_errors(connection: http.Connection, args: argparse.Namespace) -> Result:
    """listWorkerPoolErrors, newest first, up to `--limit`."""
    found = []
    query = {"limit": str(min(args.limit, PAGE_SIZE))}
    for error in pages(connection, _path(args, "/worker-pool-errors"), "workerPoolErrors", query):
        found.append(error)
        if len(found) >= args.limit:
            break
    if not found:
        return Result(found, "no errors", wide="no errors")
    header = ["REPORTED", "KIND", "TITLE"]
    rows = [[e["reported"], e["kind"], e["title"]] for e in found]
    wide = [
        [e["reported"], e["errorId"], e["kind"], e["title"], admin._first_line(e["description"], 100) or "-"]
        for e in found
    ]
    return Result(
        found,
        admin.table(header, rows),
        wide=admin.table(["REPORTED", "ERROR ID", "KIND", "TITLE", "DESCRIPTION"], wide),
    )
