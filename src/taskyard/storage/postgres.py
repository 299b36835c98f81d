"""PostgreSQL adapter: the scale-out backend, through asyncpg.

Several taskyard processes may share one database: races are settled by row locks and
conditional updates, claims by `FOR UPDATE SKIP LOCKED`, and wake-ups cross processes by
LISTEN/NOTIFY.

Failures. `wrap_db_errors` sorts every driver error by its SQLSTATE class (or, for errors the
driver raises itself, by its kind) into the port's: the server going away, restarting, refusing
connections or out of them is `DatabaseUnavailable` (503); a deadlock or serialization failure
is `TransactionRolledBack`. A transaction whose connection fails before COMMIT is sent is
`TransactionRolledBack` too (see the port for who runs it again); one whose COMMIT may have
reached the server is not. A connection that failed is closed, never handed back to the pool.

Deferred writes (`Tx.defer`: writes whose outcome the caller never reads, such as a new task's
row, a locked task's update, the outbox's events) are held as `EXECUTE` of a prepared statement
with their arguments written in as literals, and sent ahead of the transaction's next statement
or with its COMMIT, as one simple-protocol query: a createTask, claimWork or report then costs
three or four round trips fewer. Every statement still runs in the order the code made it; an
error in a deferred write surfaces at that next statement or at COMMIT, and nothing commits.
A connection PREPAREs a deferred write's query the first time it sends one, at the head of that
message (`_Prepared`), so the server parses and plans it once per connection, not once a write.
BEGIN waits the same way, for the first statement that must run inside the transaction; a
transaction whose every write was deferred is one message without BEGIN and COMMIT, which
PostgreSQL runs as a transaction. `optimistic()` runs its reads before that: a report reads its
task, then writes its update (checked against the version read), events and resolution in one
round trip. A signed request's MAC (the port's Replays) is a deferred write put at the head of
the first message the transaction sends, if it sends one: no round trip of its own, and a replay
fails the message before any of the request's own writes runs.

Notifications arrive on one connection of their own. A task keeps it up: it learns that the
connection is gone from the driver or, should the driver not notice (a silent network), from a
probe every `listener_probe_seconds`; it reconnects with backoff whatever the errors on the way,
logs one line when the connection is lost and one when it is back, and then calls every listener
with None, so wake-ups that were missed meanwhile are looked for again.

Leadership (`lead`): a job that one process at a time should run takes a session advisory lock
on a connection of its own. PostgreSQL releases it when that connection ends, however the
process ended, and the next process to ask takes it over. Leading is an economy, not what makes
the jobs safe: they settle their races in the database, so two leaders for a moment (a
connection that died without the driver noticing yet) do no harm.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import random
import re
import time
import zlib
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any, NoReturn

import asyncpg

from taskyard.model import dates
from taskyard.model.errors import TaskyardError
from taskyard.storage import _queries, schema
from taskyard.storage._session import BaseSession
from taskyard.storage.counting import record
from taskyard.storage.pool import ConnectionPool, PoolClosed
from taskyard.storage.port import (
    WAIT_TIMEOUT,
    DatabaseBusy,
    DatabaseUnavailable,
    Listener,
    ReplayedRequest,
    Row,
    RowMoved,
    SignedRequest,
    TransactionRolledBack,
    Tx,
    UniqueViolation,
    signed_request_to_record,
)

log = logging.getLogger(__name__)
_OUTBOX_LOG_SCHEMA = 13  # the migration that made the outbox the event log's store
MIN_POSTGRES = 13  # xid8 and pg_snapshot (migration 0013)
_SEEN_REQUESTS_KEY = "seen_requests_pkey"  # a signed request's MAC recorded twice: a replay
_RECORD = "record_signed_request"  # the query that records it (storage/port.py, Replays)
_MIGRATION_LOCK = 0x7A5C_0001
_LEAD_LOCKS = 0x7A5D_0000  # and the 65,535 keys after it: one per job, see `lead`
CONNECT_TIMEOUT = 10.0

# SQLSTATEs of a transaction the server rolled back, which may succeed if run again.
_ROLLED_BACK = {"40001": "a serialization failure", "40P01": "a deadlock"}
# SQLSTATE classes (and single states) that mean: the server can't serve us now, try again.
_UNAVAILABLE_CLASSES = {
    "08",  # connection exception: lost, refused, protocol broken
    "53",  # insufficient resources: too many connections, disk full, out of memory
    "57",  # operator intervention: shutting down, starting up, cancelled, database dropped
    "58",  # system error: I/O error in the server
}
_UNAVAILABLE_STATES = {
    "25006",  # read-only transaction: we reached a standby (during a failover)
    "55P03",  # lock not available: a lock wait timed out
}
# Errors asyncpg raises itself that mean a mistake in the call, not an unavailable server.
_CALLER_MISTAKES = (
    ValueError,  # ClientConfigurationError, and bad arguments
    asyncpg.exceptions.UnsupportedClientFeatureError,
    asyncpg.exceptions.UnsupportedServerFeatureError,
)


class OldPostgres(TaskyardError):
    """The PostgreSQL server is older than taskyard's schema needs."""


