"""SQLite adapter: the embedded default. One writer connection (WAL), one reader.

The writer runs on the event loop's own thread. In WAL mode with `synchronous=NORMAL` a point
statement or a COMMIT takes microseconds (COMMIT appends to the log and syncs nothing), far less
than handing each statement to a thread and waiting for it: a transaction without other awaits
runs from BEGIN to COMMIT in one go, and the writer is never idle while its turn is held. What
could make such a statement slow is kept off the loop:

- Waiting for the write lock: the writer's `busy_timeout` is 0, and BEGIN IMMEDIATE (or a
  statement run alone) that finds the file locked by another connection, say a second process,
  is tried again after a sleep on the loop, for up to `BUSY_TIMEOUT` seconds before
  `DatabaseUnavailable`. (The data directory's lock keeps other servers away; `taskyard backup`
  only reads, and a reader in WAL mode takes no lock a writer waits for.)
- Checkpoints, which copy the log into the main file and sync it: the writer never checkpoints
  (`wal_autocheckpoint=0`); every `CHECKPOINT_EVERY` commits a PASSIVE checkpoint runs on a
  connection of its own in a thread, alongside the writer.
- Migrations, which may rebuild big tables, run in a thread before the server starts.

What is left on the loop is the statements' own work. A long write (a sweep's batch, bounded by
its LIMIT; a task's thousands of dependencies in one `executemany`) holds the loop for its
milliseconds, where it used to hold only the writer: nothing else could write meanwhile anyway.

Reads (`reader()`) may be long (a task group's listing, the UI's pages): they run on a second
connection, on aiosqlite's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, TypeVar

import aiosqlite
import orjson

from taskyard.internals.locks import queued
from taskyard.model import dates
from taskyard.storage import _queries, schema
from taskyard.storage._session import BaseSession
from taskyard.storage.counting import record
from taskyard.storage.port import (
    WAIT_TIMEOUT,
    DatabaseBusy,
    DatabaseUnavailable,
    Listener,
    ReplayedRequest,
    Row,
    RowMoved,
    UniqueViolation,
    signed_request_to_record,
)

T = TypeVar("T")
_PARAM = re.compile(r"\$(\d+)")
BUSY_TIMEOUT = 10.0
"""Seconds a connection waits for another connection's write lock before `DatabaseUnavailable`."""
CHECKPOINT_EVERY = 200
"""Commits between two checkpoints of the write-ahead log (a few pages each: about SQLite's own
default of 1,000 pages)."""
_PRAGMAS = (
    "journal_mode=WAL",
    "synchronous=NORMAL",
    f"busy_timeout={int(BUSY_TIMEOUT * 1000)}",
    "foreign_keys=OFF",
)


# Result codes (primary: the low byte) meaning the file can't be used now, whatever the statement:
# another process holds the lock past the busy timeout, the disk is full or failing, the file
# can't be opened or written, memory ran out. Nothing is retried here but the writer's wait for a
# lock (see the module's docstring): the others don't pass in a moment.
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


