"""Finding a request's route: Starlette's router, with the routes indexed by the start of their path.

Starlette tries every route's pattern in turn, ~250 of them here. `IndexedRouter` tries only the
routes that could match: those whose literal start (the path before its first `{`, cut after at
most `DEPTH` slashes) the request's path begins with, in the app's order. Any other kind of route
is tried for every path. The first full match, else the first route with the path but another
method (405), else 404: the same answers as the linear scan, since every route left out could not
have matched at all.

`RawPathRoute` matches the path as sent (`%2F` kept), so it is indexed by the raw path.
"""

from __future__ import annotations

import heapq
from typing import Any
from urllib.parse import unquote

from starlette._utils import get_route_path
from starlette.routing import BaseRoute, Match, Mount, Router
from starlette.routing import Route as StarletteRoute
from starlette.types import Receive, Scope, Send

DEPTH = 6  # slashes of a route's literal start used as its key: `/api/queue/v1/task/` has 5


class RawPathRoute(StarletteRoute):
    """A route matched against the path as sent (`%2F` kept), its parameters decoded afterwards.

    Client and role ids hold `/`. Matched on the decoded path, `POST /clients/a%2Freset` (updateClient
    of `a/reset`) would look like resetAccessToken of `a`; an unencoded `/` still works as one.
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        path = raw_route_path(scope)
        if scope["type"] != "http" or path is None:
            return super().matches(scope)
        match, child = super().matches({**scope, "path": path, "root_path": ""})
        if match is not Match.NONE:
            params = child["path_params"]
            child["path_params"] = {k: unquote(v) if isinstance(v, str) else v for k, v in params.items()}
        return match, child


def raw_route_path(scope: Scope) -> str | None:
    """The path as sent, without the app's root path; None if the server gave no raw path."""
    raw = scope.get("raw_path")
    if raw is None:
        return None
    path: str = raw.decode("latin-1")
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def _key(path: str) -> str:
    """`path` up to and including its DEPTH-th slash, or its last one before that."""
    end = -1
    for _ in range(DEPTH):
        found = path.find("/", end + 1)
        if found < 0:
            break
        end = found
    return path[: end + 1]


def _prefixes(path: str) -> list[str]:
    """Every start of `path` ending in a slash, up to DEPTH of them: the keys it may match."""
    found, end = [], -1
    for _ in range(DEPTH):
        end = path.find("/", end + 1)
        if end < 0:
            break
        found.append(path[: end + 1])
    return found


def _start(route: BaseRoute) -> str:
    """The literal start of the paths `route` may match ("": any path). A mount at `/p` takes the
    paths under `/p/` only: keyed by that, a request elsewhere under `/` does not try it."""
    if isinstance(route, Mount):
        return (route.path + "/").split("{", 1)[0]
    return route.path.split("{", 1)[0] if isinstance(route, StarletteRoute) else ""


class _Index:
    """The routes by key (position in the app's list kept), for decoded and for raw paths."""

    def __init__(self, routes: list[BaseRoute]) -> None:
        self.routes, self.count = routes, len(routes)
        self.decoded: dict[str, list[tuple[int, BaseRoute]]] = {}
        self.raw: dict[str, list[tuple[int, BaseRoute]]] = {}
        self.always: list[tuple[int, BaseRoute]] = []
        self.merged: dict[tuple[tuple[str, ...], tuple[str, ...]], list[BaseRoute]] = {}  # by keys found
        for i, route in enumerate(routes):
            key = _key(_start(route))
            if not key:  # another kind of route, or one mounted at the root
                self.always.append((i, route))
                continue
            table = self.raw if isinstance(route, RawPathRoute) else self.decoded
            table.setdefault(key, []).append((i, route))

    def current(self, routes: list[BaseRoute]) -> bool:
        return routes is self.routes and len(routes) == self.count

    def candidates(self, scope: Scope) -> list[BaseRoute]:
        """The routes that could match, in the app's order; merged once per set of keys found
        (a set of the routes' own keys, so there are only so many)."""
        path = get_route_path(scope)
        decoded = tuple(p for p in _prefixes(path) if p in self.decoded)
        raw: tuple[str, ...] = ()
        if self.raw:
            sent = raw_route_path(scope)
            raw = tuple(p for p in _prefixes(path if sent is None else sent) if p in self.raw)
        found = self.merged.get((decoded, raw))
        if found is None:
            lists = [self.always] if self.always else []
            lists += [self.decoded[p] for p in decoded] + [self.raw[p] for p in raw]
            merged = heapq.merge(*lists, key=lambda item: item[0])
            found = self.merged[(decoded, raw)] = [route for _, route in merged]
        return found


class IndexedRouter(Router):
    """Starlette's router trying only the routes that could match (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._index: _Index | None = None

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.redirect_slashes:  # redirects: Starlette's own scan
            await super().app(scope, receive, send)
            return
        scope.setdefault("router", self)
        found = self.find(scope)
        if found is None:
            await self.default(scope, receive, send)
            return
        route, child_scope = found
        scope["route"] = route
        scope.update(child_scope)
        await route.handle(scope, receive, send)

    def find(self, scope: Scope) -> tuple[BaseRoute, Scope] | None:
        """The route taking this HTTP request, as Starlette's scan would pick it: the first that
        matches fully, else the first with the path but not the method (it answers 405)."""
        index = self._index
        if index is None or not index.current(self.routes):  # routes added since: index them again
            index = self._index = _Index(self.routes)
        partial: tuple[BaseRoute, Scope] | None = None
        path = get_route_path(scope)
        for route in index.candidates(scope):
            if type(route) is StarletteRoute and route.path_regex.match(path) is None:
                continue  # what its `matches()` would find first, without the call
            match, child_scope = route.matches(scope)
            if match is Match.FULL:
                return route, child_scope
            if match is Match.PARTIAL and partial is None:
                partial = route, child_scope
        return partial
