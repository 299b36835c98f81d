"""The upgrade fixtures as databases to test: each release's SQLite file or PostgreSQL dump,
restored into a scratch database of its own, with the blobs and the manifest that came with it.

The fixtures are made by `make_fixtures.py` (see there for how, and from which commits).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from taskyard.storage import sqlite_path
from tests.conftest import _pg_admin, _pg_url, need_postgres

FIXTURES = Path(__file__).parent / "fixtures"
RELEASES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
DIALECTS = ("sqlite", "postgres")


@dataclass(frozen=True)
class OldDatabase:
    """A release's database, restored: where it is, its data directory, and what it holds."""

    release: str
    dialect: str
    db_url: str
    data_dir: Path  # holds `artifacts/`, the local blob store's files, when the release had any
    manifest: dict[str, Any]

    @property
    def schema(self) -> int:
        return int(self.manifest["schema"])

    @property
    def made(self) -> int:
        """When the old release last acted on it, in epoch ms: tests run the queue at this time."""
        return int(self.manifest["made"])


@contextmanager
def restored(release: str, dialect: str, tmp_path: Path) -> Iterator[OldDatabase]:
    """`release`'s `dialect` fixture in a database of its own, dropped afterwards."""
    source = FIXTURES / release / dialect
    manifest = json.loads((source / "manifest.json").read_text())
    data_dir = tmp_path / f"{release}-{dialect}"
    data_dir.mkdir(parents=True)
    if (source / "artifacts").is_dir():
        shutil.copytree(source / "artifacts", data_dir / "artifacts")
    if dialect == "sqlite":
        shutil.copyfile(source / "taskyard.sqlite3", data_dir / "taskyard.sqlite3")
        yield OldDatabase(release, dialect, f"sqlite:///{data_dir}/taskyard.sqlite3", data_dir, manifest)
        return
    need_postgres()
    name = f"taskyard_up_{uuid.uuid4().hex[:10]}"
    _pg_admin(f"CREATE DATABASE {name}")
    try:
        asyncio.run(execute_raw(_pg_url(name), psql_script((source / "dump.sql").read_text())))
        yield OldDatabase(release, dialect, _pg_url(name), data_dir, manifest)
    finally:
        _pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def psql_script(dump: str) -> str:
    """A plain pg_dump as one script the server runs: without psql's own commands (`\\restrict`)."""
    return "\n".join(line for line in dump.splitlines() if not line.startswith("\\"))


async def execute_raw(db_url: str, sql: str) -> None:
    """Run `sql` (one or more statements) on the database itself, past taskyard's storage."""
    path = sqlite_path(db_url)
    if path is not None:
        await asyncio.to_thread(_sqlite_script, path, sql)
        return
    conn = await asyncpg.connect(db_url, timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def fetch_raw(db_url: str, sql: str) -> list[tuple[Any, ...]]:
    path = sqlite_path(db_url)
    if path is not None:
        return await asyncio.to_thread(_sqlite_fetch, path, sql)
    conn = await asyncpg.connect(db_url, timeout=10)
    try:
        return [tuple(row) for row in await conn.fetch(sql)]
    finally:
        await conn.close()


def _sqlite_script(path: str, sql: str) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.executescript(sql)
    finally:
        conn.close()


def _sqlite_fetch(path: str, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return [tuple(row) for row in conn.execute(sql)]
    finally:
        conn.close()
