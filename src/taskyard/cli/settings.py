"""Every option of taskyard's commands, declared once.

A record (`Option`) says all there is to say about one option: its flag and `TASKYARD_*`
variable, what its text parses as, its default, the rule a value must keep (a `ConfigError`
naming the option), where the value goes in `config.py`, which commands take it, and its
`--help` and documentation text. From this table `cli/options.py` builds each command's flags
and its config objects, and `python -m taskyard.cli.settings --write docs/operations.md` (`make
docs`) writes the table of docs/operations.md, which a test holds to it.

Adding an option is adding a record here (and, if code reads it from a config object, the
typed field in `config.py` it names, whose default is then the option's).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import secrets
import socket
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from taskyard import config, events
from taskyard.events.profiles import parse_profiles
from taskyard.model import identifiers, served
from taskyard.model.errors import ConfigError
from taskyard.notify import mail

# (value, every option's value by name) -> the value to use. A ValueError's words are the rule
# broken, reported as a ConfigError naming the option; a check may raise that ConfigError itself.
Check = Callable[[Any, Mapping[str, Any]], Any]
SERVERS = ("serve", "up")
DATABASE = ("migrate", "backup", "restore")
CLIENTS = "client commands"  # the commands that call a deployment's API (`client`, `task`, ...)
MAX_PROCESSES = 64
PROTOCOLS = ("claim-work", "poll")
CLAIM_MESSAGES = ("optional", "required")
# Config fields that no option sets: fixed today (docs/operations.md, "Fixed today"), or set by
# the command itself (the connection's fields of a worker).
NOT_OPTIONS = {
    "QueueConfig": {"max_task_deadline_days", "expiry_interval", "max_body_bytes"},
    "ServerConfig": set(),  # and its sections (`queue`), built from their own options
    "WorkerConfig": {"root_url", "client_id", "access_token", "certificate", "live_log_interval"},
}
BEGIN = "<!-- options:begin (generated from src/taskyard/cli/settings.py by `make docs`) -->"
END = "<!-- options:end -->"


class _FromField:
    def __repr__(self) -> str:
        return "the field's default"


FROM_FIELD: Any = _FromField()


@dataclasses.dataclass(frozen=True)
class Computed:
    """A default worked out when the command's parser is built: `compute(command)`."""

    compute: Callable[[str], Any]


@dataclasses.dataclass(frozen=True)
class Option:
    """One option of one or more commands: every place it shows is made from this record."""

    flag: str  # "--port"; "" for a setting read from its variable alone
    help: str  # what `--help` says of it, and the docs table unless `doc` says more
    commands: tuple[str, ...]  # the commands that take it
    field: str = ""  # where its value goes: "ServerConfig.port"; "" for none
    default: Any = FROM_FIELD  # a value, a `Computed`, or (FROM_FIELD) the field's default
    type: Callable[[str], Any] = str  # what the flag's or variable's text parses as
    check: Check | None = None
    doc: str = ""  # the docs table's meaning (Markdown), if it says more than `help`
    shown: str = ""  # the docs table's default, if the value alone says too little
    named: str = ""  # how a ConfigError names it: the flag without its dashes, unless given
    env: str = ""  # its variable: TASKYARD_<FLAG>, unless given
    # For a setting read from its variable alone: (every option's value, environ) -> its value.
    read: Callable[[Mapping[str, Any], Mapping[str, str]], Any] | None = None
    parsed: bool = True  # False: another module adds its flag (the connection's, `cli/admin.py`)

    @property
    def dest(self) -> str:
        """Its name in `options.resolve()`'s values: the flag's, else the variable's, in snake case."""
        if self.flag:
            return self.flag.lstrip("-").replace("-", "_")
        return self.env.removeprefix("TASKYARD_").lower()

    @property
    def variable(self) -> str:
        return self.env or "TASKYARD_" + self.dest.upper()

    @property
    def key(self) -> str:
        return self.named or self.flag.lstrip("-") or self.variable

    def default_for(self, command: str) -> Any:
        if isinstance(self.default, Computed):
            return self.default.compute(command)
        if self.default is FROM_FIELD:
            return field_default(self.field)
        return self.default

    def value(self, value: Any, values: Mapping[str, Any]) -> Any:
        """`value` as the config holds it; ConfigError naming this option if it breaks the rule."""
        if self.check is None:
            return value
        try:
            return self.check(value, values)
        except ValueError as exc:
            raise ConfigError(self.key, value, str(exc)) from None


