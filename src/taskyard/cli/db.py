"""`taskyard migrate|backup|restore`: look after the database from outside the server.

- `migrate` applies the migrations a database lacks, as a starting server would, and says
  which; it refuses a database made by a newer taskyard.
- `backup FILE` copies a SQLite database with SQLite's online backup, consistent while a server
  keeps writing, and without the data directory's lock (the running server holds it). For
  PostgreSQL it prints the `pg_dump` command to use instead.
- `restore FILE` puts a SQLite backup in place of the database, keeping the one it replaces
  aside. It holds the data directory's lock meanwhile, so it refuses while a server runs there.

Each takes `--data-dir` and `--db` as `taskyard serve` does (and TASKYARD_DATA_DIR, TASKYARD_DB).
Exit status: 0 done, 1 failed with nothing changed, 2 bad usage (or PostgreSQL for `backup` and
`restore`), 3 the data directory is in use.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from taskyard.cli import options
from taskyard.config import ServerConfig
from taskyard.lockfile import InUse, Lock, acquire
from taskyard.model import dates
from taskyard.model.errors import ConfigError, TaskyardError
from taskyard.storage import open_storage, sqlite_path
from taskyard.storage.backup import backup_sqlite, restore_sqlite

COMMANDS = ("migrate", "backup", "restore")
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_IN_USE = 3
SECRETS_REMINDER = (
    "a backup is the database only: keep the secret key (DATA_DIR/secret-key or TASKYARD_SECRET_KEY), "
    "the root access token and the artifacts' blobs with it"
)


DESCRIPTIONS = {
    "migrate": (
        "Apply the migrations the database lacks, as a starting server would, print each, then the\n"
        "schema version reached. Refuses a database made by a newer taskyard. On SQLite it holds the\n"
        "data directory's lock: stop the server first."
    ),
    "backup": (
        "Copy the SQLite database to FILE with SQLite's online backup: consistent while a server\n"
        "keeps writing, and without the data directory's lock. For PostgreSQL, prints the pg_dump\n"
        "command to use instead (exit 2). Back up the secret key and the artifacts' blobs too."
    ),
    "restore": (
        "Put the SQLite backup FILE in place of the database; the database it replaces is kept\n"
        "beside it. Holds the data directory's lock: refuses while a server runs there. For\n"
        "PostgreSQL, prints the pg_restore command to use instead (exit 2)."
    ),
}
EXIT_CODES = "exit status: 0 done, 1 failed (nothing changed), 2 bad usage, 3 the data directory is in use"


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `migrate`, `backup` and `restore` on `taskyard`'s sub-commands."""
    helps = {
        "migrate": "apply the database's missing migrations, then exit",
        "backup": "copy the SQLite database to FILE, online and consistent",
        "restore": "put a SQLite backup in place of the database (server stopped)",
    }
    for name in COMMANDS:
        parser = commands.add_parser(
            name,
            help=helps[name],
            description=DESCRIPTIONS[name],
            epilog=EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name == "backup":
            parser.add_argument("file", metavar="FILE", help="where to write the copy (must not exist)")
        if name == "restore":
            parser.add_argument("file", metavar="FILE", help="the backup to restore")
        options.add_declared(parser, name)


def main(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    try:
        values = options.resolve(args, environ)
        config = ServerConfig(data_dir=values["data_dir"], db=values["db"])
        if args.command == "migrate":
            return migrate(config)
        if args.command == "backup":
            return backup(config, Path(args.file))
        return restore(config, Path(args.file))
    except InUse as exc:
        for line in exc.message.splitlines():
            print(f"taskyard: {line}", file=sys.stderr)
        return EXIT_IN_USE
    except ConfigError as exc:
        print(f"taskyard: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    except TaskyardError as exc:
        print(f"taskyard: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # a driver's own error, opening the database: one line, not a trace
        print(f"taskyard: {args.command} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _lock(config: ServerConfig, command: str) -> Lock | None:
    """The data directory's lock, for SQLite: the one a running `up` or SQLite `serve` holds."""
    if sqlite_path(config.db_url) is None:
        return None
    return acquire(
        Path(config.data_dir) / options.DATA_DIR_LOCK,
        what="the data directory",
        flag="--data-dir",
        process=f"taskyard {command}",
    )


def migrate(config: ServerConfig) -> int:
    lock = _lock(config, "migrate")
    try:
        where, applied, rows = asyncio.run(_migrate(config.db_url))
    finally:
        if lock is not None:
            lock.release()
    for row in applied:
        print(f"applied migration {row['version']:04d} {row['name']}")
    newest = max(row["version"] for row in rows)
    state = "migrated to" if applied else "nothing to apply, already at"
    print(f"{where}: {state} schema version {newest}")
    return 0


async def _migrate(db_url: str) -> tuple[str, list[Any], list[Any]]:
    """(the database, the migrations applied now, every migration it records)."""
    started = dates.now_ms()
    storage = await open_storage(db_url)
    try:
        async with storage.reader() as session:
            rows = await session.fetch("schema_versions")
    finally:
        await storage.close()
    return storage.url_for_humans, [row for row in rows if row["applied"] >= started], rows


def backup(config: ServerConfig, file: Path) -> int:
    path = sqlite_path(config.db_url)
    if path is None:
        print("taskyard: backup copies SQLite databases; back PostgreSQL up with pg_dump:", file=sys.stderr)
        print(
            f"  pg_dump --format=custom --file {shlex.quote(str(file))} {shlex.quote(config.db_url)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    copy = backup_sqlite(path, file)
    print(
        f"wrote {copy.path}: {copy.size} bytes, schema version {copy.schema_version}, {copy.tasks} tasks, "
        f"a consistent copy of sqlite:///{path}"
    )
    print(SECRETS_REMINDER)
    return 0


def restore(config: ServerConfig, file: Path) -> int:
    path = sqlite_path(config.db_url)
    if path is None:
        print(
            "taskyard: restore puts back SQLite databases; restore PostgreSQL with pg_restore:",
            file=sys.stderr,
        )
        print(
            f"  pg_restore --no-owner --dbname {shlex.quote(config.db_url)} {shlex.quote(str(file))}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    lock = _lock(config, "restore")
    try:
        copy, kept = restore_sqlite(file, path)
    finally:
        if lock is not None:
            lock.release()
    if kept is not None:
        print(f"kept the database it replaces as {kept}")
    print(
        f"restored {file} to sqlite:///{path}: schema version {copy.schema_version}, {copy.tasks} tasks; "
        "start the server with the secret key the backup was made with"
    )
    return 0
