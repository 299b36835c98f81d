"""Roles: `assume:<roleId>` grants the role's scopes, expanded to a fixed point (docs/protocol.md, Scopes).

With `P = "assume:" + roleId`, a scope `s` makes a role apply when
* the roleId has no final `*` and `s` satisfies `P` (its scopes are granted literally), or
* the roleId ends in `*`, `Q = P[:-1]`, and `s` starts with `Q` (the parameter is the rest of `s`), or
  `s` ends with `*` and `Q` starts with `s[:-1]` (the parameter is `*`). `<..>` in a granted scope
  becomes the parameter; a parameter ending in `*` replaces `<..>` and everything after it.

`RoleSet` indexes the roles once (exact patterns, and `*` patterns by prefix) and memoizes expansions.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from taskyard.model import scopes

PARAM = "<..>"
ASSUME = "assume:"
# A role set with a cycle through a parameter (`a*` granting `assume:aa<..>`) would grow forever;
# stop at this many characters (about 1 + length per scope) of expanded scopes.
MAX_EXPANSION_SIZE = 20_000_000
_normalize = scopes.normalize
_MARK = "\x1a"  # stands for `<..>` while sorting, as the server's resolver does


class InvalidRole(ValueError):
    """A role's scopes cannot be used: an ambiguous parameter, or a dependency cycle."""


@dataclass(frozen=True)
class Role:
    """`assume:<role_id>` grants `scopes`; a `role_id` ending in `*` is parameterised by the rest."""

    role_id: str
    scopes: tuple[str, ...]

    @property
    def pattern(self) -> str:
        return ASSUME + self.role_id


def with_param(scope: str, param: str) -> str:
    """`scope` with its `<..>` filled by `param` (cut there when `param` ends with `*`)."""
    at = scope.find(PARAM)
    if at < 0:
        return scope
    if param.endswith("*"):
        return scope[:at] + param
    return scope[:at] + param + scope[at + len(PARAM) :]


def _starting_with(keys: list[str], prefix: str) -> Iterator[str]:
    """The members of the sorted `keys` that start with `prefix`."""
    for key in itertools.islice(keys, bisect.bisect_left(keys, prefix), None):
        if not key.startswith(prefix):
            return
        yield key


class RoleSet:
    """A set of roles indexed for expansion; build it once per version of the roles."""

    def __init__(self, roles: Iterable[Role], *, cache_size: int = 1024) -> None:
        self._granted: dict[str, tuple[str, ...]] = {}  # pattern -> its scopes
        self._order: dict[str, int] = {}  # pattern -> position among the roles given
        for role in roles:
            self._granted[role.pattern] = self._granted.get(role.pattern, ()) + tuple(role.scopes)
            self._order.setdefault(role.pattern, len(self._order))
        self._exact = sorted(p for p in self._granted if not p.endswith("*"))
        self._stems = sorted(p[:-1] for p in self._granted if p.endswith("*"))
        self._stem_set = set(self._stems)
        self._stem_lengths = sorted({len(stem) for stem in self._stems})
        self._expand_cached = functools.lru_cache(maxsize=cache_size)(self._expand_set)
        self._grants_cached = functools.lru_cache(maxsize=cache_size * 16)(self._grants)

    def __len__(self) -> int:
        return len(self._granted)

    def patterns(self) -> list[str]:
        """Every role's `assume:<roleId>`, in the order the roles were given."""
        return list(self._order)

    def expand(self, scopes: Iterable[str]) -> list[str]:
        """The normalized fixed point of `scopes` under the roles, the input included.

        Scopes no role applies to (a task's own `queue:resolve-task:<taskId>/<runId>`) only join
        the result, so they stay out of the memo's key: a new task's credentials then find
        `assume:anonymous` and the rest of their expansion there.
        """
        given = frozenset(scopes)
        inert = [scope for scope in given if not self.grants(scope)]
        if not inert:
            return list(self._expand_cached(given))
        expanded = self._expand_cached(given.difference(inert))
        return _normalize([*expanded, *inert])

    def matching(self, scope: str) -> Iterator[tuple[str, str | None]]:
        """Each role `scope` makes apply, as `(pattern, parameter)`; non-`*` roles get None."""
        kleene = scope.endswith("*")
        stem = scope[:-1] if kleene else scope
        if not kleene and scope in self._granted:
            yield scope, None
        # A `*` role whose stem is a proper prefix of `scope`, or `scope` itself when it has no kleene.
        limit = len(scope) - 2 if kleene else len(scope)
        for length in self._stem_lengths:
            if length > limit:
                break
            if scope[:length] in self._stem_set:
                yield scope[:length] + "*", scope[length:]
        if kleene:
            for pattern in _starting_with(self._exact, stem):
                yield pattern, None
            for found in _starting_with(self._stems, stem):
                yield found + "*", "*"

    def grants(self, scope: str) -> tuple[str, ...]:
        """The scopes the roles grant directly (one step) to a holder of `scope`."""
        return self._grants_cached(scope)

    def _grants(self, scope: str) -> tuple[str, ...]:
        granted: list[str] = []
        for pattern, param in self.matching(scope):
            if param is None:
                granted.extend(self._granted[pattern])
            else:
                granted.extend(with_param(s, param) for s in self._granted[pattern])
        return tuple(granted)

    def _expand_set(self, start: frozenset[str]) -> tuple[str, ...]:
        seen = set(start)
        todo = list(start)
        size = 0
        while todo:
            for scope in self.grants(todo.pop()):
                if scope not in seen:
                    seen.add(scope)
                    todo.append(scope)
                    size += 1 + len(scope)
            if size > MAX_EXPANSION_SIZE:
                raise InvalidRole("role expansion does not end: do the roles have a dependency cycle?")
        return tuple(scopes.normalize(seen))

    def dependencies(self, pattern: str) -> list[str]:
        """The roles that role `pattern` makes apply, taking `<..>` and what follows it as `*`.

        In the order the server's resolver visits them, so that both report the same cycle.
        """
        granted = self._granted[pattern]
        if pattern.endswith("*"):
            plain = scopes.normalize(s for s in granted if PARAM not in s)
            probes = plain + scopes.normalize(with_param(s, "*") for s in granted if PARAM in s)
        else:
            probes = scopes.normalize(granted)
        found: dict[str, None] = {}
        for probe in probes:
            matched = sorted((p for p, _ in self.matching(probe)), key=lambda p: str(self._order[p]))
            found.update(dict.fromkeys(matched))
        return list(found)


