"""Command-line options that also read `TASKYARD_*` environment variables (flag wins)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from taskyard.cli import settings
from taskyard.config import ServerConfig
from taskyard.lockfile import Lock, acquire
from taskyard.model.errors import ConfigError

DATA_DIR_LOCK = "taskyard.lock"
KINDS: dict[Any, str] = {int: "an integer", float: "a number"}  # what a value must be, in words


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


def add_server_options(parser: argparse.ArgumentParser, command: str = "up") -> None:
    """The server's flags of `serve` or `up` (`up`'s worker's aside), as `cli/settings.py` declares them."""
    for option in settings.of(command):
        if not option.field.startswith("WorkerConfig."):
            settings.add_argument(parser, option, command, add)


def add_declared(parser: argparse.ArgumentParser, command: str) -> None:
    """Give `parser` every flag `cli/settings.py` declares for `command`, with its variable and default."""
    for option in settings.of(command):
        settings.add_argument(parser, option, command, add)


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
    return acquire(
        Path(values["data_dir"]) / DATA_DIR_LOCK,
        what="the data directory",
        flag="--data-dir",
        process=f"taskyard {command}",
        url=settings.root_url(values),
    )


def root_access_token(data_dir: str, environ: Mapping[str, str]) -> str:
    """TASKYARD_ROOT_ACCESS_TOKEN, or the token stored in the data directory (made on first use)."""
    return settings.stored_secret("TASKYARD_ROOT_ACCESS_TOKEN", Path(data_dir) / "root-access-token", environ)


def secret_key(data_dir: str, environ: Mapping[str, str]) -> str:
    """TASKYARD_SECRET_KEY, or the key stored in the data directory (made on first use).

    Client access tokens are derived from it: give every process of a deployment the same key.
    """
    return settings.stored_secret("TASKYARD_SECRET_KEY", Path(data_dir) / "secret-key", environ)


def server_config(values: Mapping[str, Any], environ: Mapping[str, str]) -> ServerConfig:
    """`serve`'s and `up`'s config from `resolve()`'s values (an option missing has its default):
    each value checked as `cli/settings.py` declares, a ConfigError naming the first bad one.
    A section of `ServerConfig` (`queue`: a `QueueConfig`) is built from its own options."""
    sections = settings.sections(ServerConfig)
    found = settings.checked(
        "serve", values, environ, "ServerConfig", *(c.__name__ for c in sections.values())
    )
    built = {name: kind(**settings.fields(found, kind.__name__)) for name, kind in sections.items()}
    return ServerConfig(**settings.fields(found, "ServerConfig"), **built)
