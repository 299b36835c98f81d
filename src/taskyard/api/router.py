"""Finding a request's route: Starlette's router, with the routes indexed by the start of their path.

Starlette tries every route's pattern in turn, ~250 of them here. `IndexedRouter` tries only the
routes that could match, in the app's order:
- those whose literal start (the path before its first `{`, cut after at most `DEPTH` slashes)
  the request's path begins with, found by walking a tree of the starts' segments;
- that match as many slashes as the path holds (a `{name}` takes none, a `{name:path}` any);
- for the full match, that take the request's method.
Any other kind of route is tried for every path. The first full match, else the first route with
the path but another method (405), else 404: the same answers as the linear scan, since every
route left out could not have matched at all (`tests/api/test_router_index.py` holds it).

`RawPathRoute` matches the path as sent (`%2F` kept), so it is indexed by the raw path.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from starlette.convertors import FloatConvertor, IntegerConvertor, StringConvertor, UUIDConvertor
from starlette.routing import BaseRoute, Match, Mount, Router
from starlette.routing import Route as StarletteRoute
from starlette.types import Receive, Scope, Send

from taskyard.internals.web import get_route_path

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


class EmptyTailRoute(StarletteRoute):
    """A route's path without its last `/{param:path}`, answered with that parameter empty:
    TaskCluster's clients send index's listNamespaces of the root as `/namespaces`."""

    def __init__(self, path: str, endpoint: Callable[..., Any], *, methods: list[str], param: str) -> None:
        super().__init__(path, endpoint, methods=methods)
        self.param = param

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is not Match.NONE:
            child["path_params"] = {**child.get("path_params", {}), self.param: ""}
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


def _start(route: BaseRoute) -> str:
    """The literal start of the paths `route` may match ("": any path). A mount at `/p` takes the
    paths under `/p/` only: keyed by that, a request elsewhere under `/` does not try it."""
    if isinstance(route, Mount):
        return (route.path + "/").split("{", 1)[0]
    return route.path.split("{", 1)[0] if isinstance(route, StarletteRoute) else ""


_NO_SLASH = (StringConvertor, IntegerConvertor, FloatConvertor, UUIDConvertor)  # none matches a `/`


def _slashes(route: BaseRoute) -> tuple[int, bool]:
    """How many slashes a path `route` matches holds: (n, True) exactly n, (n, False) n or more."""
    if type(route) not in (StarletteRoute, RawPathRoute):
        return 0, False
    assert isinstance(route, StarletteRoute)
    literal = re.sub(r"{[^}]*}", "", route.path).count("/")
    exact = all(isinstance(c, _NO_SLASH) for c in route.param_convertors.values())
    return literal, exact


_Entry = tuple[int, BaseRoute, int, bool]  # the route's place in the app's list, it, `_slashes()`


class _Node:
    """A key of the index: a path's start ending in a slash, as a tree of its segments."""

    __slots__ = ("children", "entries")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.entries: list[_Entry] = []

    def add(self, key: str, entry: _Entry) -> None:
        node = self
        for segment in key.split("/")[1:-1]:
            node = node.children.setdefault(segment, _Node())
        node.entries.append(entry)

    def walk(self, path: str) -> tuple[_Node, ...]:
        """The nodes of the keys `path` starts with, from the root, their entries or not."""
        if not path.startswith("/"):
            return _NOWHERE
        found, node = [self], self
        for segment in path.split("/", DEPTH)[1:-1]:
            child = node.children.get(segment)
            if child is None:
                break
            found.append(node := child)
        return tuple(found)


_NOWHERE: tuple[_Node, ...] = ()  # the keys of a path that starts with none


