"""`taskyard task|group`: create, inspect, cancel and rerun tasks; list and fetch their artifacts.

Like `taskyard client|role|scopes` (see `admin`), the commands talk HTTP to the deployment at
TASKCLUSTER_ROOT_URL, signing with the TASKCLUSTER_* credentials or their flags, and print text for
people or `--json` for scripts. Exit status: 0 done, 1 the server refused or could not be reached (or
an error artifact, or a group that did not all complete), 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
import zlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from taskyard.cli import admin, http, refusals
from taskyard.model import dates, slugid
from taskyard.model.client_errors import Refused, Unreachable
from taskyard.model.errors import ConfigError, InputError, TaskyardError

COMMANDS = ("task", "group")
PAGE_SIZE = 1000  # the server's maximum page
DEFAULT_SOURCE = "https://taskyard.invalid/cli"
DEFAULT_OWNER = "nobody@taskyard.invalid"
STATES = ("unscheduled", "pending", "running", "completed", "failed", "exception")
UNRESOLVED = ("unscheduled", "pending", "running")
CHUNK = 64 * 1024
BAR_WIDTH = 30

# Where a running task's live log streams from (the live.log artifact redirects there).
LIVE_STREAM = "/api/queue/v1/_livelog/"


@dataclass(frozen=True)
class Result:
    """What a command answers: `data` for `--json` (None prints nothing), `text` for people."""

    data: Any
    text: str
    status: int = 0
    wide: str = ""  # `-o wide`: the text with more columns ("" for the same text)


Handler = Callable[[http.Connection, argparse.Namespace], Result]


# ---------------------------------------------------------------------------------------------------
# Command line.


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `task` and `group` with their actions on `taskyard`'s sub-commands."""
    common = admin._common_options()
    connection = admin.connection_options()
    task = commands.add_parser("task", help="create, inspect, cancel and rerun tasks; fetch artifacts")
    actions = task.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        parents=[common],
        help="create a task from a YAML or JSON file",
        description="Create a task from FILE: YAML (.yaml/.yml) or JSON. "
        "taskId, created, deadline (now + 1 day) and missing metadata are filled in.",
    )
    create.add_argument(
        "file", metavar="FILE", help="the task definition (YAML or JSON; - reads standard input)"
    )
    create.add_argument("--task-id", type=_slugid, help="the taskId to use (default: a new slugid)")
    create.add_argument(
        "--task-group-id",
        type=new_task_group_id,
        help="the task's group (default: the file's, else its own taskId)",
    )
    create.set_defaults(handler=create_task)
    for name, handler, help in (
        ("status", task_status, "show a task's state and runs"),
        ("cancel", cancel_task, "cancel a task"),
        ("rerun", rerun_task, "run a resolved task again"),
        ("artifacts", list_artifacts, "list the artifacts of a task's latest run"),
    ):
        action = actions.add_parser(name, parents=[common], help=help)
        action.add_argument("task_id", metavar="ID", type=task_id)
        action.set_defaults(handler=handler)
    fetch = actions.add_parser(
        "get-artifact", parents=[connection], help="download an artifact of a task's latest run"
    )
    fetch.add_argument("task_id", metavar="ID", type=task_id)
    fetch.add_argument("name", metavar="NAME")
    fetch.add_argument("-o", "--output", metavar="FILE", help="write it to FILE (default: stdout)")
    fetch.set_defaults(handler=get_artifact)
    from taskyard.cli import lists, logs  # they build on this module's helpers

    logs.add_command(actions, connection)
    lists.add_task_commands(actions, connection)

    group = commands.add_parser("group", help="follow task groups")
    group_actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = group_actions.add_parser("status", parents=[common], help="count a task group's tasks by state")
    status.add_argument("task_group_id", metavar="ID", type=task_group_id)
    status.add_argument(
        "--wait",
        action="store_true",
        help="wait until no task is unscheduled, pending or running; exit 1 unless all completed",
    )
    status.add_argument(
        "--interval", type=float, default=2.0, metavar="SECONDS", help="between checks with --wait"
    )
    status.set_defaults(handler=group_status)
    lists.add_group_commands(group_actions, connection)


def _slugid(text: str) -> str:
    if not slugid.is_valid(text):
        raise argparse.ArgumentTypeError(refusals.not_an_id("taskId", text))
    return text