def _translated(exc: sqlite3.Error) -> Exception:
    """The port's error for sqlite3's `exc`; `exc` itself for the others (a bad statement, NOT
    NULL, a corrupt file), which are bugs or need a person."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code in _UNIQUE:
        return UniqueViolation(f"conflicting row: {exc}")
    if code is not None and (code & 0xFF) in _UNAVAILABLE:
        return DatabaseUnavailable(f"the SQLite database is unavailable: {exc}")
    return exc


@contextmanager
def wrap_db_errors() -> Iterator[None]:
    """Translate sqlite3's exceptions into the port's (see `_translated`)."""
    try:
        yield
    except sqlite3.Error as exc:
        translated = _translated(exc)
        if translated is exc:
            raise
        raise translated from exc


def _is_busy(exc: sqlite3.Error) -> bool:
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_BUSY


def _convert(sql: str) -> str:
    return _PARAM.sub(r"?\1", sql)


def _args(args: Sequence[object]) -> Sequence[object]:
    # SQLite has no arrays: list parameters travel as JSON and are read with json_each().
    for arg in args:
        if isinstance(arg, list | tuple):
            return tuple(_json_array(a) if isinstance(a, list | tuple) else a for a in args)
    return args


def _json_array(value: list[object] | tuple[object, ...]) -> str:
    try:
        return orjson.dumps(value).decode()  # a tenth of json.dumps's time
    except TypeError:  # what orjson can't write (an integer past 64 bits, a lone surrogate)
        return json.dumps(value)


class _WriterSession(BaseSession[sqlite3.Connection]):
    """Statements on the writer, run at once on the event loop's thread."""

    async def execute(self, name: str, *args: object, **params: object) -> int:
        if params:
            args = self.bind(name, args, params)
        record(name)
        try:
            return self._conn.execute(self._queries[name], _args(args)).rowcount
        except sqlite3.Error as exc:
            _raise_translated(exc)

    async def executemany(self, name: str, rows: Sequence[Sequence[object]]) -> None:
        record(name, len(rows))  # one call into SQLite, one statement per row
        try:
            self._conn.executemany(self._queries[name], [_args(r) for r in rows])
        except sqlite3.Error as exc:
            _raise_translated(exc)

    # SQLite has no round trip to save: a deferred write runs at once.
    async def defer(self, name: str, *args: object, **params: object) -> None:
        await self.execute(name, *args, **params)

    async def defer_many(self, name: str, rows: Sequence[Sequence[object]]) -> None:
        await self.executemany(name, rows)

    async def defer_checked(self, name: str, *args: object, **params: object) -> None:
        if await self.fetchrow(name, *args, **params) is None:
            raise RowMoved(f"{name} found its row changed since it was read")

    async def fetch(self, name: str, *args: object, **params: object) -> list[Row]:
        if params:
            args = self.bind(name, args, params)
        record(name)
        try:
            return self._conn.execute(self._queries[name], _args(args)).fetchall()
        except sqlite3.Error as exc:
            _raise_translated(exc)

    async def fetchrow(self, name: str, *args: object, **params: object) -> Row | None:
        if params:
            args = self.bind(name, args, params)
        record(name)
        try:
            row: Row | None = self._conn.execute(self._queries[name], _args(args)).fetchone()
            return row
        except sqlite3.Error as exc:
            _raise_translated(exc)

    async def fetchval(self, name: str, *args: object, **params: object) -> Any:
        row = await self.fetchrow(name, *args, **params)
        return None if row is None else row[0]  # type: ignore[index]


def _raise_translated(exc: sqlite3.Error) -> NoReturn:
    translated = _translated(exc)
    if translated is exc:
        raise exc
    raise translated from exc


class _Session(BaseSession[aiosqlite.Connection]):
    """Statements on the reader, each one hop to aiosqlite's thread."""

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


def _roll_back(writer: sqlite3.Connection) -> None:
    # A failed COMMIT or statement may have ended the transaction already: nothing to undo then.
    if writer.in_transaction:
        record("ROLLBACK")
        with contextlib.suppress(sqlite3.Error):  # SQLite rolled back by itself (an I/O error)
            writer.execute("ROLLBACK")


