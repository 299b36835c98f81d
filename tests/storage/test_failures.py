"""How driver errors reach the services, and which transactions are run again (no server needed).

Every exception asyncpg or sqlite3 can raise for an unavailable database must become the port's
`DatabaseUnavailable` (503), never pass through as a 500.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import asyncpg
import pytest

from taskyard.storage import postgres, sqlite
from taskyard.storage.port import DatabaseUnavailable, UniqueViolation

UNAVAILABLE = [
    asyncpg.exceptions.CannotConnectNowError("the database system is shutting down"),
    asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
    asyncpg.exceptions.CrashShutdownError("terminating connection because of crash of another process"),
    asyncpg.exceptions.QueryCanceledError("canceling statement due to statement timeout"),
    asyncpg.exceptions.TooManyConnectionsError("sorry, too many clients already"),
    asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    asyncpg.exceptions.ConnectionFailureError("connection failure"),
    asyncpg.exceptions.PostgresConnectionError("connection exception"),
    asyncpg.exceptions.ReadOnlySQLTransactionError("cannot execute INSERT in a read-only transaction"),
    asyncpg.exceptions.DiskFullError("could not extend file"),
    asyncpg.InterfaceError("cannot call Connection.fetch(): connection has been released back to the pool"),
    asyncpg.InterfaceError("connection is closed"),
    asyncpg.InternalClientError("cannot switch to state 15; another operation (2) is in progress"),
    asyncpg.exceptions.ProtocolError("unexpected message"),
    ConnectionRefusedError(111, "Connect call failed"),
    ConnectionResetError(104, "Connection reset by peer"),
    TimeoutError(),
]
BUGS = [  # a mistake of ours: a 500 with an incident id, not "try again"
    asyncpg.exceptions.UndefinedTableError('relation "nope" does not exist'),
    asyncpg.exceptions.PostgresSyntaxError("syntax error"),
    asyncpg.exceptions.NotNullViolationError("null value in column"),
    asyncpg.exceptions.DataError("invalid input"),
    asyncpg.exceptions.ClientConfigurationError("bad option"),
]


def _raised(exc: BaseException, wrap: Callable[[], object]) -> BaseException:
    try:
        with wrap():
            raise exc
    except BaseException as raised:
        return raised
    raise AssertionError("nothing raised")


@pytest.mark.parametrize("exc", UNAVAILABLE, ids=lambda e: type(e).__name__)
def test_postgres_unavailable_errors_are_503(exc: BaseException) -> None:
    raised = _raised(exc, postgres.wrap_db_errors)
    assert type(raised) is DatabaseUnavailable
    assert raised.__cause__ is exc
    assert raised.status == 503 and raised.retry_after is not None


@pytest.mark.parametrize("exc", BUGS, ids=lambda e: type(e).__name__)
def test_postgres_bugs_pass_through(exc: BaseException) -> None:
    assert _raised(exc, postgres.wrap_db_errors) is exc


def test_postgres_unique_violation_is_a_conflict() -> None:
    exc = asyncpg.exceptions.UniqueViolationError("duplicate key")
    assert type(_raised(exc, postgres.wrap_db_errors)) is UniqueViolation


def test_every_asyncpg_connection_or_availability_class_is_classified() -> None:
    """Each exception class asyncpg defines for SQLSTATE classes 08, 53, 57 and 58 is a 503."""
    classes = [
        cls
        for cls in vars(asyncpg.exceptions).values()
        if isinstance(cls, type)
        and issubclass(cls, asyncpg.PostgresError)
        and str(getattr(cls, "sqlstate", ""))[:2] in ("08", "53", "57", "58")
    ]
    assert len(classes) > 15
    for cls in classes:
        assert postgres.classify(cls("x")) is DatabaseUnavailable, cls


def test_sqlite_busy_is_unavailable(tmp_path: Path) -> None:
    """A real SQLITE_BUSY: another connection holds the write lock past the busy timeout."""
    path = tmp_path / "busy.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    waiter = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        holder.execute("BEGIN IMMEDIATE")
        raised = _raised_by(lambda: waiter.execute("BEGIN IMMEDIATE"))
        assert type(raised) is DatabaseUnavailable, raised
        assert "locked" in str(raised)
    finally:
        holder.close()
        waiter.close()


def test_sqlite_bugs_and_conflicts(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.sqlite3", isolation_level=None)
    try:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT NOT NULL, u TEXT UNIQUE)")
        conn.execute("INSERT INTO t VALUES ('a', 'x', 'u')")
        for duplicate in ("INSERT INTO t VALUES ('a', 'y', 'v')", "INSERT INTO t VALUES ('b', 'y', 'u')"):
            assert type(_raised_by(lambda sql=duplicate: conn.execute(sql))) is UniqueViolation
        # A bug is a bug (500), not "the database is unavailable".
        assert type(_raised_by(lambda: conn.execute("SELEC 1"))) is sqlite3.OperationalError
        assert type(_raised_by(lambda: conn.execute("SELECT * FROM nope"))) is sqlite3.OperationalError
        assert type(_raised_by(lambda: conn.execute("INSERT INTO t VALUES ('c', NULL, 'w')"))) is (
            sqlite3.IntegrityError
        )
    finally:
        conn.close()


def _raised_by(statement: Callable[[], object]) -> BaseException:
    try:
        with sqlite.wrap_db_errors():
            statement()
    except BaseException as raised:
        return raised
    raise AssertionError("nothing raised")


async def test_a_closed_storage_is_unavailable() -> None:
    storage = postgres.PostgresStorage("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(DatabaseUnavailable):
        async with storage.reader():
            pass
    with pytest.raises(DatabaseUnavailable):
        async with storage.transaction():
            pass