def classify(exc: BaseException) -> type[DatabaseUnavailable] | None:
    """The port's error for a driver's exception, or None if it is not about availability."""
    if isinstance(exc, asyncpg.PostgresError):
        state = str(exc.sqlstate or "")
        if state in _ROLLED_BACK or isinstance(exc, asyncpg.exceptions.InvalidCachedStatementError):
            return TransactionRolledBack  # the server aborted the transaction; the connection is fine
        if state[:2] in _UNAVAILABLE_CLASSES or state in _UNAVAILABLE_STATES:
            return DatabaseUnavailable
        return None
    if isinstance(exc, asyncpg.InterfaceError):  # "connection is closed", and the like
        return None if isinstance(exc, _CALLER_MISTAKES) else DatabaseUnavailable
    if isinstance(exc, asyncpg.InternalClientError | OSError):  # protocol state broken; sockets, timeouts
        return DatabaseUnavailable
    return None


def translated(exc: Exception) -> Exception:
    """The port's error for a driver's exception; `exc` itself if it is none of the port's."""
    if isinstance(exc, asyncpg.UniqueViolationError):
        if exc.constraint_name == _SEEN_REQUESTS_KEY:
            return ReplayedRequest()
        return UniqueViolation(f"conflicting row: {exc.detail or exc}")
    if isinstance(exc, asyncpg.DivisionByZeroError):  # how a checked write fails (Tx.defer_checked)
        return RowMoved("a checked write found its row changed since it was read")
    kind = classify(exc)
    if kind is None:
        return exc
    if kind is TransactionRolledBack:
        why = _ROLLED_BACK.get(str(getattr(exc, "sqlstate", "")), "a schema change")
        return TransactionRolledBack(f"PostgreSQL rolled the transaction back after {why}")
    return DatabaseUnavailable(f"PostgreSQL is unavailable: {type(exc).__name__}: {exc}")


def _raise_translated(exc: Exception) -> NoReturn:
    port_error = translated(exc)
    if port_error is exc:
        raise exc
    raise port_error from exc


@contextmanager
def wrap_db_errors() -> Iterator[None]:
    """Translate asyncpg's exceptions into the port's (see `translated`)."""
    try:
        yield
    except Exception as exc:
        _raise_translated(exc)


class _Prepared:
    """The deferred writes' queries one connection has PREPAREd (their names), or None: unsure.

    A PREPARE rides at the head of the message that first sends its query's `EXECUTE`. PostgreSQL
    keeps a prepared statement whatever becomes of the transaction it was made in, but a message
    that fails may have stopped before its PREPAREs ran (one in a transaction already failed): the
    connection is then unsure, and reads back what it has before it next prepares."""

    __slots__ = ("names",)

    def __init__(self) -> None:
        self.names: set[str] | None = set()


_PREPARED_NAMES = "SELECT name FROM pg_prepared_statements WHERE name LIKE 'ty\\_%'"


def _statement(name: str) -> str:
    """The prepared statement of deferred query `name` (apart from asyncpg's own, `__asyncpg_...`)."""
    return "ty_" + name


