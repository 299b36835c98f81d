"""The UI's routes are built on the first request that could be a page, not with the app: the
server's start does not wait for the page modules and their templates."""

from __future__ import annotations

import httpx
from starlette.routing import Mount, Route

from taskyard.api.app import Services, build_app
from taskyard.ui.app import Pages
from tests.api.conftest import BASE


async def test_the_pages_are_built_by_the_first_request_outside_the_api(services: Services) -> None:
    pages = Pages(services)
    app = build_app(services, pages)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        assert (await client.get("/api/queue/v1/ping")).status_code == 200
        assert (await client.get("/api/queue/v1/nothing-here")).status_code == 404
        assert (await client.get("/metrics")).status_code == 200
        assert not pages.built
        page = await client.get("/", headers={"accept": "text/html"})
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert pages.built


async def test_a_browser_asking_first_for_no_page_gets_the_404_page(services: Services) -> None:
    transport = httpx.ASGITransport(app=build_app(services, Pages(services)), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        missing = await client.get("/no/such/page", headers={"accept": "text/html"})
    assert missing.status_code == 404
    assert "There is no page at /no/such/page." in missing.text


def test_no_page_is_under_the_api_nor_at_metrics(services: Services) -> None:
    """What lets the app try the pages last, and never build them for an API request."""
    for route in Pages(services).routes:
        assert isinstance(route, Route | Mount)
        assert not route.path.startswith("/api/") and route.path != "/metrics", route.path


async def test_an_app_built_without_the_ui_serves_the_api_alone(services: Services) -> None:
    """The API does not bring the UI along: only whoever builds the app mounts it (`cli/serve.py`)."""
    transport = httpx.ASGITransport(app=build_app(services), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        assert (await client.get("/api/queue/v1/ping")).status_code == 200
        page = await client.get("/", headers={"accept": "text/html"})
    assert page.status_code == 404 and page.json()["code"] == "ResourceNotFound"
