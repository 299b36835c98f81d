"""Counting the statements and round trips a piece of code makes, for tests that hold budgets.

`with counting() as tally:` counts what both adapters run in this context (this task, and tasks
it starts): a background loop started elsewhere is not counted. When nothing counts, each
statement costs the adapter one context-variable lookup.

What counts as one statement: every SQL statement the database runs, BEGIN and COMMIT included,
each `NOTIFY` that rides with COMMIT, and each row of an `executemany`. What counts as one
round trip: one wait for the database, which on PostgreSQL is one exchange with the server (a
cached prepared statement's bind and execute; a COMMIT together with its notifications and the
deferred writes before it; deferred writes sent ahead of a statement; a whole `executemany`, which
asyncpg pipelines) and on SQLite one call into SQLite (the writer's run on the event loop, a
reader's are one hop to its thread). A statement's first run on a PostgreSQL connection costs one
more trip to prepare it, which is not counted: asyncpg then keeps it prepared.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class Tally:
    """What was run: the totals, and each round trip's statements by name (BEGIN, COMMIT, a
    named query, `notify` for a notification sent with COMMIT)."""

    statements: int = 0
    round_trips: int = 0
    trips: list[str] = field(default_factory=list)

    def add(self, name: str, statements: int) -> None:
        self.statements += statements
        self.round_trips += 1
        self.trips.append(name if statements == 1 else f"{name} x{statements}")


_TALLY: ContextVar[Tally | None] = ContextVar("taskyard_storage_tally", default=None)


def record(name: str, statements: int = 1) -> None:
    """Count one round trip of `statements` statements, if something is counting."""
    tally = _TALLY.get()
    if tally is not None:
        tally.add(name, statements)


@contextmanager
def counting() -> Iterator[Tally]:
    """Count the statements run in this context until the block ends."""
    tally = Tally()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)
