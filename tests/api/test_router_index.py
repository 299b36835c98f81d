"""The indexed router picks the route Starlette's scan of every route picks, for every path."""

from __future__ import annotations

import random
from typing import Any
from urllib.parse import unquote

from starlette.routing import BaseRoute, Match, Mount, Route

from taskyard.api.app import Services, build_app
from taskyard.api.router import IndexedRouter
from taskyard.ui.app import Pages

METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND")
PIECES = ("api", "queue", "auth", "v1", "task", "clients", "roles", "a%2Fb", "a/b", "x", "", "tasks", "ping")
PIECES += ("%61pi", "claim-work", "runs", "0", "artifacts", "task-queues", "counts")


def scan(routes: list[BaseRoute], scope: dict[str, Any]) -> tuple[BaseRoute, dict[str, Any]] | None:
    """Starlette's own choice: the first full match in order, else the first partial one."""
    partial = None
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return route, child
        if match is Match.PARTIAL and partial is None:
            partial = route, child
    return partial


def scope_for(method: str, raw: str, root: str = "") -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": root + unquote(raw),
        "raw_path": (root + raw).encode("latin-1"),
        "root_path": root,
        "query_string": b"",
        "headers": [],
    }


def paths_of(routes: list[BaseRoute], rng: random.Random) -> list[str]:
    """Every route's path (and a mount's routes', under its path) with its parameters filled in
    several ways, and random ones."""
    found = []
    pages = [route.routes for route in routes if isinstance(route, Pages)]  # the UI's, built on first use
    mounted = [(route.path, inner) for route in routes if isinstance(route, Mount) for inner in route.routes]
    templates = [
        getattr(route, "path", "/") for route in [*routes, *(route for built in pages for route in built)]
    ]
    for template in templates + [prefix + getattr(inner, "path", "/") for prefix, inner in mounted]:
        for value in ("abc", "a%2Fb", "a/b", "", "reset", "x y"):
            found.append(template.replace("{", "<").replace("}", ">").split("<")[0] + value)
            filled, parts = [], template.split("{")
            for part in parts[1:]:
                filled.append(value + part.split("}", 1)[-1])
            found.append(parts[0] + "".join(filled))
    found += ["/" + "/".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12))) for _ in range(1200)]
    return found


async def test_the_index_picks_what_the_scan_picks(services: Services) -> None:
    app = build_app(services, Pages(services))  # with the web UI, as `taskyard serve` builds it
    router = app.router
    assert isinstance(router, IndexedRouter)
    router.routes.append(Route("/api/hooks/v1/hooks/{hookId}", lambda r: None, methods=["PUT"]))
    router.routes.append(Mount("", routes=[Route("/mounted/{x}", lambda r: None)]))
    rng = random.Random(7)
    checked = 0
    for raw in paths_of(router.routes, rng):
        for root in ("", "/prefix"):
            for method in METHODS:
                scope = scope_for(method, raw, root)
                expected = scan(router.routes, scope)
                got = router.find(scope)
                assert (got and got[0]) is (expected and expected[0]), (method, root, raw)
                assert (got and got[1]) == (expected and expected[1]), (method, root, raw)
                checked += 1
    assert checked > 5_000


async def test_methods_no_route_names_share_one_index(services: Services) -> None:
    """The client names the method: a method no route takes is indexed once for all of them,
    so strange methods cost no index each, however many there are."""
    router = build_app(services).router
    assert isinstance(router, IndexedRouter)
    for i in range(200):
        assert router.find(scope_for(f"X{i}", "/api/queue/v1/task/abc")) is not None  # its 405
    index = router._index
    assert index is not None
    assert set(index.by_method) == {""}
