"""The storage port: what the services may ask of a database.

Services speak to storage through named queries (`storage/sql/*.sql`), run inside a
transaction (`Storage.transaction()`) or a read-only session (`Storage.reader()`). Each
adapter supplies every name; where the dialects differ an adapter's file overrides the
shared one. Service code never asks which database it is on.

Errors. An adapter raises only the port's errors for what the database did: `UniqueViolation`
(409) and `DatabaseUnavailable` (503 with Retry-After: unreachable, restarting, out of
connections, connection lost); anything else it lets through is a bug.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from taskyard.model.errors import RequestConflict, Unavailable

Row = Mapping[str, Any]
Listener = Callable[[str], None]
RETRY_AFTER_SECONDS = 2


class UniqueViolation(RequestConflict):
    """A row with that key already exists."""


class DatabaseUnavailable(Unavailable):
    """The database could not be reached or is too busy; try again."""

    retry_after = RETRY_AFTER_SECONDS


class Session(Protocol):
    """Runs named queries. In a transaction, everything commits or rolls back together."""

    async def execute(self, name: str, *args: object) -> int:
        """Run a statement; answer the number of rows it changed."""

    async def executemany(self, name: str, rows: Sequence[Sequence[object]]) -> None:
        """Run a statement once per row of arguments."""

    async def fetch(self, name: str, *args: object) -> list[Row]:
        """Run a query; answer every row."""

    async def fetchrow(self, name: str, *args: object) -> Row | None:
        """Run a query; answer its first row or None."""

    async def fetchval(self, name: str, *args: object) -> Any:
        """Run a query; answer the first column of its first row, or None."""


class Tx(Session, Protocol):
    def notify(self, channel: str, payload: str) -> None:
        """Tell every listener on `channel`, in this process and others, once this commits."""

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Call `callback` in this process once this transaction has committed."""


class Storage(Protocol):
    url_for_humans: str

    def transaction(self) -> AbstractAsyncContextManager[Tx]:
        """Open a read-write transaction; it commits when the block exits normally."""

    def reader(self) -> AbstractAsyncContextManager[Session]:
        """Open a read-only session; it never blocks writers."""

    async def listen(self, channel: str, listener: Listener) -> None:
        """Call `listener(payload)` for every notification on `channel`, from any process."""

    async def close(self) -> None:
        """Release connections."""


Opener = Callable[[str], Awaitable[Storage]]
