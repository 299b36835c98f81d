"""In-process tests of the web UI: the app of tests/api (both databases) over httpx, driven as a
browser drives it: pages fetched, forms posted with their hidden fields, cookies kept per browser.

Pages need the API's read scopes. The deployment of these tests makes the UI public: its anonymous
role grants `PUBLIC_READS` (as docs/ui.md tells an operator to), so a test reads pages without
signing in; a module with `DEFAULT_ANONYMOUS = True` keeps a new deployment's anonymous role."""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from taskyard.api.app import Services, build_app
from taskyard.ui import sessions
from taskyard.ui.app import Pages
from tests.api.conftest import BASE, ROOT, Api, Credentials, live_log_urls, served, services
from tests.conftest import FakeClock

__all__ = ["live_log_urls", "served", "services"]  # the tests/api fixtures these tests use

# What the anonymous role grants in a deployment whose web UI is public: public artifacts, and the
# scopes of the queue's reads that the pages make.
PUBLIC_READS = [
    "queue:get-artifact:public/*",
    "queue:get-task:*",
    "queue:status:*",
    "queue:list-task-group:*",
    "queue:list-dependent-tasks:*",
    "queue:list-task-queues",
    "queue:get-task-queue:*",
    "queue:pending-count:*",
    "queue:claimed-count:*",
    "queue:pending-list:*",
    "queue:claimed-list:*",
    "queue:list-workers:*",
    "queue:get-worker:*",
]


@pytest.fixture
async def api(services: Services, clock: FakeClock, request: pytest.FixtureRequest) -> AsyncIterator[Api]:
    """The API of tests/api, its anonymous role granting `PUBLIC_READS` (unless the module says
    `DEFAULT_ANONYMOUS = True`)."""
    transport = httpx.ASGITransport(app=build_app(services, Pages(services)), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        made = Api(client, services, clock)
        if not getattr(request.module, "DEFAULT_ANONYMOUS", False):
            await make_reads_public(made)
        yield made


async def make_reads_public(api: Api) -> None:
    """The anonymous role updated through the auth API to grant `PUBLIC_READS`."""
    body = {"description": "anyone may read the queue through the web UI", "scopes": PUBLIC_READS}
    updated = await api.call("POST", "/roles/anonymous", body, prefix="/api/auth/v1")
    assert updated.status_code == 200, updated.text


_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


def hidden_fields(page: str, action: str | None = None) -> dict[str, str]:
    """The hidden fields of the page's form posting to `action` (the first form if None)."""
    forms = re.findall(r'<form[^>]*action="([^"]*)"[^>]*>(.*?)</form>', page, re.S)
    for target, inner in forms:
        if action is None or html.unescape(target) == action:
            return {name: html.unescape(value) for name, value in _HIDDEN.findall(inner)}
    raise AssertionError(f"no form posting to {action} on the page")


def session_key(browser: Browser) -> str:
    """The key of the browser's session row: the SHA-256 of the id its cookie holds."""
    cookie = browser.client.cookies[sessions.SESSION_COOKIE]
    return hashlib.sha256(base64.urlsafe_b64decode(cookie + "=")).hexdigest()


class Browser:
    """One browser on the app: its own cookies; `signin` goes through the sign-in page's form."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.client.get(path, **kwargs)

    async def post(self, path: str, form: dict[str, str], **kwargs: Any) -> httpx.Response:
        return await self.client.post(path, data=form, **kwargs)

    async def signin(self, creds: Credentials, next_path: str = "/tasks/create") -> httpx.Response:
        page = await self.get("/signin", params={"next": next_path})
        assert page.status_code == 200, page.text
        form = hidden_fields(page.text, "/signin")
        form |= {"clientId": creds.client_id, "accessToken": creds.access_token}
        if creds.certificate:
            form["certificate"] = creds.certificate
        return await self.post("/signin", form)

    async def csrf(self) -> str:
        """The session's CSRF token, as every page's sign-out form carries it."""
        page = await self.get("/tasks/create")
        return hidden_fields(page.text, "/signout")["csrf"]

    async def who(self) -> str | None:
        """Who the pages say is signed in (None: nobody)."""
        page = await self.get("/tasks/create")
        found = re.search(r"Signed in as <strong>([^<]*)</strong>", page.text)
        return html.unescape(found[1]) if found else None


@pytest.fixture
async def browsers(api: Api) -> AsyncIterator[Callable[..., Browser]]:
    """Makes browsers on the app (`https=True`: reached over https)."""
    app = build_app(api.services, Pages(api.services))
    opened: list[httpx.AsyncClient] = []

    def new(*, https: bool = False) -> Browser:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        base = BASE.replace("http://", "https://") if https else BASE
        client = httpx.AsyncClient(transport=transport, base_url=base)
        opened.append(client)
        return Browser(client)

    yield new
    for client in opened:
        await client.aclose()


@pytest.fixture
async def root_browser(browsers: Callable[..., Browser]) -> Browser:
    """A browser signed in as the root client."""
    browser = browsers()
    signed = await browser.signin(ROOT)
    assert signed.status_code == 303, signed.text
    return browser


async def new_client(api: Api, client_id: str, scopes: list[str]) -> Credentials:
    """A client with `scopes`, made through the auth API; answers its credentials."""
    body = {"expires": "3000-01-01T00:00:00.000Z", "description": "a UI test's client", "scopes": scopes}
    made = await api.call("PUT", f"/clients/{client_id}", body, prefix="/api/auth/v1")
    assert made.status_code == 200, made.text
    return Credentials(client_id, made.json()["accessToken"])