def expand(scopes: Iterable[str], roles: Sequence[Role]) -> list[str]:
    """Expand `scopes` under `roles` (a convenience: keep a `RoleSet` when the roles are reused)."""
    return _role_set(tuple(roles)).expand(scopes)


@functools.lru_cache(maxsize=8)
def _role_set(roles: tuple[Role, ...]) -> RoleSet:
    return RoleSet(roles)


# ---------------------------------------------------------------------------------------------------
# Validation


def validate_role(role: Role) -> None:
    """Raise InvalidRole if a scope of a `*` role has two `<..>`, or ends in `*<..>`."""
    if not role.role_id.endswith("*"):
        return  # `<..>` is literal in the scopes of other roles
    marked = scopes.normalize(s.replace(PARAM, _MARK, 1) for s in role.scopes if PARAM in s)
    for scope in marked:
        shown = scope.replace(_MARK, PARAM)
        if PARAM in scope:
            raise InvalidRole(f"parameterized scope '{shown}' contains multiple '<..>'")
        if scope.endswith("*" + _MARK):
            raise InvalidRole(
                f"parameterized scope '{shown}' ends with '*<..>' which implies an ambiguous kleene"
            )


def find_cycle(roles: Sequence[Role] | RoleSet) -> list[str] | None:
    """A dependency cycle among the roles as a path of patterns (first repeated last), or None."""
    role_set = roles if isinstance(roles, RoleSet) else RoleSet(roles)
    done: set[str] = set()
    for pattern in role_set.patterns():
        cycle = _walk(role_set, pattern, done)
        if cycle is not None:
            return cycle
    return None


def _walk(role_set: RoleSet, start: str, done: set[str]) -> list[str] | None:
    """Depth-first from `start` (iterative: role chains can be long), marking finished roles done."""
    if start in done:
        return None
    stack: list[tuple[str, Iterator[str]]] = [(start, iter(role_set.dependencies(start)))]
    depth = {start: 0}
    while stack:
        pattern, deps = stack[-1]
        dep = next(deps, None)
        if dep is None:
            stack.pop()
            del depth[pattern]
            done.add(pattern)
        elif dep in depth:
            return [p for p, _ in stack[depth[dep] :]] + [dep]
        elif dep not in done:
            depth[dep] = len(stack)
            stack.append((dep, iter(role_set.dependencies(dep))))
    return None


def cycle_message(path: Sequence[str]) -> str:
    """The server's message for a dependency cycle."""
    return "Roles may not contain dependency cycles, found: " + " -> ".join(f"'{p}'" for p in path)