def field_default(path: str) -> Any:
    """The default of config field `path` ("ServerConfig.port")."""
    section, name = path.split(".")
    for each in dataclasses.fields(getattr(config, section)):
        if each.name == name:
            if each.default_factory is not dataclasses.MISSING:
                return each.default_factory()
            if each.default is dataclasses.MISSING:
                raise LookupError(f"{path} has no default: give the option one")
            return each.default
    raise LookupError(f"config.py has no field {path}")


# The rules, as checks.


def at_least(low: int, rule: str) -> Check:
    def check(value: Any, values: Mapping[str, Any]) -> Any:
        if value < low:
            raise ValueError(rule)
        return value

    return check


def between(low: float, high: float, rule: str) -> Check:
    """low <= value <= high."""

    def check(value: Any, values: Mapping[str, Any]) -> Any:
        if not low <= value <= high:
            raise ValueError(rule)
        return value

    return check


def above_zero(high: float, rule: str) -> Check:
    """0 < value <= high."""

    def check(value: Any, values: Mapping[str, Any]) -> Any:
        if not 0 < value <= high:
            raise ValueError(rule)
        return value

    return check


def matching(pattern: str, rule: str) -> Check:
    compiled = re.compile(pattern)

    def check(value: Any, values: Mapping[str, Any]) -> Any:
        if not compiled.fullmatch(value):
            raise ValueError(rule)
        return value

    return check


NO_BOUND = at_least(0, "must be 0 (no bound) or more")
SECONDS = above_zero(3600, "must be above 0 and at most 3600 seconds")


def root_url(values: Mapping[str, Any]) -> str:
    return str(values["public_url"]).rstrip("/") or f"http://{values['host']}:{values['port']}"


def _one_of(value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"must be one of: {', '.join(choices)}")
    return value


def _processes(value: int, values: Mapping[str, Any]) -> int:
    if not 1 <= value <= MAX_PROCESSES:
        raise ValueError(f"must be between 1 and {MAX_PROCESSES}")
    if value > 1 and not str(values["db"]).startswith(("postgresql://", "postgres://")):
        raise ValueError(
            "above 1 needs PostgreSQL (--db postgresql://...): a SQLite database is served by one process"
        )
    return value


def _artifacts(value: str, values: Mapping[str, Any]) -> str:
    if value and not value.startswith(("file://", "s3://")):
        raise ValueError("must start with file:// or s3://")
    return value


def _blob_origin(value: str, values: Mapping[str, Any]) -> str:
    """An origin on a host name other than the root URL's; '' if not given."""
    return served.check_origin(value, root_url(values)) if value else ""


def _capacity(value: int, values: Mapping[str, Any]) -> int:
    if not 0 <= value <= 255:
        raise ConfigError("--capacity", str(value), "must be between 0 and 255")
    return value


def worker_events(url: str, values: Mapping[str, Any] | None = None) -> str:
    """The broker a worker listens to: an amqp(s):// URL, or "" for none (empty or memory://: an
    in-process bus is the server's own, out of a worker's reach). ConfigError for anything else."""
    if url in ("", "memory://"):
        return ""
    from taskyard.events.amqp import check_url

    return check_url(url, "--events")


def _stored_secret(variable: str, name: str) -> Callable[[Mapping[str, Any], Mapping[str, str]], str]:
    def read(values: Mapping[str, Any], environ: Mapping[str, str]) -> str:
        return stored_secret(variable, Path(values["data_dir"]) / name, environ)

    return read


def stored_secret(variable: str, path: Path, environ: Mapping[str, str]) -> str:
    """The variable's value, else the one kept in `path`, else a new one kept there (mode 0600)."""
    value = environ.get(variable, "")
    if value:
        return value
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(33)
    path.touch(mode=0o600)
    path.write_text(value + "\n")
    return value


def default_worker_id() -> str:
    """The host's name, made a valid workerId."""
    name = re.sub(r"[^a-zA-Z0-9-_]", "-", socket.gethostname().split(".")[0])[:38]
    return name or "worker"


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _worker(flag: str, help: str, commands: tuple[str, ...] = ("worker",), **more: Any) -> Option:
    """A worker's option: its ConfigError names it by its flag."""
    return Option(
        flag, help, commands, field=f"WorkerConfig.{flag[2:].replace('-', '_')}", named=flag, **more
    )