class _Index:
    """The routes by key (position in the app's list kept), for decoded and for raw paths; with a
    method, only the routes that could take it in full. A request is tried against the routes
    under the keys its path starts with that match as many slashes as it holds."""

    def __init__(self, routes: list[BaseRoute], method: str | None = None) -> None:
        self.routes, self.count = routes, len(routes)
        self.decoded, self.raw = _Node(), _Node()
        self.always: list[_Entry] = []
        self.has_raw = False
        # by the deepest keys found and the slashes counted (past the most any route spells out,
        # one count): as many as there are keys
        self.merged: dict[tuple[_Node | None, _Node | None, int, int], list[BaseRoute]] = {}
        self.by_method: dict[str, _Index] = {}  # by a method some route names, "" for any other
        # the methods some route names: only the top index (no method) sorts requests by them
        self.named = (
            set() if method else {m for r in routes if isinstance(r, StarletteRoute) for m in r.methods or ()}
        )
        self.most = 0
        for i, route in enumerate(routes):
            taken = route.methods if isinstance(route, StarletteRoute) else None
            if method is not None and taken and method not in taken:
                continue  # its answer to `method` is a 405 at best
            entry = (i, route, *_slashes(route))
            self.most = max(self.most, entry[2])
            key = _key(_start(route))
            if not key:  # another kind of route, or one mounted at the root
                self.always.append(entry)
            elif isinstance(route, RawPathRoute):
                self.raw.add(key, entry)
                self.has_raw = True
            else:
                self.decoded.add(key, entry)

    def current(self, routes: list[BaseRoute]) -> bool:
        return routes is self.routes and len(routes) == self.count

    def for_method(self, method: str) -> _Index:
        """The index of the routes that could take `method` in full, built on first use: one per
        method some route names, and one shared by every other (the client names the method)."""
        key = method if method in self.named else ""
        found = self.by_method.get(key)
        if found is None:
            found = self.by_method[key] = _Index(self.routes, method)
        return found

    def candidates(self, path: str, sent: str) -> list[BaseRoute]:
        """The routes that could match a request with the route path `path` (decoded) and `sent`
        (as sent: `raw_route_path()`, else `path`), in the app's order."""
        decoded = self.decoded.walk(path)
        raw = self.raw.walk(sent) if self.has_raw else _NOWHERE
        most = self.most + 1
        key = (
            decoded[-1] if decoded else None,
            raw[-1] if raw else None,
            min(path.count("/"), most),
            min(sent.count("/"), most),
        )
        merged = self.merged.get(key)
        if merged is None:
            merged = self.merged[key] = self._merge(decoded, raw, key[2], key[3])
        return merged

    def _merge(
        self, decoded: tuple[_Node, ...], raw: tuple[_Node, ...], slashes: int, raw_slashes: int
    ) -> list[BaseRoute]:
        def fitting(entries: list[_Entry], count: int) -> list[_Entry]:
            return [e for e in entries if (e[2] == count if e[3] else e[2] <= count)]

        lists = [fitting(self.always, slashes)]
        lists += [fitting(node.entries, slashes) for node in decoded]
        lists += [fitting(node.entries, raw_slashes) for node in raw]
        return [entry[1] for entry in heapq.merge(*lists, key=lambda entry: entry[0])]


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
        matches fully, else the first with the path but not the method (it answers 405).

        The full match is looked for first among the routes that take the request's method (a
        route taking other methods only could not match fully), each plain route's pattern tried
        before its `matches()`; only a request none of them takes is scanned again for a partial
        match, in every route with its path."""
        index = self._index
        if index is None or not index.current(self.routes):  # routes added since: index them again
            index = self._index = _Index(self.routes)
        path = get_route_path(scope)
        as_sent = raw_route_path(scope)
        unquoting, sent = as_sent is not None, path if as_sent is None else as_sent
        for route in index.for_method(scope["method"]).candidates(path, sent):
            kind = type(route)
            if kind is StarletteRoute:
                found = route.path_regex.match(path)  # type: ignore[attr-defined]
                if found is not None:  # a full match: the route takes the method
                    return route, _child_scope(route, found, scope, raw=False)
            elif kind is RawPathRoute:
                found = route.path_regex.match(sent)  # type: ignore[attr-defined]
                if found is not None:
                    return route, _child_scope(route, found, scope, raw=unquoting)
            else:
                match, child_scope = route.matches(scope)
                if match is Match.FULL:
                    return route, child_scope
        for route in index.candidates(path, sent):
            if type(route) is StarletteRoute and route.path_regex.match(path) is None:
                continue
            match, child_scope = route.matches(scope)
            if match is Match.PARTIAL:
                return route, child_scope  # no route matched fully: the first with the path
        return None


def _child_scope(route: BaseRoute, found: re.Match[str], scope: Scope, *, raw: bool) -> Scope:
    """What `route.matches(scope)` answers with its pattern's match `found` (a full one): its
    parameters converted (and, matched on the raw path, decoded), after the scope's own."""
    assert isinstance(route, StarletteRoute)
    params: dict[str, Any] = found.groupdict()
    for key, value in params.items():
        value = route.param_convertors[key].convert(value)
        params[key] = unquote(value) if raw and isinstance(value, str) else value
    path_params = dict(scope.get("path_params", {}))
    path_params.update(params)
    return {"endpoint": route.endpoint, "path_params": path_params}
