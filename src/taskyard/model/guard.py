"""The one way a route's scopes are checked: a `Guard`, called with the values its template needs.

A route declares its scope template. The API checks it with `Call.authorize(**values)`, which
is a `Guard`: before the handler when the path and the route's declared body fields give every
value, otherwise inside the service, which calls the guard with the stored record's fields
(a task's schedulerId, a group's, a client's current scopes) right after it loads the record, in
its transaction. A missing record is therefore a 404 before it can be a 403, and the record is
read once.

Callers that are the deployment itself (tests, set-up, background jobs) pass `ALLOW_ALL`.
"""

from __future__ import annotations

from typing import Protocol


class Guard(Protocol):
    """Raises InsufficientScopes unless the caller holds the route's scopes rendered with `values`."""

    def __call__(self, **values: object) -> None: ...


def _allow_all(**values: object) -> None:
    """No check: the caller is the deployment itself."""


ALLOW_ALL: Guard = _allow_all