OPTIONS: tuple[Option, ...] = (
    # `serve` and `up`, in `--help`'s order.
    Option("--host", "address to listen on", SERVERS, "ServerConfig.host"),
    Option(
        "--port",
        "port to listen on",
        SERVERS,
        "ServerConfig.port",
        type=int,
        check=between(1, 65535, "must be between 1 and 65535"),
        doc="port to listen on (1-65535)",
    ),
    Option(
        "--public-url",
        "root URL clients use, if not http://HOST:PORT",
        SERVERS,
        "ServerConfig.public_url",
        check=lambda value, values: value.rstrip("/"),
        shown="`http://HOST:PORT`",
        doc="the root URL clients use; it goes into the banner, blob URLs, live-log URLs and "
        "pollTaskUrls' queue URLs. A trailing `/` is dropped",
    ),
    Option(
        "--data-dir",
        "directory for the SQLite database, the root token and the secret key",
        SERVERS,
        "ServerConfig.data_dir",
        doc="where the SQLite database, the generated root token and secret key, the local artifacts "
        "and `up`'s work directory go by default; owned by one `up` or SQLite `serve` at a time",
    ),
    Option(
        "--db",
        "sqlite:///relative/path, sqlite:////absolute/path or postgresql://...",
        SERVERS,
        "ServerConfig.db",
        shown="`sqlite:///<data-dir>/taskyard.sqlite3`",
        doc="`sqlite:///relative/path`, `sqlite:////absolute/path`, or "
        "`postgresql://user[:password]@host[:port]/database` (`postgres://` too)",
    ),
    Option(
        "--claim-timeout",
        "seconds a claim lasts before it must be reclaimed",
        SERVERS,
        "QueueConfig.claim_timeout",
        type=int,
        check=at_least(1, "must be at least 1 second"),
        doc="seconds a claim lasts before it must be reclaimed (whole seconds, at least 1)",
    ),
    Option(
        "--claim-messages",
        "whether claimTask must quote its poll message: optional, or required",
        SERVERS,
        "QueueConfig.claim_messages",
        check=lambda value, values: _one_of(value, CLAIM_MESSAGES),
        doc="whether claimTask must quote the poll message it claims from (`messageId`, `receipt` and "
        "`signature`; [poll.md](poll.md#claimtask-with-a-message)): `optional`, or `required` (a claimTask "
        "without all three is 400, as the first poll protocol meant to have it once every worker quotes "
        "its messages; claimWork, which has no message, is not concerned)",
    ),
    Option(
        "--deadline-delay",
        "seconds past a deadline before the task is resolved",
        SERVERS,
        "QueueConfig.deadline_delay",
        type=float,
        doc="seconds past a task's deadline before it is resolved `deadline-exceeded`",
    ),
    Option(
        "--resolver-interval",
        "seconds between resolver passes when idle",
        SERVERS,
        "QueueConfig.resolver_interval",
        type=float,
        doc="seconds between resolver passes when they find nothing to do",
    ),
    Option(
        "--claim-work-timeout",
        "seconds claimWork waits for a task",
        SERVERS,
        "QueueConfig.claim_work_timeout",
        type=float,
    ),
    Option(
        "--events",
        "event bus: memory:// (in process) or amqp://user:password@host:port/vhost (RabbitMQ)",
        SERVERS,
        "ServerConfig.events",
        check=lambda value, values: events.check_url(value),
        doc="the event bus: `memory://` (in the process) or `amqp://user:password@host:port/vhost` "
        "(RabbitMQ, `amqps://` for TLS; publisher confirms; the server keeps serving while it is down, "
        "with one log line per outage)",
    ),
    Option(
        "--smtp-url",
        "SMTP server for email notifications: smtp://user:password@host:port (none: email is refused)",
        SERVERS,
        "ServerConfig.smtp_url",
        check=lambda value, values: mail.check_url(value),
        doc="the SMTP server the notify service sends email through: `smtp://user:password@host:port` "
        "(STARTTLS when the server offers it), `smtps://` for TLS from the start, `?from=address` for "
        "the sender; empty: no email is sent, and the `email` API answers 400 saying so",
        shown="none",
    ),
    Option(
        "--scheduler-id",
        "the task-graph scheduler's schedulerId: graph tasks carry it",
        SERVERS,
        "ServerConfig.scheduler_id",
        check=matching(r"[a-zA-Z0-9_-]{1,38}", "must be 1 to 38 letters, digits, `-` or `_`"),
        doc="the task-graph scheduler's schedulerId: every task of its graphs carries it "
        "([scheduler.md](scheduler.md)); 1 to 38 letters, digits, `-` or `_`",
    ),
    Option(
        "--event-profiles",
        "exchange layouts to publish, comma-separated: tc (TaskCluster's), seed (v1/queue:*)",
        SERVERS,
        "ServerConfig.event_profiles",
        default="tc,seed",
        check=lambda value, values: parse_profiles(value),
        doc="which exchange layouts to publish, comma-separated: `tc` (`exchange/taskcluster-queue/v1/*` "
        "and `exchange/taskcluster-scheduler/v1/*`), `seed` (`v1/queue:*` and `v1/scheduler:*`), or both",
    ),
    Option(
        "--event-retention",
        "seconds the event stream keeps published events for clients that reconnect",
        SERVERS,
        "ServerConfig.event_retention",
        type=float,
        check=above_zero(7 * 86400, "must be above 0 and at most 604800 (7 days)"),
        doc="seconds the database keeps published events (their `outbox` rows and `event_log` entries) "
        "for HTTP event-stream clients that reconnect, at most 7 days; at about 1,000 events/s, 10 "
        "minutes is some 600,000 events",
    ),
    Option(
        "--artifacts",
        "blob store for artifacts: file:///dir or s3://bucket?endpoint=URL&region=R "
        "(default: DATA_DIR/artifacts)",
        SERVERS,
        "ServerConfig.artifacts",
        check=_artifacts,
        shown="`file://<data-dir, absolute>/artifacts`",
        doc="where artifacts' bytes go: `file:///dir` or `s3://bucket?endpoint=URL&region=R` (region "
        "defaults to `us-east-1`; without `endpoint`, AWS; boto3 reads the S3 credentials from its "
        "usual variables)",
    ),
    Option(
        "--blob-origin",
        "origin (scheme://host[:port]) on a host name of its own that serves artifacts and live logs, so "
        "that no uploaded page shares the UI's origin; the proxy in front sends it here "
        "(default: the root URL)",
        SERVERS,
        "ServerConfig.blob_origin",
        check=_blob_origin,
        shown="the root URL",
        doc="the origin (`scheme://host[:port]`) that artifacts' and live logs' URLs are built on, on a "
        "host name other than the root URL's; that host then serves nothing else. See "
        "[The artifact origin](#the-artifact-origin)",
    ),
    Option(
        "--max-artifact-bytes",
        "largest artifact the local blob store accepts (larger uploads get 413)",
        SERVERS,
        "ServerConfig.max_artifact_bytes",
        type=int,
        check=at_least(1, "must be at least 1"),
        shown="`1073741824` (1 GiB)",
        doc="largest artifact: createArtifact refuses a larger declared `contentLength`, and the local "
        "store stops a larger upload (413 either way); an S3 PUT is bounded only by S3",
    ),
    Option(
        "--max-live-log-bytes",
        "largest live log a run may append (more gets 413)",
        SERVERS,
        "QueueConfig.max_live_log_bytes",
        type=int,
        check=at_least(1, "must be at least 1"),
        shown="`67108864` (64 MiB)",
        doc="largest live log a run may stream (413 past it); the uploaded log has no such limit",
    ),
    # Overload, per process (docs/operations.md, "Overload").
    Option(
        "--max-in-flight",
        "requests one process answers at once, long polls and ping aside; more get 503 (0: no bound)",
        SERVERS,
        "ServerConfig.max_in_flight",
        type=int,
        check=NO_BOUND,
        doc="requests one process answers at once, claimWork, streams and ping aside; more are "
        "answered 503 `ServiceUnavailable` with `Retry-After: 1` at once (0: no bound). "
        "See [Overload](#overload)",
    ),
    Option(
        "--max-long-polls",
        "claimWork long polls one process holds at once; more are answered at once with no task "
        "(0: no bound)",
        SERVERS,
        "ServerConfig.max_long_polls",
        type=int,
        check=NO_BOUND,
        doc="claimWork long polls one process holds at once; more are answered at once "
        '`{"tasks": []}` (0: no bound)',
    ),
    Option(
        "--max-running",
        "API calls one process works on at once; the others let in wait their turn in arrival order "
        "(0: no bound)",
        SERVERS,
        "ServerConfig.max_running",
        type=int,
        check=NO_BOUND,
        doc="API calls one process works on at once (and as many claimWork long polls, until they wait "
        "for work); the others let in wait their turn, in the order they came, and one waiting over "
        "`--db-wait-timeout` gets 503 with `Retry-After: 1` (0: no bound). See [Overload](#overload)",
    ),
    Option(
        "--max-streams",
        "event and live-log streams one process serves at once; more get 503 (0: no bound)",
        SERVERS,
        "ServerConfig.max_streams",
        type=int,
        check=NO_BOUND,
        doc="event streams, live logs and UI live updates one process serves at once; more are "
        "answered 503 with `Retry-After: 5` (0: no bound)",
    ),
    Option(
        "--max-streams-per-client",
        "event streams one authenticated client (clientId) holds at once on one process; more get 429 "
        "(0: no bound)",
        SERVERS,
        "ServerConfig.max_streams_per_client",
        type=int,
        check=NO_BOUND,
        doc="event streams one authenticated client (clientId) holds at once on one process; more are "
        "answered 429 `TooManyRequests` with `Retry-After: 5` (0: no bound). See [Overload](#overload)",
    ),
    Option(
        "--max-anonymous-streams-per-client",
        "other streams (live logs, UI live updates, event streams without credentials) one client "
        "address holds at once on one process; more get 429 (0: no bound)",
        SERVERS,
        "ServerConfig.max_anonymous_streams_per_client",
        type=int,
        check=NO_BOUND,
        doc="the other streams (live logs, UI live updates, event streams without credentials) one "
        "client address holds at once on one process; more are answered 429 (0: no bound)",
    ),
    Option(
        "--max-connections-per-client",
        "connections one client address holds at once on one process, trusted proxies "
        "(FORWARDED_ALLOW_IPS) aside; more are answered 503 and closed (0: no bound)",
        SERVERS,
        "ServerConfig.max_connections_per_client",
        type=int,
        check=NO_BOUND,
        doc="connections one client address holds at once on one process, the trusted proxies' "
        "(`FORWARDED_ALLOW_IPS`, by default 127.0.0.1 and ::1) aside; one more is answered 503 with "
        "`Retry-After: 5` at once and closed (0: no bound)",
    ),
    Option(
        "--db-wait-timeout",
        "seconds a request waits for a database connection before it is answered 503",
        SERVERS,
        "ServerConfig.db_wait_timeout",
        type=float,
        check=SECONDS,
        doc="seconds a request waits for one of the process's 20 PostgreSQL connections (SQLite: for "
        "the writer) before it is answered 503 with `Retry-After: 1`; claimWork and background work "
        "wait as long as it takes (above 0, at most 3600)",
    ),
    Option(
        "--head-timeout",
        "seconds a client has to send a request's head (line and headers) before it is hung up on",
        SERVERS,
        "ServerConfig.head_timeout",
        type=float,
        check=SECONDS,
        doc="seconds a client has, from opening a connection or from the first byte of a request, to "
        "send the request line and headers; then the server hangs up (above 0, at most 3600)",
    ),
    Option(
        "--body-timeout",
        "seconds a client has to send a request's body, plus one per 64 KiB of it, before it is "
        "answered 408 and hung up on",
        SERVERS,
        "ServerConfig.body_timeout",
        type=float,
        check=SECONDS,
        doc="seconds a client has, once a request's headers are in, to send its body, plus one second "
        "per 64 KiB of it (an upload at 64 KiB/s or faster is never cut short); then it is answered "
        "408 `RequestTimeout` and the server hangs up (above 0, at most 3600)",
    ),
    Option(
        "--keep-alive-timeout",
        "seconds an idle kept-alive connection stays open",
        SERVERS,
        "ServerConfig.keep_alive_timeout",
        type=int,
        check=SECONDS,
        doc="seconds an idle kept-alive connection stays open (whole seconds, above 0, at most 3600)",
    ),
    Option(
        "--processes",
        "API processes serving one port (above 1 needs PostgreSQL)",
        ("serve",),
        "ServerConfig.processes",
        type=int,
        check=_processes,
        doc=f"API processes sharing the port (1-{MAX_PROCESSES}; above 1 needs PostgreSQL)",
    ),
    # `up`'s worker, and `taskyard worker`.
    _worker(
        "--task-queue-id",
        "the task queue to claim from (provisionerId/workerType)",
        ("up", "worker"),
        check=matching(identifiers.TASK_QUEUE_ID, "must look like provisioner/worker-type"),
        doc="the task queue the worker claims from (`provisionerId/workerType`)",
    ),
    _worker(
        "--capacity",
        "how many tasks run at once",
        ("up", "worker"),
        type=int,
        check=_capacity,
        default=Computed(lambda command: cores() if command == "up" else 1),
        shown="`up`: the number of CPU cores; `worker`: `1`",
        doc="tasks the worker runs at once, 0-255; `up --capacity 0` runs no worker, a `worker` runs "
        "at least 1",
    ),
    _worker(
        "--protocol",
        "how to find work: claim-work (claimWork's long poll) or poll (pollTaskUrls and the "
        "Azure-queue messages, claimed with claimTask)",
        check=lambda value, values: (
            value if value in PROTOCOLS else _refuse(f"must be one of: {', '.join(PROTOCOLS)}")
        ),
        doc="how it finds work: `claim-work` (claimWork's long poll) or `poll` (pollTaskUrls and the "
        "queue's Azure-style messages, claimed with claimTask; [poll.md](poll.md))",
    ),
    _worker(
        "--worker-group",
        "the worker group this worker reports",
        check=matching(identifiers.IDENT, "must be 1-38 of a-z A-Z 0-9 - _"),
        doc="the worker group it reports (1-38 of `a-z A-Z 0-9 - _`)",
    ),
    _worker(
        "--worker-id",
        "this worker's id (default: the host name)",
        check=matching(identifiers.IDENT, "must be 1-38 of a-z A-Z 0-9 - _"),
        default=Computed(lambda command: default_worker_id()),
        shown="the host name, made valid",
        doc="its worker id (1-38 of `a-z A-Z 0-9 - _`)",
    ),
    _worker(
        "--work-dir",
        "where task directories and logs live while tasks run",
        doc="task directories, scratch space and logs while tasks run; one worker's at a time",
    ),
    _worker(
        "--max-run-time-limit",
        "the largest maxRunTime a payload may ask, seconds",
        type=int,
        doc="the largest `maxRunTime` a payload may ask, in seconds",
    ),
    _worker(
        "--idle-timeout",
        "exit (status 0) once this many seconds passed without a task; 0: never",
        type=float,
        check=at_least(0, "must be 0 (never) or more seconds"),
        doc="seconds without a task after which the worker exits with status 0, between two claims "
        "(so no claim is lost); `0`: never. A local pool gives its workers beyond `minCapacity` its "
        "`idleTimeoutSeconds`",
    ),
    _worker(
        "--register",
        "the root URL of the worker-manager to register with (registerWorker) for this worker's "
        "credentials, instead of being given a client",
        shown="none: the credentials given (flags, `TASKCLUSTER_*`, a context)",
        doc="a root URL: register there (`registerWorker`, with `--secret-file`'s static secret) for "
        "credentials limited to this worker's pool and id, and register again before they expire; "
        "no client needs to be given (docs/worker-pools.md)",
    ),
    _worker(
        "--secret-file",
        "the file holding the worker's static secret, for --register",
        shown="none",
        doc="the file that holds the static secret `--register` proves the worker with (as given to "
        "`createWorker`); read once at start",
    ),
    _worker(
        "--provider-id",
        "the provider the worker registers under, with --register",
        check=matching(identifiers.IDENT, "must be 1-38 of a-z A-Z 0-9 - _"),
        doc="the providerId `--register` names (`static` for machines an admin created with `createWorker`)",
    ),
    _worker(
        "--status-interval",
        "seconds between checks that running tasks were not cancelled "
        "(every 30 s, as a safety net, while --events tells of cancellations)",
        type=float,
        doc="seconds between checks that running tasks were not cancelled (every 30 s while `--events` "
        "is connected)",
    ),
    _worker(
        "--events",
        "amqp://user:password@host:port/vhost: hear of this worker's cancelled tasks from the "
        "deployment's RabbitMQ and stop them at once (empty or memory://: status checks only)",
        check=worker_events,
        shown="none",
        doc="`amqp://user:password@host:port/vhost`: hear of cancelled tasks from the deployment's "
        "RabbitMQ and stop them at once (empty or `memory://`: status checks only); while it is "
        "unreachable the worker logs one line and checks every `--status-interval`",
    ),
    # `events tail`: where it reads from.
    Option(
        "--events",
        "the deployment's RabbitMQ, amqp://user:password@host:port/vhost, to read from it rather than "
        "from the server",
        ("events tail",),
        default="",
        shown="none: the server's event stream",
        doc="the deployment's RabbitMQ, `amqp://user:password@host:port/vhost`, to read events from it "
        "rather than from the server's event stream",
    ),
    # `migrate`, `backup` and `restore`: the database, as `serve` finds it.
    Option(
        "--data-dir",
        "the data directory, as given to taskyard serve",
        DATABASE,
        default="./data",
        doc="the data directory, as given to `serve`",
    ),
    Option(
        "--db",
        "the database URL, if not DATA_DIR/taskyard.sqlite3",
        DATABASE,
        default="",
        shown="`sqlite:///<data-dir>/taskyard.sqlite3`",
        doc="the database, as given to `serve`",
    ),
    # The connection of a worker and of the commands that call the API (added by `cli/admin.py`,
    # which falls back on a context's, `cli/contexts.py`).
    Option(
        "--root-url",
        "the deployment's root URL, as `taskyard up` prints it",
        ("worker", CLIENTS),
        env="TASKCLUSTER_ROOT_URL",
        default="",
        parsed=False,
        shown="the context's",
        doc="the deployment's root URL, as `taskyard up` prints it (http or https); a worker needs one",
    ),
    Option(
        "--client-id",
        "the client to act as",
        ("worker", CLIENTS),
        env="TASKCLUSTER_CLIENT_ID",
        default="",
        parsed=False,
        shown="the context's",
        doc="the client to act as; a worker needs one",
    ),
    Option(
        "--access-token",
        "that client's access token (prefer the variable: other users can see flags in `ps`)",
        ("worker", CLIENTS),
        env="TASKCLUSTER_ACCESS_TOKEN",
        default="",
        parsed=False,
        shown="the context's",
    ),
    Option(
        "--certificate",
        "the certificate of temporary credentials (JSON)",
        ("worker", CLIENTS),
        env="TASKCLUSTER_CERTIFICATE",
        default="",
        parsed=False,
        shown="none",
    ),
    Option(
        "--context",
        "a context of the config file (`taskyard config`)",
        ("worker", CLIENTS),
        env="TASKYARD_CONTEXT",
        default="",
        parsed=False,
        shown="the file's `current-context`",
        doc="the context of the config file (`taskyard config`) the connection falls back on",
    ),
    Option(
        "",
        "the config file of contexts",
        ("worker", CLIENTS),
        env="TASKYARD_CONFIG",
        default="",
        shown="`$XDG_CONFIG_HOME/taskyard/config.yaml`, else `~/.config/taskyard/config.yaml`",
        doc="the config file of contexts, written with mode 0600 (it holds access tokens)",
    ),
    # Read from their variables alone.
    Option(
        "",
        "the root client's access token",
        SERVERS,
        "ServerConfig.root_access_token",
        env="TASKYARD_ROOT_ACCESS_TOKEN",
        default="",
        read=_stored_secret("TASKYARD_ROOT_ACCESS_TOKEN", "root-access-token"),
        shown="read from, or generated into, `<data-dir>/root-access-token`",
        doc="the root client's access token ([Secrets](#secrets))",
    ),
    Option(
        "",
        "derives the clients' access tokens",
        SERVERS,
        "ServerConfig.secret_key",
        env="TASKYARD_SECRET_KEY",
        default="",
        read=_stored_secret("TASKYARD_SECRET_KEY", "secret-key"),
        shown="read from, or generated into, `<data-dir>/secret-key`",
        doc="derives stored clients' tokens, the keys of signed URLs and the key that encrypts stored "
        "secrets; every process of a deployment needs the same key (a server refuses to start with a "
        "different one)",
    ),
    Option(
        "",
        "the secret key before a change",
        SERVERS,
        "ServerConfig.old_secret_key",
        env="TASKYARD_OLD_SECRET_KEY",
        default="",
        read=lambda values, environ: environ.get("TASKYARD_OLD_SECRET_KEY", ""),
        shown="unset",
        doc="the secret key before a change: stored secrets it encrypted are still read, and "
        "re-encrypted under the new key ([Secrets at rest](#secrets-at-rest))",
    ),
    Option(
        "",
        "the proxies trusted to say who their client is",
        SERVERS,
        env="FORWARDED_ALLOW_IPS",
        default="127.0.0.1,::1",
        doc="the proxies trusted to say who their client is (`X-Forwarded-For`, `X-Forwarded-Proto`), "
        "as uvicorn reads it: comma-separated addresses or networks, `*` for every peer; their "
        "connections are not capped by `--max-connections-per-client`",
    ),
    Option(
        "",
        "log level",
        (*SERVERS, "worker"),
        env="TASKYARD_LOG_LEVEL",
        default="INFO",
        doc="a Python logging level name: `DEBUG`, `INFO`, `WARNING`, `ERROR`, `CRITICAL` (any case)",
    ),
)