class _Session(BaseSession[asyncpg.Connection]):
    """Statements on one pooled connection. Deferred writes (`defer`) wait in `_deferred`, as
    `EXECUTE` with their arguments written in, until the next statement or COMMIT: then they go
    first, in the same round trip (a simple-protocol query of several statements) or, before a
    statement of the extended protocol, in one of their own. The PREPAREs they need go first.

    A transaction's BEGIN waits too (`_unbegun`): it goes with the deferred writes ahead of the
    first statement that must run inside the transaction (any, in `transaction()`; a write, in
    `optimistic()`, whose reads before it run by themselves). A transaction that reaches its end
    with BEGIN unsent sends its deferred writes alone, as one message without BEGIN and COMMIT:
    PostgreSQL runs a message of several statements as one transaction."""

    def __init__(
        self,
        conn: asyncpg.Connection,
        queries: dict[str, str],
        names: Any,
        prepared: _Prepared,
        written_in: dict[str, int],
        *,
        unbegun: bool = False,
        reads_begin: bool = False,
    ) -> None:
        super().__init__(conn, queries, names)
        self._prepared = prepared
        self._written_in = written_in
        self._preparing: dict[str, str] = {}  # name: its PREPARE, to send ahead of the deferred writes
        self._deferred: list[str] = []
        self._deferred_names: list[str] = []
        self._unbegun = unbegun  # a transaction whose BEGIN is not sent yet
        self._reads_begin = unbegun and reads_begin  # whether a read sends it
        self._signed: SignedRequest | None = None  # to record with COMMIT, if the transaction sends any

    @property
    def begun(self) -> bool:
        """Whether BEGIN was sent (as far as the server goes, it may not have arrived yet)."""
        return not self._unbegun

    async def defer(self, name: str, *args: object, **params: object) -> None:
        if params:
            args = self.bind(name, args, params)
        await self._prepare(name)
        self._deferred.append(_executing(name, args))
        self._deferred_names.append(name)

    async def defer_many(self, name: str, rows: Sequence[Sequence[object]]) -> None:
        await self._prepare(name)
        self._deferred.extend(_executing(name, row) for row in rows)
        self._deferred_names.extend(name for _ in rows)

    async def _prepare(self, name: str) -> None:
        """PREPARE query `name` with the next message, unless this connection has it already. (A
        query with a parameter written in is prepared with the parameter: deferred, it is sent.)"""
        known = self._prepared.names
        if known is None:  # a failed message left it unsure: ask (one read, once)
            try:
                rows = await self._conn.fetch(_PREPARED_NAMES)
            except Exception as exc:
                _raise_translated(exc)
            known = self._prepared.names = {row["name"][3:] for row in rows}
        if name not in known and name not in self._preparing:
            self._preparing[name] = f"PREPARE {_statement(name)} AS {self._queries[name]}; "

    async def record_signed(self, signed: SignedRequest) -> None:
        """Insert `signed`'s MAC as this transaction's last write, in the message that commits it, if
        the transaction sends anything (storage/port.py, Replays). Last, not first: a transaction
        takes its id at its first write, and the relay publishes a window's events in the order of
        those ids, which is commit order only because a transaction's first write comes after the
        reads it acts on (a claim takes its id once it has seen the task's create committed). The
        MAC written first would give a claim an id older than the create it claims."""
        await self._prepare(_RECORD)
        self._signed = signed

    def _tail_signed(self) -> None:
        signed, self._signed = self._signed, None
        if signed is not None:
            self._deferred.append(_executing(_RECORD, (signed.mac, signed.expires)))
            self._deferred_names.append(_RECORD)
            self.after_commit(signed.mark_recorded)

    # The query itself fails the transaction (a division by zero, which `translated` makes
    # RowMoved) where SQLite's answers no row.
    defer_checked = defer

    def take_deferred(self, *, committing: bool = False) -> tuple[str, list[str]]:
        """The deferred writes as one SQL text (their PREPAREs first), and their names (not the
        PREPAREs': preparing is the connection's, as asyncpg's own is); none are left deferred. With
        `committing`, a signed request to record goes last, if the transaction sends anything."""
        if committing and (self._deferred or self.begun):
            self._tail_signed()
        sql, names = "".join(self._preparing.values()) + "".join(self._deferred), self._deferred_names
        self._deferred, self._deferred_names = [], []
        return sql, names

    async def send(self, sql: str) -> None:
        """Send a message that carries the deferred writes (`take_deferred`) and their PREPAREs: the
        connection has them once it went through, and is unsure of them should it fail."""
        preparing, self._preparing = self._preparing, {}
        try:
            await self._conn.execute(sql)
        except BaseException:
            if preparing:
                self._prepared.names = None
            raise
        if preparing and self._prepared.names is not None:
            self._prepared.names.update(preparing)

    async def _flush(self) -> None:
        """Send the deferred writes, behind BEGIN if the transaction has not begun."""
        sql, names = self.take_deferred()
        if self._unbegun:
            sql, names = "BEGIN; " + sql, ["BEGIN", *names]
            self._unbegun = self._reads_begin = False
        record(_trip_name(names), len(names))
        try:
            await self.send(sql)
        except Exception as exc:
            _raise_translated(exc)

    # try/except rather than `with wrap_db_errors()`: these run for every statement.
    async def execute(self, name: str, *args: object, **params: object) -> int:
        if params:
            args = self.bind(name, args, params)
        if self._deferred or self._unbegun:
            await self._flush()
        record(name)
        try:
            tag: str = await self._conn.execute(*self._text(name, args))
        except Exception as exc:
            _raise_translated(exc)
        last = tag.rsplit(" ", 1)[-1]
        return int(last) if last.isdigit() else 0

    def _text(self, name: str, args: tuple[object, ...]) -> tuple[object, ...]:
        """The driver's arguments for query `name`: its text, then its arguments (the last one
        written into the text instead, for a query with a `-- literal:` line)."""
        index = self._written_in.get(name)
        if index is None:
            return (self._queries[name], *args)
        return (_written(self._queries[name], index, args[index]), *args[:index])

    async def executemany(self, name: str, rows: Sequence[Sequence[object]]) -> None:
        if self._deferred or self._unbegun:
            await self._flush()
        record(name, len(rows))  # asyncpg pipelines the rows: one round trip
        try:
            await self._conn.executemany(self._queries[name], rows)
        except Exception as exc:
            _raise_translated(exc)

    async def fetch(self, name: str, *args: object, **params: object) -> list[Row]:
        if params:
            args = self.bind(name, args, params)
        if self._deferred or self._reads_begin:
            await self._flush()
        record(name)
        try:
            return list(await self._conn.fetch(*self._text(name, args)))
        except Exception as exc:
            _raise_translated(exc)

    async def fetchrow(self, name: str, *args: object, **params: object) -> Row | None:
        if params:
            args = self.bind(name, args, params)
        if self._deferred or self._reads_begin:
            await self._flush()
        record(name)
        try:
            row: Row | None = await self._conn.fetchrow(*self._text(name, args))
        except Exception as exc:
            _raise_translated(exc)
        return row

    async def fetchval(self, name: str, *args: object, **params: object) -> Any:
        if params:
            args = self.bind(name, args, params)
        if self._deferred or self._reads_begin:
            await self._flush()
        record(name)
        try:
            return await self._conn.fetchval(*self._text(name, args))
        except Exception as exc:
            _raise_translated(exc)


