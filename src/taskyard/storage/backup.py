"""Copying a SQLite database while a server uses it, and putting a copy back.

Both go through SQLite's online backup API (`sqlite3.Connection.backup`): the copy is taken
in one step under a read transaction, so it is the database as of one commit, with what the
write-ahead log holds included, however busy the server is. A reader in WAL mode neither
waits for the server's writes nor holds them up.

`backup_sqlite` writes the copy beside its destination and renames it into place once SQLite
has checked it, so a backup that fails leaves nothing under the name. `restore_sqlite` first
copies the database it replaces aside, the same way, then copies the backup into the
database's own file through SQLite, which takes care of any write-ahead log a server left.
Neither knows about the server: `taskyard restore` holds the data directory's lock meanwhile.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from taskyard.model.errors import TaskyardError
from taskyard.storage import schema


class BackupError(TaskyardError):
    """A backup or restore could not be made; nothing was changed."""


@dataclass(frozen=True)
class Copy:
    """A database copied: where, its schema version, how many tasks it holds, its size."""

    path: Path
    schema_version: int
    tasks: int
    size: int


def backup_sqlite(db_path: str, dest: Path) -> Copy:
    """Copy the database at `db_path` to `dest` (which must not exist), consistently, online."""
    if not Path(db_path).is_file():
        raise BackupError(f"there is no SQLite database at {db_path}")
    if dest.exists():
        raise BackupError(f"{dest} exists already: give a new file name, or remove that file first")
    return _copy(Path(db_path), dest)


def restore_sqlite(backup: Path, db_path: str) -> tuple[Copy, Path | None]:
    """Replace the database at `db_path` by `backup`; answer what is now there, and where the
    database it replaced was kept (None if there was none). Only while no server uses it."""
    if not backup.is_file():
        raise BackupError(f"there is no backup at {backup}")
    _describe(backup)  # a SQLite file, intact, with a schema this taskyard understands
    target = Path(db_path)
    kept = None
    if target.exists():
        kept = target.with_name(
            f"{target.name}.before-restore-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        )
        _keep(target, kept)
    target.parent.mkdir(parents=True, exist_ok=True)
    _sqlite_copy(backup, target)
    return _describe(target), kept


def _keep(target: Path, kept: Path) -> None:
    """Set the database at `target` aside as `kept`: copied through SQLite, which takes in what
    its write-ahead log holds; if SQLite can't read it (it may be why it is being restored),
    its files are moved aside as they are."""
    try:
        _sqlite_copy(target, kept)
    except BackupError:
        for suffix in ("", "-wal", "-shm", "-journal"):
            if Path(f"{target}{suffix}").exists():
                os.replace(f"{target}{suffix}", f"{kept}{suffix}")


def _copy(source: Path, dest: Path) -> Copy:
    """`source` copied to `dest` through a file beside it, renamed once SQLite has checked it."""
    partial = dest.with_name(f"{dest.name}.{os.getpid()}.part")
    try:
        _sqlite_copy(source, partial)
        described = _describe(partial)
        os.replace(partial, dest)
    finally:
        for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm"), Path(f"{partial}-journal")):
            leftover.unlink(missing_ok=True)
    return Copy(dest, described.schema_version, described.tasks, described.size)


def _sqlite_copy(source: Path, dest: Path) -> None:
    try:
        src = sqlite3.connect(source, timeout=30)
        try:
            dst = sqlite3.connect(dest, timeout=30)
            try:
                src.backup(dst)  # every page in one step: one consistent moment of `source`
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.Error as exc:
        raise BackupError(f"could not copy {source} to {dest}: {exc}") from exc


def _describe(path: Path) -> Copy:
    """What the database at `path` holds; BackupError unless it is an intact taskyard database
    this taskyard can open."""
    try:
        conn = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True, timeout=30)
        try:
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if check != "ok" or not {"schema_migrations", "tasks"} <= tables:
                raise BackupError(f"{path} is not an intact taskyard database ({check})")
            versions = [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]
            tasks = conn.execute("SELECT count(*) FROM tasks").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise BackupError(f"{path} is not a SQLite database taskyard can read: {exc}") from exc
    schema.check_applied(versions, "sqlite", str(path))
    return Copy(path, max(versions), int(tasks), path.stat().st_size)
