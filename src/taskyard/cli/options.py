"""Command-line options that also read `TASKYARD_*` environment variables (flag wins)."""

from __future__ import annotations

import argparse
import re
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from taskyard import events
from taskyard.config import QueueConfig, ServerConfig
from taskyard.events.profiles import parse_profiles
from taskyard.lockfile import Lock, acquire
from taskyard.model import served
from taskyard.model.errors import ConfigError

DATA_DIR_LOCK = "taskyard.lock"
KINDS: dict[Any, str] = {int: "an integer", float: "a number"}  # what a value must be, in words
MAX_PROCESSES = 64


def env_name(dest: str) -> str:
    return "TASKYARD_" + dest.upper()


def add(
    parser: argparse.ArgumentParser,
    flag: str,
    *,
    help: str,
    default: Any = None,
    type: Callable[[str], Any] = str,
) -> None:
    """An option whose default comes from its environment variable; `--help` names the variable."""
    dest = flag.lstrip("-").replace("-", "_")
    parser.add_argument(
        flag, dest=dest, default=None, type=type, help=f"{help} [env {env_name(dest)}; default {default!r}]"
    )
    parser.set_defaults(**{f"_default_{dest}": (default, type)})


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, Any]:
    """Flag, then environment variable, then default, for every option declared with `add`."""
    values = {}
    for key, (default, kind) in ((k[9:], v) for k, v in vars(args).items() if k.startswith("_default_")):
        value = getattr(args, key)
        if value is None and env_name(key) in environ:
            raw = environ[env_name(key)]
            try:
                value = kind(raw)
            except ValueError:
                raise ConfigError(
                    env_name(key), raw, f"must be {KINDS.get(kind, f'a {kind.__name__}')}"
                ) from None
        values[key] = default if value is None else value
    return values


def add_server_options(parser: argparse.ArgumentParser) -> None:
    add(parser, "--host", help="address to listen on", default="127.0.0.1")
    add(parser, "--port", help="port to listen on", default=8080, type=int)
    add(parser, "--public-url", help="root URL clients use, if not http://HOST:PORT", default="")
    add(
        parser,
        "--data-dir",
        help="directory for the SQLite database, the root token and the secret key",
        default="./data",
    )
    add(
        parser,
        "--db",
        help="sqlite:///relative/path, sqlite:////absolute/path or postgresql://...",
        default="",
    )
    add(
        parser,
        "--claim-timeout",
        help="seconds a claim lasts before it must be reclaimed",
        default=1200,
        type=int,
    )
    add(
        parser,
        "--deadline-delay",
        help="seconds past a deadline before the task is resolved",
        default=0.0,
        type=float,
    )
    add(
        parser,
        "--resolver-interval",
        help="seconds between resolver passes when idle",
        default=1.0,
        type=float,
    )
    add(parser, "--claim-work-timeout", help="seconds claimWork waits for a task", default=20.0, type=float)
    add(
        parser,
        "--events",
        help="event bus: memory:// (in process) or amqp://user:password@host:port/vhost (RabbitMQ)",
        default="memory://",
    )
    add(
        parser,
        "--scheduler-id",
        help="the task-graph scheduler's schedulerId: graph tasks carry it",
        default="task-graph-scheduler",
    )
    add(
        parser,
        "--event-profiles",
        help="exchange layouts to publish, comma-separated: tc (TaskCluster's), seed (v1/queue:*)",
        default="tc,seed",
    )
    add(
        parser,
        "--event-retention",
        help="seconds the event stream keeps published events for clients that reconnect",
        default=600.0,
        type=float,
    )
    add(
        parser,
        "--artifacts",
        help="blob store for artifacts: file:///dir or s3://bucket?endpoint=URL&region=R "
        "(default: DATA_DIR/artifacts)",
        default="",
    )
    add(
        parser,
        "--blob-origin",
        help="origin (scheme://host[:port]) on a host name of its own that serves artifacts and live "
        "logs, so that no uploaded page shares the UI's origin; the proxy in front sends it here "
        "(default: the root URL)",
        default="",
    )
    add(
        parser,
        "--max-artifact-bytes",
        help="largest artifact the local blob store accepts (larger uploads get 413)",
        default=1024**3,
        type=int,
    )
    add(
        parser,
        "--max-live-log-bytes",
        help="largest live log a run may append (more gets 413)",
        default=QueueConfig.max_live_log_bytes,
        type=int,
    )
    add_overload_options(parser)


