"""The app's front (`api.app.App`): a trusted proxy's headers are applied as uvicorn applies them,
and only for the hosts trusted."""

from __future__ import annotations

import httpx
import pytest

from taskyard.api.app import Services, build_app
from taskyard.cli.connections import forwarded_headers


@pytest.mark.parametrize(
    ("client", "headers", "seen"),
    [
        ("127.0.0.1", {"x-forwarded-proto": "https"}, "https://testserver"),
        ("10.1.2.3", {"x-forwarded-proto": "https"}, "http://testserver"),  # not a trusted proxy
        ("127.0.0.1", {}, "http://testserver"),
    ],
)
async def test_a_trusted_proxy_says_the_scheme(
    services: Services, client: str, headers: dict[str, str], seen: str
) -> None:
    app = build_app(services)
    app.trust_proxies(forwarded_headers("127.0.0.1,::1"))
    transport = httpx.ASGITransport(app=app, client=(client, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        reply = await http.get("/api", headers=headers)
    assert reply.status_code == 200
    assert seen in reply.text
    assert ("https://" in reply.text) == seen.startswith("https")


async def test_untrusting_apps_ignore_forwarded_headers(services: Services) -> None:
    transport = httpx.ASGITransport(app=build_app(services), client=("127.0.0.1", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        reply = await http.get("/api", headers={"x-forwarded-proto": "https"})
    assert "https://" not in reply.text
