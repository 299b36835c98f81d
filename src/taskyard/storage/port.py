"""The storage port: what the services may ask of a database.

Services speak to storage through named queries (`storage/sql/*.sql`), run inside a
transaction (`Storage.transaction()`) or a read-only session (`Storage.reader()`). Each
adapter supplies every name; where the dialects differ an adapter's file overrides the
shared one. Service code never asks which database it is on.

Errors. An adapter raises only the port's errors for what the database did: `UniqueViolation`
(409), `DatabaseUnavailable` (503 with Retry-After: unreachable, restarting, out of connections,
connection lost) and its kind `TransactionRolledBack`; anything else it lets through is a bug.

Retries. `transaction()` can't run its block again by itself: the block is the caller's code.
A transaction that raises `TransactionRolledBack` is known to have committed nothing: the
database rolled it back (a deadlock, a serialization failure), or the connection failed before
COMMIT was sent. Such a transaction is safe to run again, and `run_in_transaction(storage,
body)` does so once, for callers whose `body` touches nothing but `tx` (the services' central
helpers use it). A connection that fails while COMMIT is on its way leaves the outcome
unknown: that is a plain `DatabaseUnavailable`, never retried here, and the client decides
(TaskCluster's clients repeat a 503; a claim lost that way expires like any other).

Replays. A Hawk-signed request may change something only once, whatever restarts and however
many processes share the database. Authentication puts the request's MAC in `SIGNED_REQUEST`
(`remember_signed_request`); the first transaction of that request's own task that sends
anything to the database also inserts the MAC into `seen_requests`, in the same transaction:
it commits with the request's writes or not at all. A MAC already there is a replay: the
transaction fails with `ReplayedRequest` (401) and commits nothing. On SQLite the insert runs
right after BEGIN; on PostgreSQL it is the last deferred write, in the message that commits
(with COMMIT, or with the deferred writes that are a transaction by themselves), so it costs no
round trip; and it must be last there, not first: a transaction takes its id at its first write,
and the outbox relay's commit order rests on that write coming after the reads it acts on
(`storage/postgres.py`, `record_signed`). Once that transaction has committed, the request's
later transactions insert nothing; a transaction run again (`run_in_transaction`,
`run_optimistic`) inserts it again. A transaction that sends nothing, a read (`reader()`) and a
task the request started (which inherits its context) insert nothing; `Storage.execute()` of
such a request runs as a transaction.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from taskyard.model.errors import AuthenticationFailed, RequestConflict, Unavailable

log = logging.getLogger(__name__)
Row = Mapping[str, Any]
Listener = Callable[[str | None], None]
"""Called with each notification's payload; with None when notifications may have been lost
(the connection that hears them was down a while): re-check whatever they would have said."""
T = TypeVar("T")
RETRY_AFTER_SECONDS = 2
WAIT_TIMEOUT: ContextVar[float | None] = ContextVar("taskyard_storage_wait_timeout", default=None)
"""Seconds the current caller waits for a database connection (SQLite: for the writer) before
`DatabaseBusy`; None (the default, background work's) waits as long as it takes. The API sets it
for each request it counts in flight (`api/shedding.py`), never for a long poll."""


@dataclass(eq=False)
class SignedRequest:
    """A Hawk-signed request accepted by authentication, to be recorded with its first transaction:
    its MAC, until when a replay of it could still be accepted (epoch ms: its timestamp plus the
    skew Hawk allows), and the task serving it."""

    mac: str
    expires: int
    task: weakref.ref[asyncio.Task[Any]] | None = field(repr=False)  # weak: the task holds this
    recorded: bool = False  # a transaction that inserted it has committed

    def mark_recorded(self) -> None:
        self.recorded = True


SIGNED_REQUEST: ContextVar[SignedRequest | None] = ContextVar("taskyard_signed_request", default=None)
"""The request this task serves, if Hawk signed it (see Replays above); set by authentication."""
REPLAYED_MESSAGE = (
    "Unauthorized: Replayed request: this signed request was accepted before; sign each request anew"
)


def remember_signed_request(mac: str | None, expires: int) -> None:
    """Record `mac` with the first transaction the current task sends (None: nothing to record)."""
    task = asyncio.current_task()
    owner = None if task is None else weakref.ref(task)
    SIGNED_REQUEST.set(None if mac is None else SignedRequest(mac, expires, owner))


def signed_request_to_record() -> SignedRequest | None:
    """The current task's signed request if no transaction of it has recorded it yet."""
    signed = SIGNED_REQUEST.get()
    if signed is None or signed.recorded or signed.task is None:
        return None
    owner = signed.task()
    return signed if owner is not None and owner is asyncio.current_task() else None


class ReplayedRequest(AuthenticationFailed):
    """The signed request was recorded before (`seen_requests`): nothing of it was done."""

    def __init__(self, message: str = REPLAYED_MESSAGE) -> None:
        super().__init__(message)


class UniqueViolation(RequestConflict):
    """A row with that key already exists."""


class DatabaseUnavailable(Unavailable):
    """The database could not be reached or is too busy; try again."""

    retry_after = RETRY_AFTER_SECONDS


class DatabaseBusy(DatabaseUnavailable):
    """Every database connection stayed busy longer than `WAIT_TIMEOUT`: the transaction was
    refused before it began, so nothing of it was done."""

    retry_after = 1


class TransactionRolledBack(DatabaseUnavailable):
    """The transaction committed nothing (rolled back by a deadlock or a serialization failure,
    or its connection lost before COMMIT was sent): running it again is safe."""


class RowMoved(TransactionRolledBack):
    """A checked write (`Tx.defer_checked`) found its row changed since the transaction read it:
    the transaction committed nothing. Read again and decide again (`run_optimistic`)."""


class Session(Protocol):
    """Runs named queries. In a transaction, everything commits or rolls back together."""

    async def execute(self, name: str, *args: object, **params: object) -> int:
        """Run a statement; answer the number of rows it changed. Arguments go by position or, for a
        query written with `:name` parameters, by keyword (every name, nothing else)."""

    async def executemany(self, name: str, rows: Sequence[Sequence[object]]) -> None:
        """Run a statement once per row of arguments."""

    async def fetch(self, name: str, *args: object, **params: object) -> list[Row]:
        """Run a query; answer every row."""

    async def fetchrow(self, name: str, *args: object, **params: object) -> Row | None:
        """Run a query; answer its first row or None."""

    async def fetchval(self, name: str, *args: object, **params: object) -> Any:
        """Run a query; answer the first column of its first row, or None."""


class Tx(Session, Protocol):
    async def defer(self, name: str, *args: object, **params: object) -> None:
        """Run a write whose outcome nobody reads (its row count, its errors at the call): at
        once on SQLite; on PostgreSQL it rides with the transaction's next statement or its
        COMMIT, in the same round trip, so every statement still sees it. An error it meets is
        raised there, and rolls the transaction back. Its arguments are None, bool, int or str (a
        list goes as JSON text, as `delete_resolutions` takes its ids)."""

    async def defer_many(self, name: str, rows: Sequence[Sequence[object]]) -> None:
        """`defer` once per row of arguments, in order."""

    async def defer_checked(self, name: str, *args: object, **params: object) -> None:
        """`defer` a write that must find its row as it was read (a version, a group still open):
        one that finds none fails the transaction with `RowMoved`, at once on SQLite, on
        PostgreSQL where the write is sent. Its query answers a row when it wrote; PostgreSQL's
        form, whose answer nobody reads, divides by that count instead."""

    def notify(self, channel: str, payload: str) -> None:
        """Tell every listener on `channel`, in this process and others, once this commits."""

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Call `callback` in this process once this transaction has committed."""


class Storage(Protocol):
    url_for_humans: str
    one_writer: bool
    """True when an open write transaction keeps every other writer of the database waiting
    (SQLite's one writer, which also means one process): such a transaction should not stay open
    across a wait on anything else, such as a broker's confirms."""

    def transaction(self) -> AbstractAsyncContextManager[Tx]:
        """Open a read-write transaction; it commits when the block exits normally."""

    def optimistic(self) -> AbstractAsyncContextManager[Tx]:
        """A transaction whose reads before its first write need no lock, because what it writes
        checks what they read (`Tx.defer_checked`) or cannot conflict. On PostgreSQL those reads
        run before BEGIN, and writes that are all deferred go in one message at the end, a
        transaction by itself: read, decide, write in two round trips. On SQLite, whose one writer
        is the lock, it is `transaction()`."""

    def reader(self) -> AbstractAsyncContextManager[Session]:
        """Open a read-only session; it never blocks writers."""

    async def execute(self, name: str, *args: object, **params: object) -> int:
        """Run one statement as a transaction of its own, without BEGIN and COMMIT (a statement is
        atomic by itself); answer the number of rows it changed. For a write that needs nothing
        else in its transaction: no notification, no after-commit callback, no other statement."""

    async def listen(self, channel: str, listener: Listener) -> None:
        """Call `listener(payload)` for every notification on `channel`, from any process, and
        `listener(None)` when some may have been missed."""

    async def lead(self, job: str) -> bool:
        """True while this process is the one, of every process on this database, that runs
        `job`: the first to ask becomes it and stays it until it closes or its connection is
        lost, when another takes over on its next ask."""

    async def close(self) -> None:
        """Release connections."""


Opener = Callable[[str], Awaitable[Storage]]


async def execute_alone(storage: Storage, name: str, *args: object, **params: object) -> int:
    """`storage.execute(...)`, run a second time if the first committed nothing through no fault of
    its own (`TransactionRolledBack`), as `run_in_transaction` does for a transaction."""
    try:
        return await storage.execute(name, *args, **params)
    except TransactionRolledBack as exc:
        log.info("running a statement again: %s", exc)
    return await storage.execute(name, *args, **params)


async def run_optimistic(storage: Storage, body: Callable[[Tx], Awaitable[T]], *, attempts: int = 8) -> T:
    """`body(tx)` in `storage.optimistic()`, run again while a checked write finds its row moved
    (`RowMoved`, a race lost to another writer), up to `attempts` times, and once more after
    another `TransactionRolledBack`. `body` must touch nothing but `tx`."""
    rolled_back = 0
    for _ in range(attempts):
        try:
            async with storage.optimistic() as tx:
                return await body(tx)
        except RowMoved as exc:
            log.debug("a race lost; reading again: %s", exc)
        except TransactionRolledBack as exc:
            rolled_back += 1
            if rolled_back > 1:
                raise
            log.info("running a transaction again: %s", exc)
    raise Unavailable(f"the rows this call writes are changing too often; try again ({attempts} attempts)")


async def run_in_transaction(storage: Storage, body: Callable[[Tx], Awaitable[T]]) -> T:
    """`body(tx)` in a transaction, run a second time if the first committed nothing through no
    fault of its own (`TransactionRolledBack`). `body` must touch nothing but `tx`: whatever
    else it did would be done twice."""
    try:
        async with storage.transaction() as tx:
            return await body(tx)
    except TransactionRolledBack as exc:
        log.info("running a transaction again: %s", exc)
    async with storage.transaction() as tx:
        return await body(tx)