def _refuse(rule: str) -> Any:
    raise ValueError(rule)


def of(command: str) -> Iterator[Option]:
    """The options `command` takes, in their order."""
    return (option for option in OPTIONS if command in option.commands)


def add_argument(
    parser: argparse.ArgumentParser, option: Option, command: str, add: Callable[..., None]
) -> None:
    """Give `parser` the flag of `option`, as `command` takes it, through `add` (`options.add`)."""
    if option.flag and option.parsed:
        add(parser, option.flag, help=option.help, default=option.default_for(command), type=option.type)


def checked(
    command: str, values: Mapping[str, Any], environ: Mapping[str, str], *sections: str
) -> dict[str, Any]:
    """The config fields `command`'s options set, of the config classes `sections`, by field path
    ("ServerConfig.port"), each value checked: a ConfigError names the first option, in the
    table's order, whose value breaks its rule. An option missing from `values` has its default."""
    found = {}
    for option in of(command):
        if option.field.split(".")[0] not in sections:
            continue
        if option.read is not None:
            found[option.field] = option.read(values, environ)
        else:
            found[option.field] = option.value(values.get(option.dest, option.default_for(command)), values)
    return found


def sections(kind: type[Any]) -> dict[str, type[Any]]:
    """The fields of config class `kind` that are config classes of their own, by name."""
    found: dict[str, type[Any]] = {}
    for each in dataclasses.fields(kind):
        factory: object = each.default_factory
        if isinstance(factory, type) and dataclasses.is_dataclass(factory):
            found[each.name] = factory
    return found