def add_overload_options(parser: argparse.ArgumentParser) -> None:
    """How much one API process takes at once (docs/operations.md, "Overload")."""
    add(
        parser,
        "--max-in-flight",
        help="requests one process answers at once, long polls and ping aside; more get 503 (0: no bound)",
        default=ServerConfig.max_in_flight,
        type=int,
    )
    add(
        parser,
        "--max-long-polls",
        help="claimWork long polls one process holds at once; more are answered at once with no task "
        "(0: no bound)",
        default=ServerConfig.max_long_polls,
        type=int,
    )
    add(
        parser,
        "--max-running",
        help="API calls one process works on at once; the others let in wait their turn in arrival "
        "order (0: no bound)",
        default=ServerConfig.max_running,
        type=int,
    )
    add(
        parser,
        "--max-streams",
        help="event and live-log streams one process serves at once; more get 503 (0: no bound)",
        default=ServerConfig.max_streams,
        type=int,
    )
    add(
        parser,
        "--max-streams-per-client",
        help="event streams one authenticated client (clientId) holds at once on one process; more "
        "get 429 (0: no bound)",
        default=ServerConfig.max_streams_per_client,
        type=int,
    )
    add(
        parser,
        "--max-anonymous-streams-per-client",
        help="other streams (live logs, UI live updates, event streams without credentials) one client "
        "address holds at once on one process; more get 429 (0: no bound)",
        default=ServerConfig.max_anonymous_streams_per_client,
        type=int,
    )
    add(
        parser,
        "--max-connections-per-client",
        help="connections one client address holds at once on one process, trusted proxies "
        "(FORWARDED_ALLOW_IPS) aside; more are answered 503 and closed (0: no bound)",
        default=ServerConfig.max_connections_per_client,
        type=int,
    )
    add(
        parser,
        "--db-wait-timeout",
        help="seconds a request waits for a database connection before it is answered 503",
        default=ServerConfig.db_wait_timeout,
        type=float,
    )
    add(
        parser,
        "--head-timeout",
        help="seconds a client has to send a request's head (line and headers) before it is hung up on",
        default=ServerConfig.head_timeout,
        type=float,
    )
    add(
        parser,
        "--body-timeout",
        help="seconds a client has to send a request's body, plus one per 64 KiB of it, before it is "
        "answered 408 and hung up on",
        default=ServerConfig.body_timeout,
        type=float,
    )
    add(
        parser,
        "--keep-alive-timeout",
        help="seconds an idle kept-alive connection stays open",
        default=ServerConfig.keep_alive_timeout,
        type=int,
    )


def lock_data_dir(command: str, values: Mapping[str, Any]) -> Lock | None:
    """Make this process the data directory's only `up` or SQLite `serve`, for as long as it runs.

    lockfile.InUse, before the database or anything else in the directory is touched, if a live
    one holds it already. What one of these owns is not to be shared: `up` runs its worker in
    DATA_DIR/work, and a SQLite database is one process's, whose notifications (claimWork
    wake-ups, live-log followers, auth cache invalidations) never reach another process. Servers
    on PostgreSQL take no lock: several of them on one database is how taskyard scales out, and
    what they may share in a data directory (the root token and secret key, read once, and the
    local artifact store, written under unique names) needs no owner.
    """
    if command == "serve" and str(values["db"]).startswith(("postgresql://", "postgres://")):
        return None
    url = values["public_url"].rstrip("/") or f"http://{values['host']}:{values['port']}"
    return acquire(
        Path(values["data_dir"]) / DATA_DIR_LOCK,
        what="the data directory",
        flag="--data-dir",
        process=f"taskyard {command}",
        url=url,
    )


def root_access_token(data_dir: str, environ: Mapping[str, str]) -> str:
    """TASKYARD_ROOT_ACCESS_TOKEN, or the token stored in the data directory (made on first use)."""
    return _stored_secret("TASKYARD_ROOT_ACCESS_TOKEN", Path(data_dir) / "root-access-token", environ)


def secret_key(data_dir: str, environ: Mapping[str, str]) -> str:
    """TASKYARD_SECRET_KEY, or the key stored in the data directory (made on first use).

    Client access tokens are derived from it: give every process of a deployment the same key.
    """
    return _stored_secret("TASKYARD_SECRET_KEY", Path(data_dir) / "secret-key", environ)


def _stored_secret(variable: str, path: Path, environ: Mapping[str, str]) -> str:
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