class _Transaction:
    """`SQLiteStorage.transaction()`: the writer's turn, BEGIN IMMEDIATE ... COMMIT or ROLLBACK.
    A signed request's first transaction records its MAC right after BEGIN (the port's Replays).

    Nothing between BEGIN and COMMIT awaits but the caller's block, so a cancelled caller is
    cancelled in its block (or while waiting for its turn) and never leaves a transaction open:
    the exit rolls back before handing the turn on.
    """

    __slots__ = ("_session", "_storage", "_writer")

    def __init__(self, storage: SQLiteStorage) -> None:
        self._storage = storage

    async def __aenter__(self) -> _WriterSession:
        storage = self._storage
        writer = self._writer = storage._open_writer()
        await storage._take_turn()
        try:
            record("BEGIN")
            await storage._when_unlocked(writer.execute, "BEGIN IMMEDIATE")
        except BaseException as exc:
            storage._lock.release()
            if isinstance(exc, sqlite3.Error):
                _raise_translated(exc)
            raise
        self._session = session = _WriterSession(writer, storage._queries, storage._names)
        signed = signed_request_to_record()
        if signed is not None:
            try:
                await session.execute("record_signed_request", signed.mac, signed.expires)
            except BaseException as exc:
                _roll_back(writer)
                storage._lock.release()
                if isinstance(exc, UniqueViolation):  # the primary key: this MAC was recorded before
                    raise ReplayedRequest() from None
                raise
            session.after_commit(signed.mark_recorded)
        return session

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        storage, writer = self._storage, self._writer
        try:
            if exc_type is not None:
                _roll_back(writer)
                return
            record("COMMIT")
            try:
                writer.execute("COMMIT")
            except sqlite3.Error as error:
                _roll_back(writer)
                _raise_translated(error)
        finally:
            storage._lock.release()
        storage._committed()
        self._session.deliver(storage._dispatch)


