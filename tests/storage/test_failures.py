"""How driver errors reach the services, and which transactions are run again (no server needed).

Every exception asyncpg or sqlite3 can raise for an unavailable database must become the port's
`DatabaseUnavailable` (503), never pass through as a 500. A transaction is run again only when
it is known to have committed nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import asyncpg
import pytest

from taskyard.model.errors import TaskyardError
from taskyard.storage import postgres, sqlite
from taskyard.storage.port import (
    DatabaseUnavailable,
    TransactionRolledBack,
    Tx,
    UniqueViolation,
    run_in_transaction,
)

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
ROLLED_BACK = [
    asyncpg.exceptions.SerializationError("could not serialize access due to concurrent update"),
    asyncpg.exceptions.DeadlockDetectedError("deadlock detected"),
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


@pytest.mark.parametrize("exc", ROLLED_BACK, ids=lambda e: type(e).__name__)
def test_postgres_rollbacks_may_be_run_again(exc: BaseException) -> None:
    raised = _raised(exc, postgres.wrap_db_errors)
    assert type(raised) is TransactionRolledBack
    assert raised.status == 503


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


# ---------------------------------------------------------------------------------------------
# The retry policy of PostgresStorage.transaction() and run_in_transaction(), on a scripted pool.


class FakeConn:
    """A pooled connection whose statements fail as scripted: {statement prefix or 'COMMIT': error}."""

    def __init__(self, failures: dict[str, BaseException] | None = None) -> None:
        self.failures = dict(failures or {})
        self.statements: list[str] = []
        self.terminated = False
        self.in_transaction = False

    async def execute(self, sql: str, *args: object) -> str:
        self.statements.append(sql)
        key = "COMMIT" if sql.endswith("COMMIT") else sql.split()[0].rstrip(";")
        failure = self.failures.pop(key, None)
        if failure is not None:
            raise failure
        if key == "BEGIN":
            self.in_transaction = True
        elif key in ("COMMIT", "ROLLBACK"):
            self.in_transaction = False
        return "INSERT 0 1"

    def is_closed(self) -> bool:
        return self.terminated

    def get_server_pid(self) -> int:
        return id(self)

    def is_in_transaction(self) -> bool:
        return self.in_transaction

    def terminate(self) -> None:
        self.terminated = True


class FakePool:
    def __init__(self, conns: Sequence[FakeConn]) -> None:
        self.free = list(conns)
        self.released: list[FakeConn] = []

    closed = False

    def take_idle(self) -> FakeConn | None:
        return None

    async def acquire(self) -> FakeConn:
        return self.free.pop(0)

    def release(self, conn: FakeConn) -> None:
        self.released.append(conn)


def scripted(*conns: FakeConn) -> postgres.PostgresStorage:
    storage = postgres.PostgresStorage("postgresql://nobody@127.0.0.1:1/none")
    storage._pool = FakePool(conns)  # type: ignore[assignment]
    return storage


class Body:
    """A transaction body that counts its runs and does one statement."""

    def __init__(self) -> None:
        self.runs = 0

    async def __call__(self, tx: Tx) -> str:
        self.runs += 1
        await tx.execute("insert_group", "g", "-", 1)
        return "done"


LOST = asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")


@pytest.mark.parametrize(
    "where, error",
    [
        ("BEGIN", asyncpg.InternalClientError("cannot switch to state 15")),
        ("BEGIN", asyncpg.exceptions.AdminShutdownError("terminating connection")),
        ("INSERT", asyncpg.InterfaceError("connection has been released back to the pool")),
        ("INSERT", LOST),
    ],
)
async def test_a_transaction_lost_before_commit_is_run_again_on_a_new_connection(
    where: str, error: BaseException
) -> None:
    broken, fresh = FakeConn({where: error}), FakeConn()
    body = Body()
    assert await run_in_transaction(scripted(broken, fresh), body) == "done"
    assert body.runs == 2  # BEGIN goes with the body's first statement
    assert broken.terminated, "a connection that failed must not go back to the pool as it is"
    assert not any(s.endswith("COMMIT") for s in broken.statements)
    assert fresh.statements[-1].endswith("COMMIT") and not fresh.terminated


@pytest.mark.parametrize("error", ROLLED_BACK, ids=lambda e: type(e).__name__)
async def test_a_transaction_the_server_rolled_back_is_run_again(error: BaseException) -> None:
    first, second = FakeConn({"COMMIT": error}), FakeConn()
    body = Body()
    assert await run_in_transaction(scripted(first, second), body) == "done"
    assert body.runs == 2
    assert first.statements[-1] == "ROLLBACK" and not first.terminated  # the connection is fine


async def test_a_connection_lost_during_commit_is_not_run_again() -> None:
    """COMMIT may have reached the server: running the body again could apply it twice."""
    first, second = FakeConn({"COMMIT": LOST}), FakeConn()
    body = Body()
    with pytest.raises(DatabaseUnavailable) as raised:
        await run_in_transaction(scripted(first, second), body)
    assert type(raised.value) is DatabaseUnavailable
    assert "may have committed" in str(raised.value)
    assert body.runs == 1 and first.terminated and second.statements == []


async def test_run_again_only_once() -> None:
    conns = [FakeConn({"INSERT": LOST}), FakeConn({"INSERT": LOST}), FakeConn()]
    body = Body()
    with pytest.raises(TransactionRolledBack):
        await run_in_transaction(scripted(*conns), body)
    assert body.runs == 2 and conns[2].statements == []


async def test_a_plain_transaction_says_what_it_lost() -> None:
    """Without run_in_transaction the caller gets a 503 that says the transaction may be run again."""
    storage = scripted(FakeConn({"INSERT": LOST}))
    with pytest.raises(TransactionRolledBack):
        async with storage.transaction() as tx:
            await tx.execute("insert_group", "g", "-", 1)


async def test_errors_of_the_body_are_not_retried() -> None:
    first = FakeConn()
    runs = 0

    async def body(tx: Tx) -> None:
        nonlocal runs
        runs += 1
        raise TaskyardError("a bug")

    with pytest.raises(TaskyardError):
        await run_in_transaction(scripted(first), body)
    assert runs == 1 and first.statements == []  # BEGIN waits for a statement: nothing to undo


async def test_a_closed_storage_is_unavailable() -> None:
    storage = postgres.PostgresStorage("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(DatabaseUnavailable):
        async with storage.reader():
            pass
    with pytest.raises(DatabaseUnavailable):
        async with storage.transaction():
            pass
