"""`/api/<service>/v1/` answers a JSON index of the service's routes, `/` a page saying what is here;
both without credentials."""

from __future__ import annotations

import pytest

from taskyard import __version__
from taskyard.api import artifacts_v1, auth_v1, queue_v1
from tests.api.conftest import Api


@pytest.mark.parametrize("slash", ["/", ""])
@pytest.mark.parametrize(
    ("service", "table"),
    [("queue", queue_v1.ROUTES + artifacts_v1.ROUTES), ("auth", auth_v1.ROUTES)],
)
async def test_a_service_index_lists_its_routes(api: Api, service: str, table: list, slash: str) -> None:
    reply = await api.client.get(f"/api/{service}/v1{slash}")
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "application/json"
    body = reply.json()
    assert {k: body[k] for k in ("service", "version", "taskyard", "docs", "openapi", "reference")} == {
        "service": service,
        "version": "v1",
        "taskyard": __version__,
        "docs": "/api",
        "openapi": f"/api/{service}/v1/openapi.json",
        "reference": f"/api/{service}/v1/reference",
    }
    assert body["routes"] == [{"name": r.name, "method": r.method, "path": r.path} for r in table]
    assert {"name": "ping", "method": "GET", "path": "/ping"} in body["routes"]


@pytest.mark.parametrize("path", ["/api", "/api/"])
async def test_the_api_page_says_what_is_here(api: Api, path: str) -> None:
    reply = await api.client.get(path)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/html")
    page = reply.text
    assert f"taskyard {__version__}" in page
    assert "TASKCLUSTER_ROOT_URL=http://testserver" in page
    assert 'href="/api/queue/v1/"' in page and 'href="/api/auth/v1/"' in page
    assert "taskyard task create" in page


async def test_other_paths_are_still_404(api: Api) -> None:
    assert (await api.client.get("/api/queue/v1/nonsense")).status_code == 404
    assert (await api.client.get("/api/nosuch/v1/")).status_code == 404
