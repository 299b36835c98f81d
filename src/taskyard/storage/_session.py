"""What the two adapters' sessions share: the connection and the named queries they run on, and a
transaction's notifications and after-commit callbacks, held until it commits.

Running a query is each adapter's own: the drivers answer differently (a status tag, a cursor),
and SQLite takes list parameters as JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

C = TypeVar("C")


class BaseSession(Generic[C]):
    def __init__(self, conn: C, queries: dict[str, str], names: Mapping[str, tuple[str, ...]]) -> None:
        self._conn = conn
        self._queries = queries
        self._names = names
        self._notes: list[tuple[str, str]] = []
        self._callbacks: list[Callable[[], None]] = []

    def notify(self, channel: str, payload: str) -> None:
        self._notes.append((channel, payload))

    def after_commit(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    @property
    def notes(self) -> list[tuple[str, str]]:
        """The notifications to send once the transaction commits: (channel, payload)."""
        return self._notes

    def deliver(self, dispatch: Callable[[str, str], None]) -> None:
        """Once committed: hand each notification to `dispatch`, then call each callback."""
        for channel, payload in self._notes:
            dispatch(channel, payload)
        for callback in self._callbacks:
            callback()

    def bind(self, name: str, args: tuple[object, ...], params: Mapping[str, object]) -> tuple[object, ...]:
        """The positional arguments of query `name`, given in order or, for a query written with
        `:name` parameters, by keyword; TypeError for a mix, a missing or an unknown name."""
        if not params:
            return args
        order = self._names.get(name)
        if order is None or args:
            raise TypeError(f"query {name} takes its arguments by position, not by keyword")
        if len(params) != len(order) or not all(key in params for key in order):
            raise TypeError(f"query {name} takes {', '.join(order)}; given {', '.join(sorted(params))}")
        return tuple(params[key] for key in order)
