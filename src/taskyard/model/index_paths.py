"""The index's rules, pure: index paths, namespaces, ranks, and what a completed task asks to be
indexed under (TaskCluster's index service).

An index path is dot-separated segments of `[a-zA-Z0-9_!~*'()%-]`, at most 255 characters. It is
split at its last dot: the namespace is everything before it (`""` for a path with no dot), the
name the last segment. Every prefix of a namespace is itself a namespace (`a`, `a.b` for `a.b.c`),
listed under its parent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

from taskyard.model import schema
from taskyard.model.errors import InputError
from taskyard.model.types import JSONObject

SEGMENT = r"[a-zA-Z0-9_!~*'()%-]+"
MAX_PATH = 255
PATH = rf"^({SEGMENT}\.)*{SEGMENT}$"
# The path parameters: a full index path, and a namespace to list (empty: the root).
INDEX_PATH_PARAM = rf"^(?=.{{1,{MAX_PATH}}}$)({SEGMENT}\.)*{SEGMENT}$"
NAMESPACE_PARAM = rf"^(?=.{{0,{MAX_PATH}}}$)(({SEGMENT}\.)*{SEGMENT})?$"
RANK_MIN, RANK_MAX = -(2**31), 2**31 - 1  # TaskCluster stores a rank as a 32-bit integer
DAY_MS = 24 * 3600 * 1000
YEAR_MS = 365 * DAY_MS
ROUTE_PREFIX = "index."
_PATH = re.compile(PATH)


def is_path(text: str) -> bool:
    """Whether `text` is an index path (syntax and length)."""
    return len(text) <= MAX_PATH and _PATH.fullmatch(text) is not None


def split(path: str) -> tuple[str, str]:
    """(namespace, name) of an index path: split at its last dot."""
    namespace, _, name = path.rpartition(".")
    return namespace, name


def join(namespace: str, name: str) -> str:
    """The full path of (namespace, name); no dot when either is empty."""
    return f"{namespace}.{name}" if namespace and name else namespace or name


def namespace_levels(namespace: str) -> list[tuple[str, str]]:
    """The (parent, name) rows a namespace stands for, root first: `a.b` is ("", "a"), ("a", "b")."""
    if not namespace:
        return []
    parts = namespace.split(".")
    return [(".".join(parts[:i]), parts[i]) for i in range(len(parts))]


def namespace_expiry(expires: int) -> int:
    """When a namespace holding an entry that expires at `expires` (epoch ms) expires: midnight
    (UTC) after that day, so that indexing many tasks a day rewrites a namespace once a day."""
    return (expires // DAY_MS + 1) * DAY_MS


def check_rank(value: object, field: str = "rank") -> int:
    """A rank as TaskCluster stores it: a whole number in 32 bits (5.0 is 5). 400 naming `field`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{field} must be a number")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise InputError(f"{field} must be a whole number (got {value!r})")
    if not RANK_MIN <= value <= RANK_MAX:
        raise InputError(f"{field} must be from {RANK_MIN} to {RANK_MAX} (got {value!r})")
    return int(value)


class IndexedTask(TypedDict):
    """An index entry as TaskCluster answers it: `namespace` is the entry's full path."""

    namespace: str
    taskId: str
    rank: int
    data: JSONObject
    expires: str


@dataclass(frozen=True)
class Entry:
    """What to store under an index path: the task, its rank, its data and when it expires."""

    task_id: str
    rank: int
    data: JSONObject
    expires: int  # epoch ms


def paths_of_routes(routes: object) -> list[str]:
    """The index paths a task's routes ask for: `index.<path>`, for each valid path, in order,
    each once. Other routes (and invalid paths) are not the index's."""
    if not isinstance(routes, list):
        return []
    found: list[str] = []
    for route in routes:
        if isinstance(route, str) and route.startswith(ROUTE_PREFIX):
            path = route[len(ROUTE_PREFIX) :]
            if is_path(path) and path not in found:
                found.append(path)
    return found


def entry_of_task(
    task_id: str, definition: Mapping[str, object], *, expires: int, created: int
) -> Entry | None:
    """What a completed task is indexed as, from its `extra.index` (`rank`, default 0; `expires`,
    default the task's; `data`, default {}); None when those are unusable (a rank that is not a
    number, data that is not an object, an expiry that is not a date): TaskCluster then indexes
    nothing, and says nothing either."""
    extra = definition.get("extra")
    options: object = extra.get("index", {}) if isinstance(extra, dict) else {}
    if not isinstance(options, dict):
        options = {}
    rank, data, when = options.get("rank", 0), options.get("data", {}), options.get("expires")
    try:
        rank = check_rank(rank)
    except InputError:
        return None
    if not isinstance(data, dict):
        return None
    until = expires or created + YEAR_MS
    if when is not None:
        if not isinstance(when, str):
            return None
        try:
            until = schema.to_millis(when)
        except ValueError:
            return None
    return Entry(task_id, rank, data, until)
