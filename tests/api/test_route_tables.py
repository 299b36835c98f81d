"""Every route of every table says where its scope template's values come from, and nothing else.

A template's parameters come from the path, from body fields the route lists in `scope_body`
(checked by the edge before the handler), or from fields the route lists in `loads` (supplied
by the service from the record it loads, through the guard the handler passes it). These tests
read the tables only: a route that breaks the rule fails here, before any request is made.
"""

from __future__ import annotations

import re

import pytest

from taskyard.api import artifacts_v1, auth_v1, authz, events_v1, hooks_v1, queue_v1, scheduler_v1, secrets_v1
from taskyard.api.routing import Route
from taskyard.model import schema

TABLES = {
    "queue": queue_v1.ROUTES,
    "artifacts": artifacts_v1.ROUTES,
    "auth": auth_v1.ROUTES,
    "scheduler": scheduler_v1.ROUTES,
    "secrets": secrets_v1.ROUTES,
    "hooks": hooks_v1.ROUTES,
    "events": events_v1.ROUTES,
}
ALL = [(table, r) for table, routes in TABLES.items() for r in routes]
SCOPED = [(table, r) for table, r in ALL if r.scopes is not None]


def _id(entry: tuple[str, Route]) -> str:
    return f"{entry[0]}.{entry[1].name}"


def path_params(route: Route) -> set[str]:
    return set(re.findall(r"{(\w+)", route.path))


@pytest.mark.parametrize("entry", SCOPED, ids=_id)
def test_every_template_parameter_has_a_declared_source(entry: tuple[str, Route]) -> None:
    _, route = entry
    needed = authz.template_names(route.scopes)
    sources = path_params(route) | set(route.scope_body) | set(route.loads)
    assert needed <= sources, f"{route.name}: {sorted(needed - sources)} come from nowhere"


@pytest.mark.parametrize("entry", SCOPED, ids=_id)
def test_a_route_authorizes_at_the_edge_or_declares_what_its_service_loads(entry: tuple[str, Route]) -> None:
    _, route = entry
    needed = authz.template_names(route.scopes)
    at_edge = path_params(route) | set(route.scope_body)
    if route.loads:
        # The service supplies these: each is a parameter the template needs and the edge lacks.
        assert set(route.loads) <= needed - at_edge, f"{route.name} loads what it does not need"
    else:
        assert needed <= at_edge, f"{route.name} needs {sorted(needed - at_edge)}: declare them in loads"


@pytest.mark.parametrize("entry", SCOPED, ids=_id)
def test_body_fields_the_edge_reads_are_required_by_the_schema(entry: tuple[str, Route]) -> None:
    _, route = entry
    if not route.scope_body:
        return
    assert isinstance(route.input, schema._Object), f"{route.name} reads a body it has no schema for"
    assert set(route.scope_body) <= set(route.input.required), route.name
    assert set(route.scope_body) <= authz.template_names(route.scopes), route.name


@pytest.mark.parametrize("entry", [e for e in ALL if e[1].scopes is None], ids=_id)
def test_public_routes_declare_no_scope_sources(entry: tuple[str, Route]) -> None:
    _, route = entry
    assert not route.loads and not route.scope_body, route.name


def test_the_tables_hold_routes_of_both_kinds() -> None:
    at_edge = [r.name for _, r in SCOPED if not r.loads]
    in_service = {r.name for _, r in SCOPED if r.loads}
    assert len(at_edge) > 30
    assert {"claimTask", "scheduleTask", "sealTaskGroup", "getArtifact", "updateClient"} <= in_service