def task_id(text: str) -> str:
    """An argparse type for a task to look up: 22 characters of a slugid's alphabet, else `'abc'
    is not a taskId (22 characters of ...)`. One of that form that no task can have (not a v4
    slugid) is the server's to refuse, and is said not to exist (`refusals.summary`)."""
    if not refusals.SLUGID_FORM.fullmatch(text):
        raise argparse.ArgumentTypeError(refusals.not_an_id("taskId", text))
    return text


def task_group_id(text: str) -> str:
    """As `task_id`, for a task group to look up."""
    if not refusals.SLUGID_FORM.fullmatch(text):
        raise argparse.ArgumentTypeError(refusals.not_an_id("taskGroupId", text))
    return text


def new_task_group_id(text: str) -> str:
    """A task group id to create tasks in: a slugid."""
    if not slugid.is_valid(text):
        raise argparse.ArgumentTypeError(refusals.not_an_id("taskGroupId", text))
    return text


# ---------------------------------------------------------------------------------------------------
# Tasks.


class BadFile(ConfigError):
    """A task definition that cannot be used: the file, the line and what is wrong, said once."""

    def __init__(self, path: str, problem: str) -> None:
        TaskyardError.__init__(self, f"{'standard input' if path == '-' else path}: {problem}")
        self.key, self.value, self.rule = "FILE", path, problem