def _trip_name(names: list[str]) -> str:
    """A round trip's name in a tally: its statements' names, repeats run together."""
    return "+".join(dict.fromkeys(names))


@functools.lru_cache(maxsize=256)
def _written(query: str, index: int, value: object) -> str:
    """`query` with parameter `index` (0-based; its last) written in as an int literal."""
    if type(value) is not int:
        raise TypeError(f"a parameter written in takes an int, not {value!r:.40}")
    return re.sub(rf"\${index + 1}(?![0-9])", str(value), query)


def _executing(name: str, args: Sequence[object]) -> str:
    """The `EXECUTE` of deferred query `name` with its arguments written in as SQL literals, ended
    by `;`, for a simple-protocol query. Only the types our deferred writes take: None, bool, int
    and str."""
    return f"EXECUTE {_statement(name)}({','.join(map(_sql_literal, args))}); "


def _sql_literal(value: object) -> str:
    if value is None:
        return "NULL"
    if value is True or value is False:
        return "TRUE" if value else "FALSE"
    if type(value) is int:
        return str(value)
    if type(value) is str:
        return _literal(value)
    raise TypeError(f"a deferred write takes None, bool, int or str, not {value!r:.40}")


class PostgresStorage:
    """Storage on a PostgreSQL database, shareable by many processes."""

    one_writer = False  # a transaction holds the rows it wrote, not the database

    listener_probe_seconds = 10.0  # how often the notification connection is checked
    listener_backoff = (0.25, 5.0)  # first and longest wait between reconnection attempts

    def __init__(self, dsn: str, *, pool_size: int = 20) -> None:
        self.url_for_humans = _mask(dsn)
        self._dsn = dsn
        self._pool_size = pool_size
        self._queries = _queries.load("postgres")
        self._names = _queries.parameter_names("postgres")
        self._written_in = _queries.written_in("postgres")
        self._pool: ConnectionPool | None = None
        self._listeners: dict[str, list[Listener]] = {}
        self._listen_conn: asyncpg.Connection | None = None
        self._listen_lock = asyncio.Lock()  # one operation at a time on the notification connection
        self._listener_lost = asyncio.Event()
        self._keeper: asyncio.Task[None] | None = None
        self._lead_conn: asyncpg.Connection | None = None  # holds the locks of the jobs this process leads
        self._lead_lock = asyncio.Lock()
        self._led: set[str] = set()
        self._prepared: dict[int, _Prepared] = {}  # by the pooled connection's server pid
        # Notifications carry this token so a process can skip its own (it delivered them already).
        self._token = f"{os.getpid()}-{id(self):x}"

    async def open(self) -> PostgresStorage:
        with wrap_db_errors():
            self._pool = ConnectionPool(self._connect, max_size=self._pool_size)
            try:
                await self._migrate()
            except BaseException:
                pool, self._pool = self._pool, None
                pool.terminate()
                raise
        return self

    async def _migrate(self) -> None:
        async with self._open_pool().connection() as conn, conn.transaction():
            version = conn.get_server_version()
            if version.major < MIN_POSTGRES:
                raise OldPostgres(
                    f"PostgreSQL at {self.url_for_humans} is version {version.major}.{version.minor}; "
                    f"taskyard needs {MIN_POSTGRES} or later (the outbox records transaction ids as xid8)"
                )
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied BIGINT NOT NULL)"
            )
            applied = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
            schema.check_applied(applied, "postgres", self.url_for_humans)
            migrations = _queries.migrations("postgres")
            for version, name, statements in migrations:
                if version in applied:
                    continue
                for statement in statements:
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO schema_migrations VALUES ($1, $2, $3)", version, name, dates.now_ms()
                )
            if migrations[-1][0] >= _OUTBOX_LOG_SCHEMA:  # else (a test's old schema) nothing to re-date
                await self._rebase_outbox(conn)

    async def _rebase_outbox(self, conn: asyncpg.Connection) -> None:
        """Re-date the outbox if its transaction ids are ahead of this cluster's, before anything
        writes (`rebase_outbox`)."""
        redated = await conn.fetchval(self._queries["rebase_outbox"])
        if redated:
            log.warning(
                "the outbox's transaction ids are ahead of this PostgreSQL's (a database restored into "
                "another cluster): re-dated its %d events, each keeping whether it was published",
                redated,
            )

    async def _connect(self) -> asyncpg.Connection:
        """A new pooled connection: it has prepared nothing yet, and forgets it all when it closes."""
        conn = await asyncpg.connect(self._dsn)
        pid, prepared = conn.get_server_pid(), _Prepared()
        self._prepared[pid] = prepared

        def closed(_conn: object) -> None:
            if self._prepared.get(pid) is prepared:  # not a later connection's, with the same pid
                del self._prepared[pid]

        conn.add_termination_listener(closed)
        return conn

    def _session(self, conn: Any, *, unbegun: bool = False, reads_begin: bool = False) -> _Session:
        prepared = self._prepared.get(conn.get_server_pid())
        if prepared is None:  # every pooled connection passed `_connect`; else unsure: ask
            prepared = _Prepared()
            prepared.names = None
        queries, names, written_in = self._queries, self._names, self._written_in
        return _Session(conn, queries, names, prepared, written_in, unbegun=unbegun, reads_begin=reads_begin)

    def _open_pool(self) -> ConnectionPool:
        if self._pool is None or self._pool.closed:
            raise DatabaseUnavailable("the PostgreSQL storage is closed")
        return self._pool

    async def _acquire(self, pool: ConnectionPool) -> Any:
        conn = pool.take_idle()  # the common case: no wait, so no timer either
        if conn is not None:
            return conn
        wait = WAIT_TIMEOUT.get()
        try:
            with wrap_db_errors():
                if wait is None:
                    return await pool.acquire()
                try:
                    async with asyncio.timeout(wait):
                        return await pool.acquire()
                except TimeoutError:  # every connection stayed busy: refuse, rather than pile callers up
                    raise DatabaseBusy(
                        f"all {self._pool_size} database connections stayed busy for {wait} s"
                    ) from None
        except PoolClosed:
            raise DatabaseUnavailable("the PostgreSQL storage is closed") from None

    def _release(self, pool: ConnectionPool, conn: Any, *, broken: bool) -> None:
        """Hand `conn` back to the pool; close it instead if a failure may have broken it."""
        if broken:
            conn.terminate()  # the pool opens a fresh one when it is next needed
        pool.release(conn)

    def transaction(self) -> AbstractAsyncContextManager[Tx]:
        return self._transaction(reads_begin=True)

    def optimistic(self) -> AbstractAsyncContextManager[Tx]:
        return self._transaction(reads_begin=False)

    @asynccontextmanager
    async def _transaction(self, *, reads_begin: bool) -> AsyncIterator[Tx]:
        pool = self._open_pool()
        conn = await self._acquire(pool)
        session = self._session(conn, unbegun=True, reads_begin=reads_begin)
        broken = False
        try:
            try:
                signed = signed_request_to_record()
                if signed is not None:
                    await session.record_signed(signed)
                yield session
            except DatabaseUnavailable as exc:
                if isinstance(exc, TransactionRolledBack):  # the server's doing; the connection is fine
                    raise
                broken = True  # and COMMIT was not sent: the server can't have committed any of it
                raise TransactionRolledBack(f"lost the transaction before it committed: {exc}") from exc
            if conn.is_closed():
                broken = True
                raise TransactionRolledBack("the connection closed before the transaction could commit")
            try:
                # PostgreSQL delivers a notification sent twice in a transaction once: send it once.
                notes = list(dict.fromkeys(session.notes))
                deferred, names = session.take_deferred(committing=True)
                names += ["NOTIFY"] * len(notes)
                message = deferred + self._notify_sql(notes)
                if session.begun:
                    names.append("COMMIT")
                    message += "COMMIT"
                if names:
                    record(_trip_name(names), len(names))
                    with wrap_db_errors():
                        # Deferred writes and notifications ride in the same round trip as COMMIT,
                        # or, BEGIN unsent, are a transaction by themselves.
                        await session.send(message)
            except DatabaseUnavailable as exc:
                if isinstance(exc, TransactionRolledBack):  # the server answered: nothing committed
                    raise
                broken = True
                raise DatabaseUnavailable(
                    f"PostgreSQL failed during COMMIT; the transaction may have committed or not: {exc}"
                ) from exc
        except BaseException:
            if not broken:
                # If BEGIN did not finish (cancelled on its way), the server may begin the
                # transaction after this looks: roll back whatever the connection says, or the pool
                # finds the transaction open when it takes the connection back (and logs an error).
                await _roll_back(conn, unsure=session.begun)
            raise
        finally:
            self._release(pool, conn, broken=broken)
        session.deliver(self._dispatch)

    async def execute(self, name: str, *args: object, **params: object) -> int:
        # Outside a transaction block PostgreSQL commits each statement by itself. A connection lost
        # on the way leaves the outcome unknown: DatabaseUnavailable, not TransactionRolledBack.
        if signed_request_to_record() is not None:  # a signed request's write: recorded with it
            async with self.transaction() as tx:
                return await tx.execute(name, *args, **params)
        pool = self._open_pool()
        conn = await self._acquire(pool)
        broken = False
        try:
            return await self._session(conn).execute(name, *args, **params)
        except DatabaseUnavailable as exc:
            broken = not isinstance(exc, TransactionRolledBack)
            raise
        finally:
            self._release(pool, conn, broken=broken)

    def _notify_sql(self, notes: list[tuple[str, str]]) -> str:
        # NOTIFY, not SELECT pg_notify(): a utility statement, which the server does not plan.
        token = self._token
        notifies = (f"NOTIFY {_channel(name)}, {_literal(f'{token}:{payload}')}; " for name, payload in notes)
        return "".join(notifies)

    def _dispatch(self, channel: str, payload: str | None) -> None:
        for listener in self._listeners.get(channel, ()):
            listener(payload)

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[_Session]:
        pool = self._open_pool()
        conn = await self._acquire(pool)
        broken = False
        try:
            yield self._session(conn)
        except DatabaseUnavailable as exc:
            broken = not isinstance(exc, TransactionRolledBack)
            raise
        finally:
            self._release(pool, conn, broken=broken)

    # -------------------------------------------------------------------------------------------
    # Notifications.

    async def listen(self, channel: str, listener: Listener) -> None:
        async with self._listen_lock:
            new = channel not in self._listeners
            self._listeners.setdefault(channel, []).append(listener)
            if self._keeper is None:  # the first: connect now, so a database that is down says so
                try:
                    await self._connect_listener()
                except BaseException:
                    self._forget(channel, listener)
                    raise
                self._keeper = asyncio.create_task(self._keep_listening(), name="postgres-listener")
            elif new and self._listen_conn is not None:
                try:
                    with wrap_db_errors():
                        await self._listen_conn.add_listener(channel, self._on_notification)
                except DatabaseUnavailable:
                    self._listener_lost.set()  # reconnecting listens on every channel, this one too
            # else: the keeper is reconnecting, and will listen on this channel too

    def _forget(self, channel: str, listener: Listener) -> None:
        self._listeners[channel].remove(listener)
        if not self._listeners[channel]:
            del self._listeners[channel]

    async def _connect_listener(self) -> None:
        """Open the notification connection and listen on every channel (holding _listen_lock)."""
        with wrap_db_errors():
            conn = await asyncpg.connect(self._dsn, timeout=CONNECT_TIMEOUT)
        try:
            with wrap_db_errors():
                for channel in self._listeners:
                    await conn.add_listener(channel, self._on_notification)
        except BaseException:
            conn.terminate()
            raise
        self._listener_lost.clear()
        self._listen_conn = conn
        conn.add_termination_listener(self._on_listener_lost)
        if conn.is_closed():  # lost before it could tell us
            self._listener_lost.set()

    def _on_listener_lost(self, conn: object) -> None:
        if conn is self._listen_conn:
            self._listener_lost.set()

    async def _keep_listening(self) -> None:
        """Until the storage closes: notice when the notification connection is lost, bring it
        back, and tell every listener that it may have missed notifications meanwhile."""
        while True:
            try:
                why = await self._until_listener_lost()
                lost_at = time.monotonic()
                log.warning("lost the PostgreSQL notification connection (%s); reconnecting", why)
                await self._drop_listener()
                attempts = await self._reconnect_listener()
            except Exception:  # a bug; this task is all that brings notifications back: go on
                log.exception("keeping the PostgreSQL notification connection up failed; starting over")
                self._listener_lost.set()
                await asyncio.sleep(self.listener_backoff[1])
                continue
            log.info(
                "the PostgreSQL notification connection is back after %.1f s (%d attempts); "
                "waking every listener to look for what it missed",
                time.monotonic() - lost_at,
                attempts,
            )
            self._resync()

    def _resync(self) -> None:
        for channel, listeners in list(self._listeners.items()):
            for listener in list(listeners):
                try:
                    listener(None)
                except Exception:
                    log.exception("a listener on %s failed to look for missed notifications", channel)

    async def _until_listener_lost(self) -> str:
        """Wait until the notification connection is lost; answer why we think so."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.listener_probe_seconds):
                    await self._listener_lost.wait()
            conn = self._listen_conn
            if self._listener_lost.is_set() or conn is None or conn.is_closed():
                return "the connection closed"
            try:
                async with self._listen_lock:
                    await conn.fetchval("SELECT 1", timeout=self.listener_probe_seconds)
            except Exception as exc:  # whatever it is, the connection can't be trusted
                return f"the probe failed: {type(exc).__name__}: {exc}"

    async def _drop_listener(self) -> None:
        async with self._listen_lock:
            conn, self._listen_conn = self._listen_conn, None
        if conn is not None:
            conn.remove_termination_listener(self._on_listener_lost)
            conn.terminate()

    async def _reconnect_listener(self) -> int:
        """Connect again, however long it takes and whatever fails on the way; answer the attempts."""
        delay, longest = self.listener_backoff
        attempts = 0
        while True:
            attempts += 1
            try:
                async with self._listen_lock:
                    await self._connect_listener()
                return attempts
            except Exception as exc:  # CannotConnectNow, refused, auth, timeouts: all mean try again
                log.debug("reconnecting the notification connection failed: %r", exc)
            await asyncio.sleep(delay * random.uniform(0.75, 1.25))
            delay = min(delay * 2, longest)

    def _on_notification(self, _conn: object, _pid: int, channel: str, payload: str) -> None:
        token, _, body = payload.partition(":")
        if token != self._token:
            self._dispatch(channel, body)

    async def lead(self, job: str) -> bool:
        async with self._lead_lock:
            conn = self._lead_conn
            if conn is not None and conn.is_closed():
                if self._led:
                    log.warning(
                        "no longer leading %s: its database connection was lost", ", ".join(self._led)
                    )
                conn, self._lead_conn, self._led = None, None, set()
            if job in self._led:
                return True
            if self._pool is None:
                return False
            with wrap_db_errors():
                if conn is None:
                    conn = self._lead_conn = await asyncpg.connect(self._dsn, timeout=10)
                took = await conn.fetchval("SELECT pg_try_advisory_lock($1)", _lead_key(job), timeout=10)
            if took:
                self._led.add(job)
                log.info("this process now leads %s", job)
            return bool(took)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        lead_conn, self._lead_conn, self._led = self._lead_conn, None, set()
        if lead_conn is not None:
            try:
                await asyncio.wait_for(lead_conn.close(), timeout=5)
            except Exception:  # already broken: just drop it
                lead_conn.terminate()
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        conn, self._listen_conn = self._listen_conn, None
        if conn is not None:
            conn.remove_termination_listener(self._on_listener_lost)
            try:
                await asyncio.wait_for(conn.close(), timeout=5)
            except Exception:  # already broken: just drop it
                conn.terminate()
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), timeout=10)
            except TimeoutError:  # a caller still holds one: drop them all
                pool.terminate()


def _lead_key(job: str) -> int:
    """The advisory lock of `job`: in the taskyard range of keys, stable across processes."""
    return _LEAD_LOCKS + zlib.crc32(job.encode()) % 0x1_0000


async def _roll_back(conn: Any, *, unsure: bool = False) -> None:
    """ROLLBACK if the connection is in a transaction, or (`unsure`) might yet be: asyncpg sends it
    once a cancelled statement's outcome is in, and outside a transaction it changes nothing."""
    try:
        if unsure or conn.is_in_transaction():
            record("ROLLBACK")
            await conn.execute("ROLLBACK")
    except Exception:  # the connection is broken (a cancelled query): drop it, keep the error
        conn.terminate()


def _channel(name: str) -> str:
    """A notification channel's name, which NOTIFY takes as a bare identifier."""
    if _CHANNEL.fullmatch(name) is None:
        raise ValueError(f"a notification channel is a lowercase identifier, not {name!r}")
    return name


_CHANNEL = re.compile(r"[a-z_][a-z0-9_]*")


def _literal(text: str) -> str:
    """A SQL string literal, as an escape string so it reads the same whatever the server's settings."""
    if "\x00" in text:
        raise ValueError("PostgreSQL text cannot carry a NUL character (a notification, a deferred write)")
    return "E'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _mask(dsn: str) -> str:
    """The DSN with any password replaced, for logs and banners."""
    if "@" not in dsn or "://" not in dsn:
        return dsn
    scheme, rest = dsn.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}{':***' if ':' in creds else ''}@{host}"


async def open_postgres(dsn: str) -> PostgresStorage:
    """Connect to PostgreSQL at `dsn` and apply any pending migrations."""
    return await PostgresStorage(dsn).open()