def fields(found: Mapping[str, Any], section: str) -> dict[str, Any]:
    """The values of `checked()` that go to config class `section`, by field name."""
    return {path.split(".")[1]: value for path, value in found.items() if path.split(".")[0] == section}


# The documentation.


def _shown(option: Option) -> str:
    if option.shown:
        return option.shown
    default = option.default_for(option.commands[0])
    if isinstance(default, float) and default.is_integer():
        default = int(default)
    return f"`{default}`" if default != "" else "none"


def markdown() -> str:
    """The docs' table of every option, one row per record."""
    rows = [
        "| flag | variable | commands | default | meaning |",
        "|---|---|---|---|---|",
    ]
    for option in OPTIONS:
        flag = f"`{option.flag}`" if option.flag else ""
        commands = ", ".join(f"`{c}`" if c != CLIENTS else c for c in option.commands)
        meaning = (option.doc or option.help).replace("|", "\\|")
        rows.append(f"| {flag} | `{option.variable}` | {commands} | {_shown(option)} | {meaning} |")
    return "\n".join(rows) + "\n"


def replace_table(text: str, table: str) -> str:
    """`text` with what lies between its BEGIN and END markers replaced by `table`."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return f"{text[:start]}\n{table}{text[end:]}"


def table_in(text: str) -> str:
    """What lies between the markers of `text` ("" without them)."""
    if BEGIN not in text or END not in text:
        return ""
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)].lstrip("\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Print, or write into a Markdown file, the table of options."
    )
    parser.add_argument("--write", metavar="FILE", help="replace the table between the markers of FILE")
    args = parser.parse_args(argv)
    if args.write is None:
        sys.stdout.write(markdown())
        return 0
    path = Path(args.write)
    path.write_text(replace_table(path.read_text(), markdown()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