def read_definition(path: str) -> dict[str, Any]:
    """The task in `path` (`-`: standard input): YAML by its suffix, else JSON; BadFile if unusable."""
    file = Path(path)
    try:
        text = sys.stdin.read() if path == "-" else file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadFile(path, f"cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    if path == "-" or file.suffix.lower() in (".yaml", ".yml"):
        body = _yaml(path, text)  # JSON is YAML too: standard input may be either
    else:
        try:
            body = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadFile(path, f"line {exc.lineno}, column {exc.colno}: not valid JSON: {exc.msg}") from None
    if not isinstance(body, dict):
        raise BadFile(path, "must hold an object: the task definition")
    return body


def _yaml(path: str, text: str) -> Any:
    # Imported when used: `serve` and most commands read no YAML. Read as the web UI's create form
    # reads it (dates stay strings, a tag's bad value is its line, only JSON), aliases allowed.
    from taskyard.model import definition_yaml

    try:
        body = definition_yaml.load(text, aliases=True)
    except definition_yaml.YamlProblem as exc:
        context = f" ({exc.context})" if exc.context else ""
        raise BadFile(path, f"{exc.where}not valid YAML: {exc.problem}{context}") from None
    try:
        definition_yaml.check_json(body, "task")
    except InputError as exc:
        raise BadFile(path, exc.message) from None
    return body


def with_defaults(body: Mapping[str, Any], path: str, now: int) -> dict[str, Any]:
    """`body` with `created` (now), `deadline` (now + 1 day) and the metadata it lacks filled in."""
    task = dict(body)
    task.setdefault("created", dates.to_iso(now))
    task.setdefault("deadline", dates.to_iso(now + dates.DAY))
    metadata = task.get("metadata")
    if metadata is None or isinstance(metadata, dict):
        name = "task" if path == "-" else Path(path).stem or "task"
        task["metadata"] = {
            "name": name,
            "description": f"created with `taskyard task create {'-' if path == '-' else Path(path).name}`",
            "owner": DEFAULT_OWNER,
            "source": DEFAULT_SOURCE,
            **(metadata or {}),
        }
    return task


def create_task(connection: http.Connection, args: argparse.Namespace) -> Result:
    """createTask from a file, defaults filled; prints the taskId and its state."""
    task = with_defaults(read_definition(args.file), args.file, dates.now_ms())
    if args.task_group_id:
        task["taskGroupId"] = args.task_group_id
    task_id = args.task_id or slugid.nice()
    answer = http.call(connection, "PUT", f"/task/{http.segment(task_id)}", service="queue", body=task)
    status = answer["status"]
    return Result({"taskId": task_id, **answer}, f"{status['taskId']} {status['state']}")


def status_of(connection: http.Connection, task_id: str, method: str, action: str = "") -> Any:
    path = f"/task/{http.segment(task_id)}{action}"
    return http.call(connection, method, path, service="queue")["status"]


def task_status(connection: http.Connection, args: argparse.Namespace) -> Result:
    """status: the task's state and a table of its runs; for an unscheduled task, why."""
    status = status_of(connection, args.task_id, "GET", "/status")
    text = status_text(status)
    if status["state"] == "unscheduled":
        text += f"\n\ntask {status['taskId']} {unscheduled_text(connection, status)}"
    return Result(status, text)


SHOWN_DEPENDENCIES = 5  # named in `unscheduled_text`; the rest counted
STATUSES_PER_CALL = 1000


def unscheduled_text(connection: http.Connection, status: Mapping[str, Any]) -> str:
    """Why an unscheduled task has no run: blocked for good by a dependency that did not complete
    (it requires all-completed) until its deadline, or the dependencies it still waits for."""
    task = http.call(connection, "GET", f"/task/{http.segment(status['taskId'])}", service="queue")
    deps: list[str] = task.get("dependencies") or []
    requires = task.get("requires", "all-completed")
    states: dict[str, str] = {}
    try:
        for start in range(0, len(deps), STATUSES_PER_CALL):
            body = {"taskIds": deps[start : start + STATUSES_PER_CALL]}
            answer = http.call(connection, "POST", "/tasks/status", service="queue", body=body)
            states.update({s["taskId"]: s["status"]["state"] for s in answer["statuses"]})
    except Refused:  # credentials that may not read the dependencies' status: say what is known
        return f"is unscheduled: it waits for its {len(deps)} dependencies to {_verb(requires)}"
    failed = [d for d in deps if states.get(d, "gone") in ("failed", "exception", "gone")]
    if requires == "all-completed" and failed:
        first = failed[0]
        said = f"{first} {states[first]}" if first in states else f"{first} no longer exists"
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return (
            f"is blocked: its dependency {said}{more} and it requires all-completed, so it will never "
            f"run; it stays unscheduled until its deadline, {task['deadline']}, then resolves "
            "exception (deadline-exceeded)"
        )
    done = ("completed",) if requires == "all-completed" else ("completed", "failed", "exception")
    waiting = [d for d in deps if states.get(d) not in done]
    named = ", ".join(f"{d} ({states.get(d, 'gone')})" for d in waiting[:SHOWN_DEPENDENCIES])
    more = f" and {len(waiting) - SHOWN_DEPENDENCIES} more" if len(waiting) > SHOWN_DEPENDENCIES else ""
    counted = f"{len(waiting)} of its {len(deps)} dependencies"
    return f"is unscheduled: it waits for {counted} to {_verb(requires)}: {named}{more}"


def _verb(requires: str) -> str:
    return "complete" if requires == "all-completed" else "resolve"


RESOLVED = ("completed", "failed", "exception")


def cancel_task(connection: http.Connection, args: argparse.Namespace) -> Result:
    """cancelTask: what it did (a resolved task is left as it is), then the task's status."""
    before = status_of(connection, args.task_id, "GET", "/status")
    status = status_of(connection, args.task_id, "POST", "/cancel")
    if before["state"] in RESOLVED:
        said = f"Task {status['taskId']} is already {before['state']}: nothing to cancel."
    else:
        said = f"Cancelled task {status['taskId']}."
    return Result(status, f"{said}\n{status_text(status)}")


def rerun_task(connection: http.Connection, args: argparse.Namespace) -> Result:
    """rerunTask: what it did (only a resolved task gets a new run), then the task's status."""
    before = status_of(connection, args.task_id, "GET", "/status")
    status = status_of(connection, args.task_id, "POST", "/rerun")
    if len(status.get("runs") or []) > len(before.get("runs") or []):
        said = f"Rerunning task {status['taskId']}: run {len(status['runs']) - 1} is {status['state']}."
    else:
        said = f"Task {status['taskId']} is {before['state']}: no new run (it reruns only resolved tasks)."
    return Result(status, f"{said}\n{status_text(status)}")


def status_text(status: Mapping[str, Any]) -> str:
    """A task status for people: its fields, then one row per run."""
    head = admin.fields(
        [
            ("taskId", status["taskId"]),
            ("taskGroupId", status.get("taskGroupId", "")),
            ("taskQueueId", status.get("taskQueueId", "")),
            ("state", status["state"]),
            ("deadline", status.get("deadline", "")),
        ]
    )
    runs = status.get("runs") or []
    if not runs:
        return f"{head}\n\nno runs"
    rows = [
        [
            str(run["runId"]),
            run["state"],
            run.get("reasonCreated", ""),
            run.get("reasonResolved", "") or "-",
            f"{run['workerGroup']}/{run['workerId']}" if run.get("workerId") else "-",
            run.get("started", "") or "-",
            run.get("resolved", "") or "-",
        ]
        for run in runs
    ]
    header = ["RUN", "STATE", "CREATED", "RESOLVED AS", "WORKER", "STARTED", "RESOLVED"]
    return f"{head}\n\n{admin.table(header, rows)}"


# ---------------------------------------------------------------------------------------------------
# Artifacts.


def list_artifacts(connection: http.Connection, args: argparse.Namespace) -> Result:
    """listLatestArtifacts, every page: name, storage type, content type and expiry."""
    found: list[dict[str, Any]] = []
    query = {"limit": str(PAGE_SIZE)}
    path = f"/task/{http.segment(args.task_id)}/artifacts"
    while True:
        page = http.call(connection, "GET", path, service="queue", query=query)
        found += page["artifacts"]
        if not page.get("continuationToken"):
            break
        query = {**query, "continuationToken": page["continuationToken"]}
    rows = [[a["name"], a["storageType"], a.get("contentType", ""), a["expires"]] for a in found]
    header = ["NAME", "TYPE", "CONTENT TYPE", "EXPIRES"]
    return Result(found, admin.table(header, rows) if rows else "no artifacts")


class _Stay(urllib.request.HTTPRedirectHandler):
    """Do not follow redirects: the artifact's URL is fetched without our Authorization header."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def get_artifact(connection: http.Connection, args: argparse.Namespace) -> Result:
    """getLatestArtifact: follow its 303 to the content and stream it to stdout or `--output`."""
    location = location_of(
        artifact_request(connection, args.task_id, args.name), connection.timeout, args.name
    )
    if location.startswith(connection.root_url + LIVE_STREAM):
        # The run is still going: its log so far, not a stream that ends only when the run does.
        location += "&follow=0"
        print(
            f"taskyard: {args.name} is live: this is what it holds now; "
            f"follow it with `taskyard task log {args.task_id} -f`",
            file=sys.stderr,
        )
    with open_url(urllib.request.Request(location), connection.timeout) as response:
        if args.output:
            with open(args.output, "wb") as target:
                copy_content(response, target)
            size = Path(args.output).stat().st_size
            return Result({"name": args.name, "file": args.output, "bytes": size}, "")
        sys.stdout.flush()
        copy_content(response, sys.stdout.buffer)
    return Result(None, "")


def copy_content(response: Any, out: IO[bytes]) -> None:
    """Copy as bytes arrive (read1: a live log must not wait for a full buffer), un-gzipping what
    was stored with `Content-Encoding: gzip`, as a browser would."""
    encoding = response.headers.get("Content-Encoding", "")
    inflate = zlib.decompressobj(wbits=31) if encoding.lower() == "gzip" else None
    read = getattr(response, "read1", response.read)
    while chunk := read(CHUNK):
        out.write(inflate.decompress(chunk) if inflate else chunk)
        out.flush()
    if inflate is not None:
        out.write(inflate.flush())
        out.flush()


def artifact_request(
    connection: http.Connection, task_id: str, name: str, run_id: int | None = None
) -> urllib.request.Request:
    """A signed getArtifact (or getLatestArtifact, without `run_id`) request for `name`."""
    name_path = "/".join(http.segment(part) for part in name.split("/"))
    run = "" if run_id is None else f"/runs/{run_id}"
    url = connection.url("queue", f"/task/{http.segment(task_id)}{run}/artifacts/{name_path}")
    request = urllib.request.Request(url, method="GET")
    http.sign(request, connection)
    return request


def location_of(request: urllib.request.Request, timeout: float, name: str) -> str:
    """Where the queue redirects to; Failed with the reason and message of an error artifact."""
    with http.translated(request):
        try:
            with urllib.request.build_opener(_Stay).open(request, timeout=timeout) as response:
                response.read()
                raise Unreachable(f"{http.where(request)} answered {response.status}, not a redirect")
        except urllib.error.HTTPError as exc:
            with exc:
                if exc.code in (301, 302, 303, 307, 308) and exc.headers.get("Location"):
                    return str(exc.headers["Location"])
                raw = exc.read()
                if exc.code == 424:
                    body = _json(raw)
                    reason, message = body.get("reason", "?"), body.get("message", "")
                    raise http.Failed(f"artifact {name} is an error artifact: {reason}: {message}") from None
                raise http.refused(exc.code, exc.reason, raw) from None


def open_url(request: urllib.request.Request, timeout: float | None) -> IO[bytes]:
    with http.translated(request):
        response: IO[bytes] = urllib.request.urlopen(request, timeout=timeout)
    return response


def _json(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


# ---------------------------------------------------------------------------------------------------
# Task groups.


def group_counts(
    connection: http.Connection, task_group_id: str, unsuccessful: list[dict[str, str]] | None = None
) -> dict[str, int]:
    """listTaskGroup, every page: how many tasks are in each state (every state, zero or not).
    The failed and exception tasks are added to `unsuccessful`, if given."""
    counts: Counter[str] = Counter()
    query = {"limit": str(PAGE_SIZE)}
    path = f"/task-group/{http.segment(task_group_id)}/list"
    while True:
        page = http.call(connection, "GET", path, service="queue", query=query)
        counts.update(entry["status"]["state"] for entry in page["tasks"])
        if unsuccessful is not None:
            unsuccessful += [
                _unsuccessful(e) for e in page["tasks"] if e["status"]["state"] in ("failed", "exception")
            ]
        if not page.get("continuationToken"):
            break
        query = {**query, "continuationToken": page["continuationToken"]}
    return {state: counts.get(state, 0) for state in (*STATES, *sorted(set(counts) - set(STATES)))}


def _unsuccessful(entry: Mapping[str, Any]) -> dict[str, str]:
    status, runs = entry["status"], entry["status"].get("runs") or [{}]
    name = (entry["task"].get("metadata") or {}).get("name", "")
    return {
        "taskId": status["taskId"],
        "state": status["state"],
        "reason": runs[-1].get("reasonResolved", ""),
        "name": name,
    }


def counts_text(counts: Mapping[str, int]) -> str:
    return "  ".join(f"{state} {n}" for state, n in counts.items())


def group_status(connection: http.Connection, args: argparse.Namespace) -> Result:
    """Counts by state and the unsuccessful tasks; with `--wait`, until nothing is left to run
    (exit 1 unless all completed)."""
    unsuccessful: list[dict[str, str]] = []

    def look() -> dict[str, int]:
        unsuccessful.clear()
        return group_counts(connection, args.task_group_id, unsuccessful)

    counts = look()
    if args.wait:
        tty = sys.stderr.isatty()
        last = 0.0
        while any(counts.get(state, 0) for state in UNRESOLVED):
            if tty:
                print(f"\r{progress(counts)}", end="", file=sys.stderr, flush=True)
            elif time.monotonic() - last >= max(args.interval, 10.0):
                print(progress(counts), file=sys.stderr, flush=True)
                last = time.monotonic()
            time.sleep(max(args.interval, 0.1))
            counts = look()
        if tty:
            print(f"\r{progress(counts)}", file=sys.stderr, flush=True)
    total = sum(counts.values())
    data = {"taskGroupId": args.task_group_id, "total": total, "counts": counts, "unsuccessful": unsuccessful}
    text = f"{args.task_group_id}: {total} tasks  {counts_text(counts)}"
    if unsuccessful:
        rows = [[t["taskId"], t["state"], t["reason"] or "-", t["name"]] for t in unsuccessful]
        text += "\n\n" + admin.table(["TASK ID", "STATE", "RESOLVED AS", "NAME"], rows)
    status = 0
    if args.wait and counts.get("completed", 0) != total:
        status = 1
    return Result(data, text, status)


def progress(counts: Mapping[str, int]) -> str:
    """`[#####-----] 5/10 resolved  ...counts`: one line."""
    total = sum(counts.values())
    done = total - sum(counts.get(state, 0) for state in UNRESOLVED)
    filled = BAR_WIDTH * done // total if total else BAR_WIDTH
    bar = "#" * filled + "-" * (BAR_WIDTH - filled)
    return f"[{bar}] {done}/{total} resolved  {counts_text(counts)}"