def server_config(values: dict[str, Any], environ: Mapping[str, str]) -> ServerConfig:
    if values["claim_timeout"] < 1:
        raise ConfigError("claim-timeout", values["claim_timeout"], "must be at least 1 second")
    if not 0 < values["port"] < 65536:
        raise ConfigError("port", values["port"], "must be between 1 and 65535")
    if values["max_artifact_bytes"] < 1:
        raise ConfigError("max-artifact-bytes", values["max_artifact_bytes"], "must be at least 1")
    if values["max_live_log_bytes"] < 1:
        raise ConfigError("max-live-log-bytes", values["max_live_log_bytes"], "must be at least 1")
    if not 0 < values["event_retention"] <= 7 * 86400:
        raise ConfigError(
            "event-retention", values["event_retention"], "must be above 0 and at most 604800 (7 days)"
        )
    processes = values.get("processes", 1)
    if not 1 <= processes <= MAX_PROCESSES:
        raise ConfigError("processes", processes, f"must be between 1 and {MAX_PROCESSES}")
    if processes > 1 and not str(values["db"]).startswith(("postgresql://", "postgres://")):
        raise ConfigError(
            "processes",
            processes,
            "above 1 needs PostgreSQL (--db postgresql://...): a SQLite database is served by one process",
        )
    check_overload(values)
    if values["artifacts"] and not values["artifacts"].startswith(("file://", "s3://")):
        raise ConfigError("artifacts", values["artifacts"], "must start with file:// or s3://")
    queue = QueueConfig(
        claim_timeout=values["claim_timeout"],
        claim_work_timeout=values["claim_work_timeout"],
        deadline_delay=values["deadline_delay"],
        resolver_interval=values["resolver_interval"],
        max_live_log_bytes=values["max_live_log_bytes"],
    )
    return ServerConfig(
        host=values["host"],
        port=values["port"],
        public_url=values["public_url"].rstrip("/"),
        data_dir=values["data_dir"],
        db=values["db"],
        root_access_token=root_access_token(values["data_dir"], environ),
        secret_key=secret_key(values["data_dir"], environ),
        old_secret_key=environ.get("TASKYARD_OLD_SECRET_KEY", ""),
        queue=queue,
        artifacts=values["artifacts"],
        max_artifact_bytes=values["max_artifact_bytes"],
        blob_origin=blob_origin(values),
        events=events.check_url(values["events"]),
        event_profiles=parse_profiles(values["event_profiles"]),
        scheduler_id=scheduler_id(values["scheduler_id"]),
        event_retention=values["event_retention"],
        processes=processes,
        max_in_flight=values["max_in_flight"],
        max_long_polls=values["max_long_polls"],
        db_wait_timeout=values["db_wait_timeout"],
        head_timeout=values["head_timeout"],
        max_running=values["max_running"],
        max_streams=values["max_streams"],
        max_streams_per_client=values["max_streams_per_client"],
        max_anonymous_streams_per_client=values["max_anonymous_streams_per_client"],
        max_connections_per_client=values["max_connections_per_client"],
        body_timeout=values["body_timeout"],
        keep_alive_timeout=values["keep_alive_timeout"],
    )


PER_CLIENT = ("max_streams_per_client", "max_anonymous_streams_per_client", "max_connections_per_client")


def check_overload(values: Mapping[str, Any]) -> None:
    for name in ("max_in_flight", "max_long_polls", "max_running", "max_streams", *PER_CLIENT):
        if values[name] < 0:
            raise ConfigError(name.replace("_", "-"), values[name], "must be 0 (no bound) or more")
    for name in ("db_wait_timeout", "head_timeout", "body_timeout", "keep_alive_timeout"):
        if not 0 < values[name] <= 3600:
            raise ConfigError(
                name.replace("_", "-"), values[name], "must be above 0 and at most 3600 seconds"
            )


def blob_origin(values: Mapping[str, Any]) -> str:
    """`--blob-origin` as an origin on a host name other than the root URL's; '' if not given."""
    value = values.get("blob_origin", "")
    if not value:
        return ""
    root_url = values["public_url"].rstrip("/") or f"http://{values['host']}:{values['port']}"
    try:
        return served.check_origin(value, root_url)
    except ValueError as exc:
        raise ConfigError("blob-origin", value, str(exc)) from None


def scheduler_id(value: str) -> str:
    if not re.fullmatch(r"[a-zA-Z0-9_-]{1,38}", value):
        raise ConfigError("scheduler-id", value, "must be 1 to 38 letters, digits, `-` or `_`")
    return value
