"""SQLite adapter: the embedded default. One writer connection (WAL), one reader."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from taskyard.model import dates
from taskyard.storage import _queries, schema
from taskyard.storage._session import BaseSession
from taskyard.storage.counting import record
from taskyard.storage.port import (
    WAIT_TIMEOUT,
    DatabaseBusy,
    DatabaseUnavailable,
    Listener,
    Row,
    Tx,
    UniqueViolation,
)

_PARAM = re.compile(r"\$(\d+)")
_WORDS = {
    "BIGSERIAL": "INTEGER PRIMARY KEY AUTOINCREMENT",
    "NOW_MS": "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
}


# Result codes (primary: the low byte) meaning the file can't be used now, whatever the statement:
# another process holds the lock past busy_timeout, the disk is full or failing, the file can't
# be opened or written, memory ran out. Nothing is retried here: a lock already waited
# busy_timeout, and the others don't pass in a moment.
_UNAVAILABLE = {
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_NOMEM,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PROTOCOL,
}
_UNIQUE = {sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY}


@contextmanager
def wrap_db_errors() -> Iterator[None]:
    """Translate sqlite3's exceptions into the port's; others (a bad statement, NOT NULL, a corrupt
    file) are bugs or need a person, and pass through."""
    try:
        yield
    except sqlite3.Error as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        if code in _UNIQUE:
            raise UniqueViolation(f"conflicting row: {exc}") from exc
        if code is not None and (code & 0xFF) in _UNAVAILABLE:
            raise DatabaseUnavailable(f"the SQLite database is unavailable: {exc}") from exc
        raise


def _convert(sql: str) -> str:
    return _PARAM.sub(r"?\1", sql)


def _args(args: Sequence[object]) -> tuple[object, ...]:
    # SQLite has no arrays: list parameters travel as JSON and are read with json_each().
    return tuple(json.dumps(a) if isinstance(a, list | tuple) else a for a in args)


class _Session(BaseSession[aiosqlite.Connection]):
    async def execute(self, name: str, *args: object, **params: object) -> int:
        args = self.bind(name, args, params)
        record(name)
        with wrap_db_errors():
            cursor = await self._conn.execute(self._queries[name], _args(args))
            return cursor.rowcount

    async def executemany(self, name: str, rows: Sequence[Sequence[object]]) -> None:
        record(name, len(rows))  # one hop to the thread, one statement per row
        with wrap_db_errors():
            await self._conn.executemany(self._queries[name], [_args(r) for r in rows])

    async def fetch(self, name: str, *args: object, **params: object) -> list[Row]:
        args = self.bind(name, args, params)
        record(name)
        # execute_fetchall: one trip to aiosqlite's thread instead of two
        with wrap_db_errors():
            return list(await self._conn.execute_fetchall(self._queries[name], _args(args)))  # type: ignore[arg-type]

    async def fetchrow(self, name: str, *args: object, **params: object) -> Row | None:
        rows = await self.fetch(name, *args, **params)
        return rows[0] if rows else None

    async def fetchval(self, name: str, *args: object, **params: object) -> Any:
        row = await self.fetchrow(name, *args, **params)
        return None if row is None else row[0]  # type: ignore[index]


async def _uncancellable(statement: Awaitable[object]) -> None:
    """Run BEGIN, COMMIT or ROLLBACK to the end even if the caller is cancelled meanwhile.

    The connection is shared: a transaction left open by a cancelled caller would make every
    later BEGIN fail. The cancellation still reaches the caller, once the statement is done.
    """
    task = asyncio.ensure_future(statement)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise


async def _rollback(conn: aiosqlite.Connection) -> None:
    # Queued behind any statement a cancelled caller left running; there may be nothing to undo.
    record("ROLLBACK")
    with contextlib.suppress(sqlite3.OperationalError):
        await conn.execute("ROLLBACK")


class SQLiteStorage:
    """Storage on one SQLite file. Transactions are serialised in this process (BEGIN IMMEDIATE)."""

    def __init__(self, path: str) -> None:
        self.url_for_humans = f"sqlite:///{path}"
        self._path = path
        self._queries = {k: _convert(v) for k, v in _queries.load("sqlite").items()}
        self._names = _queries.parameter_names("sqlite")
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        self._listeners: dict[str, list[Listener]] = {}

    async def open(self) -> SQLiteStorage:
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        with wrap_db_errors():
            self._writer = await self._connect()
            try:
                await self._migrate()
            except BaseException:
                await self.close()  # a refused or failed migration leaves nothing open
                raise
            self._reader = await self._connect()
        return self

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self._path, isolation_level=None)
        conn.row_factory = sqlite3.Row
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=10000", "foreign_keys=OFF"):
            await conn.execute(f"PRAGMA {pragma}")
        return conn

    async def _migrate(self) -> None:
        assert self._writer is not None
        conn = self._writer
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied BIGINT NOT NULL)"
        )
        versions = await conn.execute_fetchall("SELECT version FROM schema_migrations")
        schema.check_applied([row[0] for row in versions], "sqlite", self.url_for_humans)
        for version, name, statements in _queries.migrations("sqlite", _WORDS):
            await conn.execute("BEGIN IMMEDIATE")
            cursor = await conn.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (version,))
            if await cursor.fetchone() is None:
                for statement in statements:
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, dates.now_ms())
                )
            await conn.execute("COMMIT")

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Tx]:
        if self._writer is None:
            raise DatabaseUnavailable("the SQLite storage is closed")
        writer = self._writer
        async with self._writer_turn():
            session = _Session(writer, self._queries, self._names)
            try:
                record("BEGIN")
                with wrap_db_errors():
                    await _uncancellable(writer.execute("BEGIN IMMEDIATE"))
                yield session
                record("COMMIT")
                with wrap_db_errors():
                    await _uncancellable(writer.execute("COMMIT"))
            except BaseException:
                await _uncancellable(_rollback(writer))
                raise
        session.deliver(self._dispatch)

    async def execute(self, name: str, *args: object, **params: object) -> int:
        # Outside BEGIN the connection is in autocommit: the statement is a transaction of its own.
        if self._writer is None:
            raise DatabaseUnavailable("the SQLite storage is closed")
        async with self._writer_turn():
            return await _Session(self._writer, self._queries, self._names).execute(name, *args, **params)

    @asynccontextmanager
    async def _writer_turn(self) -> AsyncIterator[None]:
        """The writer connection, once the transactions ahead are done; `DatabaseBusy` if that
        takes longer than `WAIT_TIMEOUT`, rather than pile callers up."""
        wait = WAIT_TIMEOUT.get()
        try:
            async with asyncio.timeout(wait):
                await self._lock.acquire()
        except TimeoutError:
            raise DatabaseBusy(f"the database stayed busy with other writes for {wait} s") from None
        try:
            yield
        finally:
            self._lock.release()

    def _dispatch(self, channel: str, payload: str) -> None:
        for listener in self._listeners.get(channel, ()):
            listener(payload)

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[_Session]:
        if self._reader is None:
            raise DatabaseUnavailable("the SQLite storage is closed")
        yield _Session(self._reader, self._queries, self._names)

    async def listen(self, channel: str, listener: Listener) -> None:
        self._listeners.setdefault(channel, []).append(listener)

    async def lead(self, job: str) -> bool:
        return True  # a SQLite database has one process (the data directory's lock)

    async def close(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                await conn.close()
        self._reader = self._writer = None


async def open_sqlite(path: str) -> SQLiteStorage:
    """Open (creating and migrating if needed) the SQLite database at `path`."""
    return await SQLiteStorage(path).open()