class SQLiteStorage:
    """Storage on one SQLite file. Transactions are serialised in this process (BEGIN IMMEDIATE)."""

    one_writer = True

    def __init__(self, path: str) -> None:
        self.url_for_humans = f"sqlite:///{path}"
        self._path = path
        self._queries = {k: _convert(v) for k, v in _queries.load("sqlite").items()}
        self._names = _queries.parameter_names("sqlite")
        self._writer: sqlite3.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._checkpointer: sqlite3.Connection | None = None
        self._checkpoint: asyncio.Task[None] | None = None
        self._commits = 0  # since the last checkpoint began
        self._lock = asyncio.Lock()
        self._listeners: dict[str, list[Listener]] = {}

    async def open(self) -> SQLiteStorage:
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        try:
            with wrap_db_errors():
                self._writer = await asyncio.to_thread(self._open_writer_and_migrate)
                self._checkpointer = await asyncio.to_thread(self._connect)
                self._reader = await aiosqlite.connect(
                    self._path, isolation_level=None, cached_statements=256
                )
                self._reader.row_factory = sqlite3.Row
                for pragma in _PRAGMAS:
                    await self._reader.execute(f"PRAGMA {pragma}")
        except BaseException:
            await self.close()  # a refused or failed migration leaves nothing open
            raise
        return self

    def _connect(self) -> sqlite3.Connection:
        # cached_statements: room for every named query (~130), so none is prepared twice
        conn = sqlite3.connect(
            self._path, isolation_level=None, check_same_thread=False, cached_statements=256
        )
        for pragma in _PRAGMAS:
            conn.execute(f"PRAGMA {pragma}")
        return conn

    def _open_writer_and_migrate(self) -> sqlite3.Connection:
        """The writer connection, the database migrated (in a thread: this may take a while)."""
        conn = self._connect()
        try:
            conn.row_factory = sqlite3.Row
            self._migrate(conn)
            # From now on on the event loop: it never waits inside SQLite (see the module's docstring).
            conn.execute("PRAGMA busy_timeout=0")
            conn.execute("PRAGMA wal_autocheckpoint=0")
        except BaseException:
            conn.close()
            raise
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied BIGINT NOT NULL)"
        )
        versions = conn.execute("SELECT version FROM schema_migrations").fetchall()
        schema.check_applied([row[0] for row in versions], "sqlite", self.url_for_humans)
        for version, name, statements in _queries.migrations("sqlite"):
            conn.execute("BEGIN IMMEDIATE")
            try:
                if (
                    conn.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (version,)).fetchone()
                    is None
                ):
                    for statement in statements:
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, dates.now_ms())
                    )
                conn.execute("COMMIT")
            except BaseException:
                _roll_back(conn)
                raise

    def _open_writer(self) -> sqlite3.Connection:
        if self._writer is None:
            raise DatabaseUnavailable("the SQLite storage is closed")
        return self._writer

    def optimistic(self) -> _Transaction:
        return _Transaction(self)  # the one writer is the lock: nothing to gain by reading before it

    def transaction(self) -> _Transaction:
        return _Transaction(self)

    async def execute(self, name: str, *args: object, **params: object) -> int:
        if signed_request_to_record() is not None:  # a signed request's write: recorded with it
            async with self.transaction() as tx:
                return await tx.execute(name, *args, **params)
        # Outside BEGIN the connection is in autocommit: the statement is a transaction of its own.
        writer = self._open_writer()
        session = _WriterSession(writer, self._queries, self._names)
        await self._take_turn()
        try:
            sql, values = self._queries[name], _args(session.bind(name, args, params))
            record(name)
            try:
                cursor = await self._when_unlocked(writer.execute, sql, values)
            except sqlite3.Error as exc:
                _raise_translated(exc)
            rows: int = cursor.rowcount
        finally:
            self._lock.release()
        self._committed()
        return rows

    async def _take_turn(self) -> None:
        """Hold the writer, once the transactions ahead are done; `DatabaseBusy` if that takes
        longer than `WAIT_TIMEOUT`, rather than pile callers up."""
        lock, wait = self._lock, WAIT_TIMEOUT.get()
        if wait is None or not (lock.locked() or queued(lock)):
            await lock.acquire()  # free and nobody queued for it: taken at once, no timer to set
            return
        try:
            async with asyncio.timeout(wait):
                await self._lock.acquire()
        except TimeoutError:
            raise DatabaseBusy(f"the database stayed busy with other writes for {wait} s") from None

    async def _when_unlocked(self, run: Callable[..., T], *args: object) -> T:
        """`run(*args)` on the writer, tried again while another connection holds the file's write
        lock (SQLITE_BUSY: nothing was done), sleeping between tries, for up to BUSY_TIMEOUT s."""
        try:
            return run(*args)
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
        loop = asyncio.get_running_loop()
        deadline, pause = loop.time() + BUSY_TIMEOUT, 0.001
        while True:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)
            try:
                return run(*args)
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or loop.time() >= deadline:
                    raise

    def _committed(self) -> None:
        """Count a commit; every CHECKPOINT_EVERY, start a checkpoint unless one is running."""
        self._commits += 1
        if self._commits >= CHECKPOINT_EVERY and self._checkpoint is None and self._checkpointer is not None:
            self._commits = 0
            self._checkpoint = asyncio.get_running_loop().create_task(
                self._run_checkpoint(self._checkpointer), name="sqlite-checkpoint"
            )

    async def _run_checkpoint(self, conn: sqlite3.Connection) -> None:
        # PASSIVE: copies what no reader still needs, waits for nobody, blocks nobody.
        try:
            await asyncio.to_thread(conn.execute, "PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:  # the next one tries again; the log just grows meanwhile
            logging.getLogger(__name__).warning("SQLite checkpoint failed: %s", exc)
        finally:
            self._checkpoint = None

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
        checkpoint = self._checkpoint
        if checkpoint is not None:
            await asyncio.shield(checkpoint)  # its thread runs on regardless: let it finish
        reader, checkpointer, writer = self._reader, self._checkpointer, self._writer
        self._reader = self._checkpointer = self._writer = None
        if reader is not None:
            await reader.close()
        for conn in (checkpointer, writer):  # the last to close checkpoints what is left
            if conn is not None:
                await asyncio.to_thread(conn.close)


async def open_sqlite(path: str) -> SQLiteStorage:
    """Open (creating and migrating if needed) the SQLite database at `path`."""
    return await SQLiteStorage(path).open()
