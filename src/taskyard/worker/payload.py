"""The generic-worker task payload that `taskyard worker` runs, checked before anything starts.

POSIX only (docs/protocol.md, The worker). `parse` turns a task's payload into a `Payload` with every
default filled in, or raises `MalformedPayload` carrying the exact lines the task log shows, so
the worker can report exception/malformed-payload without running a command.

`SCHEMA` is the single source of truth for the payload's shape: the log prints it on failure
and `jsonschema.errors` checks against it. Like generic-worker (which uses gojsonschema) we list
every schema error, worded the way gojsonschema words them, not just the first. The rules a
schema can't say (limits from the worker's config, dates relative to the task, names) follow.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from taskyard.model import artifacts, dates, errors, schema
from taskyard.model.types import LooseJSON, Millis
from taskyard.worker import archives, jsonschema, mounts

DEFAULT_MAX_RUN_TIME_LIMIT = 86400
DEFAULT_LIVE_LOG = "public/logs/live.log"
DEFAULT_BACKING_LOG = "public/logs/live_backing.log"
# Features generic-worker knows. A task may name them, but only these exist here: the logs, and
# the task's own taskcluster-proxy (worker/proxy.py).
KNOWN_FEATURES = (
    "backingLog", "chainOfTrust", "interactive", "liveLog", "loopbackAudio", "loopbackVideo",
    "resourceMonitor", "runAsAdministrator", "runTaskAsCurrentUser", "taskclusterProxy",
)  # fmt: skip
SUPPORTED_FEATURES = ("liveLog", "backingLog", "taskclusterProxy")
# Artifact expiry may miss the task's bounds by this much: upstream timestamps get rounded.
EXPIRY_TOLERANCE_MS = dates.SECOND
ERROR_PREFIX = "[taskcluster:error] "

_STRING = {"type": "string"}
_BOOLEAN = {"type": "boolean"}
_NOT_YET = "Not supported by taskyard's worker yet: must be empty if given."


SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "taskyard worker payload",
    "description": "The generic-worker payload (POSIX) that taskyard's worker accepts.",
    "type": "object",
    "required": ["command", "maxRunTime"],
    "additionalProperties": False,
    "properties": {
        "command": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "array", "minItems": 1, "items": _STRING},
            "description": "One argv list per command, run in order; the first failure stops the rest.",
        },
        "env": {
            "type": "object",
            "additionalProperties": _STRING,
            "description": "Environment variables for the commands; every value must be a string.",
        },
        "maxRunTime": {"type": "integer", "minimum": 1, "description": "Seconds before the commands abort."},
        "artifacts": {
            "type": "array",
            "uniqueItems": True,
            "items": {
                "type": "object",
                "required": ["type", "path"],
                "additionalProperties": False,
                "properties": {
                    "type": {"type": "string", "enum": ["file", "directory"]},
                    "path": {"type": "string", "description": "Relative to the task directory."},
                    "name": {"type": "string", "description": "Defaults to the path."},
                    "expires": {"type": "string", "format": "date-time"},
                    "contentType": {"type": "string", "description": "Guessed from the extension if unset."},
                    "contentEncoding": {"type": "string", "enum": ["identity", "gzip"]},
                    "optional": {"type": "boolean", "description": "A missing optional file fails nothing."},
                },
            },
        },
        "features": {
            "type": "object",
            "additionalProperties": False,
            "properties": {name: _BOOLEAN for name in KNOWN_FEATURES},
            "description": "Only liveLog and backingLog are enabled on taskyard's worker.",
        },
        "mounts": {
            "type": "array",
            "items": {"type": "object"},
            "description": (
                "Each one of: {cacheName, directory, content?, format?} a writable cache; "
                "{directory, content, format} a directory unpacked from an archive "
                f"({', '.join(archives.DIRECTORY_FORMATS)}); {{file, content, format?}} a file "
                f"({', '.join(archives.FILE_FORMATS)}). content: {{taskId, artifact, sha256?}}, "
                "{namespace, artifact}, {url, sha256?}, {raw} or {base64}. "
                "Paths are relative to the task directory."
            ),
        },
        "osGroups": {"type": "array", "items": _STRING, "description": _NOT_YET},
        "onExitStatus": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "retry": {"type": "array", "uniqueItems": True, "items": {"type": "integer", "minimum": 1}},
                "purgeCaches": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"type": "integer", "minimum": 0},
                },
            },
        },
        "logs": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "live": {"type": "string", "default": DEFAULT_LIVE_LOG},
                "backing": {"type": "string", "default": DEFAULT_BACKING_LOG},
            },
        },
        "supersederUrl": {"type": "string", "description": "Accepted for compatibility and ignored."},
    },
}


@dataclass(frozen=True)
class ArtifactSpec:
    """One `artifacts` entry with its defaults filled in."""

    type: str  # "file" | "directory"
    path: str  # relative to the task directory, as given
    name: str
    expires: Millis
    content_type: str | None  # None: guess per file (content.py)
    content_encoding: str | None  # None: decide per file (content.py)
    optional: bool


@dataclass(frozen=True)
class Payload:
    """A payload that passed every check, with its defaults filled in."""

    command: list[list[str]]
    env: dict[str, str]
    max_run_time: int  # seconds
    artifacts: list[ArtifactSpec]
    retry_exit_codes: frozenset[int]
    live_log: str
    backing_log: str
    live_log_enabled: bool
    mounts: list[mounts.Mount] = field(default_factory=list)
    purge_caches_exit_codes: frozenset[int] = frozenset()
    taskcluster_proxy: bool = False


class MalformedPayload(Exception):
    """The payload is unusable.

    `lines` are what the task log shows, worded as generic-worker's; `summary` is one line for the report.
    """

    def __init__(self, lines: list[str], summary: str) -> None:
        super().__init__(summary)
        self.lines = lines
        self.summary = summary


def parse(
    payload: object,
    *,
    task_id: str,
    deadline: Millis,
    expires: Millis,
    max_run_time_limit: int = DEFAULT_MAX_RUN_TIME_LIMIT,
    task_queue_id: str = "",
) -> Payload:
    """The task's payload as the worker runs it; raises MalformedPayload if it is unusable.

    `deadline` and `expires` are the task's; `task_queue_id` only names the pool in messages.
    """
    problems = list(jsonschema.errors(SCHEMA, payload, "(root)"))
    if problems:
        raise _schema_failure(problems, task_id)
    assert isinstance(payload, dict)  # the schema says so
    parsed = _build(payload, expires)
    mount_problems: list[str] = []
    if payload.get("mounts"):
        found, mount_problems = mounts.parse(payload["mounts"])
        parsed = replace(parsed, mounts=found)
    messages = [
        *_unsupported(payload),
        *mount_problems,
        *_features(payload, task_queue_id),
        *_max_run_time(parsed, max_run_time_limit),
        *_posix_strings(parsed),
        *_log_names(parsed),
        *_artifact_problems(parsed, deadline, expires),
    ]
    if messages:
        raise MalformedPayload([ERROR_PREFIX + message for message in messages], messages[0])
    return parsed


# Building -----------------------------------------------------------------------------------


def _build(body: LooseJSON, task_expires: Millis) -> Payload:
    features = body.get("features", {})
    logs = body.get("logs", {})
    return Payload(
        command=[list(argv) for argv in body["command"]],
        env=dict(body.get("env", {})),
        max_run_time=int(body["maxRunTime"]),
        artifacts=[_artifact(entry, task_expires) for entry in body.get("artifacts", [])],
        retry_exit_codes=frozenset(int(code) for code in body.get("onExitStatus", {}).get("retry", [])),
        live_log=logs.get("live", DEFAULT_LIVE_LOG),
        backing_log=logs.get("backing", DEFAULT_BACKING_LOG),
        # backingLog: false is accepted but changes nothing: the backing log is where the
        # task's output reaches the queue, so taskyard's worker always uploads it.
        live_log_enabled=features.get("liveLog", True),
        purge_caches_exit_codes=frozenset(
            int(code) for code in body.get("onExitStatus", {}).get("purgeCaches", [])
        ),
        taskcluster_proxy=features.get("taskclusterProxy", False),
    )


def _artifact(entry: LooseJSON, task_expires: Millis) -> ArtifactSpec:
    path = entry["path"]
    expires = entry.get("expires")
    return ArtifactSpec(
        type=entry["type"],
        path=path,
        # Payload paths may use either separator, as generic-worker allows; artifact names use "/".
        name=entry.get("name", path.replace("\\", "/")),
        expires=task_expires if expires is None else schema.to_millis(expires),
        content_type=entry.get("contentType"),
        content_encoding=entry.get("contentEncoding"),
        optional=entry.get("optional", False),
    )


# Rules beyond the schema --------------------------------------------------------------------


def _unsupported(body: LooseJSON) -> Iterator[str]:
    for key in ("osGroups",):
        if body.get(key):
            yield f"this task uses payload.{key}, which taskyard's worker doesn't support yet"


def _features(body: LooseJSON, task_queue_id: str) -> Iterator[str]:
    for name, wanted in body.get("features", {}).items():
        if wanted and name not in SUPPORTED_FEATURES:
            yield (
                f'this task is attempting to use feature "{name}", '
                f"but it's not enabled on this worker pool ({task_queue_id})"
            )


def _max_run_time(parsed: Payload, limit: int) -> Iterator[str]:
    if parsed.max_run_time > limit:
        yield f"task's maxRunTime of {parsed.max_run_time} exceeded allowed maximum of {limit}"


def _posix_strings(parsed: Payload) -> Iterator[str]:
    # execve takes NUL-terminated strings and NAME=value pairs: these could never reach a command.
    for index, argv in enumerate(parsed.command):
        if any("\0" in arg for arg in argv):
            yield f"malformed payload: command.{index} contains a NUL character"
    for name, value in parsed.env.items():
        if not name or "=" in name or "\0" in name + value:
            yield f"malformed payload: env {json.dumps(name)} needs a name without '=' and no NUL characters"


def _log_names(parsed: Payload) -> Iterator[str]:
    yield from _name_problem(parsed.backing_log, "logs.backing")
    if parsed.live_log_enabled:
        yield from _name_problem(parsed.live_log, "logs.live")
        if parsed.live_log == parsed.backing_log:
            yield "malformed payload: logs.live and logs.backing must name different artifacts"


def _artifact_problems(parsed: Payload, deadline: Millis, task_expires: Millis) -> Iterator[str]:
    reserved = _reserved_names(parsed)
    first_with_name: dict[str, int] = {}
    for index, spec in enumerate(parsed.artifacts):
        field = f"artifacts.{index}"
        yield from _path_problem(spec.path, f"{field}.path")
        # A directory's name is the prefix of its files' (`<name>/<path>`): one trailing `/` is harmless.
        named = spec.name.removesuffix("/") if spec.type == "directory" else spec.name
        yield from _name_problem(named, f"{field}.name")
        yield from _expiry_problem(spec, deadline, task_expires)
        if spec.name in reserved:
            yield f"malformed payload: {field} is named '{spec.name}', which the {reserved[spec.name]} uses"
        earlier = first_with_name.setdefault(spec.name, index)
        if earlier != index and _differ(parsed.artifacts[earlier], spec):
            yield (
                f"malformed payload: artifacts.{earlier} (path '{parsed.artifacts[earlier].path}') and "
                f"{field} (path '{spec.path}') are both named '{spec.name}'; artifact names must be unique"
            )


def _reserved_names(parsed: Payload) -> dict[str, str]:
    reserved = {parsed.backing_log: "backing log"}
    if parsed.live_log_enabled:
        reserved[parsed.live_log] = "live log"
    return reserved


def _differ(first: ArtifactSpec, second: ArtifactSpec) -> bool:
    # Listing one file twice under one name is harmless (the queue keeps the later expiry);
    # anything that changes the uploaded content would end in a 409 halfway through the uploads.
    def upload(spec: ArtifactSpec) -> tuple[str, str, str | None, str | None]:
        return spec.type, spec.path, spec.content_type, spec.content_encoding

    return upload(first) != upload(second)


def _path_problem(path: str, field: str) -> Iterator[str]:
    # The worker reads artifacts from inside the task directory and nowhere else.
    if path.startswith(("/", "\\")) or ".." in path.replace("\\", "/").split("/"):
        yield f"malformed payload: {field} must be a relative path inside the task directory, without '..'"


def _name_problem(name: str, field: str) -> Iterator[str]:
    try:
        artifacts.check_name(name, field)
    except errors.InputError as exc:
        yield f"malformed payload: {exc.message}"


def _expiry_problem(spec: ArtifactSpec, deadline: Millis, task_expires: Millis) -> Iterator[str]:
    shown = dates.to_iso(spec.expires)
    if spec.expires + EXPIRY_TOLERANCE_MS < deadline:
        yield (
            f"malformed payload: artifact '{spec.path}' expires before task deadline "
            f"({shown} is before {dates.to_iso(deadline)})"
        )
    elif spec.expires > task_expires + EXPIRY_TOLERANCE_MS:
        yield (
            f"malformed payload: artifact '{spec.path}' expires after task expiry "
            f"({shown} is after {dates.to_iso(task_expires)})"
        )


# Schema failures ----------------------------------------------------------------------------


def _schema_failure(problems: list[jsonschema.Problem], task_id: str) -> MalformedPayload:
    # What is wrong first, then the schema for reference: the errors are what a reader needs, and
    # 150 lines of schema above them would hide them.
    shown = json.dumps(SCHEMA, indent=2).splitlines()
    lines = [
        "TASK FAIL since the task payload is invalid. See errors:",
        *(f"- {field}: {problem}" for field, problem in problems),
        f"validation of payload failed for task {task_id}",
        "Task payload for this worker type must conform to the following jsonschema:",
        *shown,
    ]
    field, problem = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    summary = f"task payload is invalid: {field}: {problem}{more}"
    return MalformedPayload([ERROR_PREFIX + line for line in lines], summary)
