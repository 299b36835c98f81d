"""Signing in to the web UI and out again, on both databases: which credentials are taken, what the
cookies are, when a session ends (expiry, a client deleted, disabled or reset, a certificate
expiring, signing out), and what a stale or forged cookie or a foreign form gets."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable

import httpx
import pytest

from taskyard.auth import hawk
from taskyard.model import dates
from taskyard.ui import sessions
from tests.api.conftest import ROOT, Api, Credentials
from tests.conftest import ROOT_TOKEN
from tests.ui.conftest import Browser, hidden_fields, new_client, session_key

AUTH = "/api/auth/v1"


def set_cookies(response: httpx.Response) -> dict[str, str]:
    """Each cookie the answer sets, by name: its whole Set-Cookie header, in lower case."""
    found = {}
    for header in response.headers.get_list("set-cookie"):
        found[header.split("=", 1)[0]] = header.lower()
    return found


def temporary(scopes: list[str], lasts_ms: int, *, start_ms: int | None = None) -> Credentials:
    """Temporary credentials issued by the root client, starting now (wall clock: Hawk's)."""
    start = start_ms if start_ms is not None else dates.now_ms()
    issued = hawk.temporary_credentials(ROOT.client_id, ROOT_TOKEN, scopes, start, start + lasts_ms)
    return Credentials.from_response(issued)


async def test_the_signin_form_carries_the_token_its_cookie_holds(browsers: Callable[..., Browser]) -> None:
    browser = browsers()
    page = await browser.get("/signin", params={"next": "/tasks/create"})
    assert page.status_code == 200
    form = hidden_fields(page.text, "/signin")
    assert form["next"] == "/tasks/create"
    cookie = set_cookies(page)[sessions.SIGNIN_COOKIE]
    assert form["signin"].lower() in cookie
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/signin" in cookie
    assert "secure" not in cookie  # plain http: a Secure cookie would not come back
    again = await browser.get("/signin")
    assert hidden_fields(again.text, "/signin")["signin"] == form["signin"]  # another tab: same token


async def test_root_signs_in_and_out(browsers: Callable[..., Browser]) -> None:
    browser = browsers()
    signed = await browser.signin(ROOT, "/tasks/create")
    assert signed.status_code == 303
    assert signed.headers["location"] == "/tasks/create?done=signed-in"
    cookie = set_cookies(signed)[sessions.SESSION_COOKIE]
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/;" in cookie
    assert "secure" not in cookie
    assert f"max-age={sessions.SESSION_MS // 1000}" in cookie
    assert await browser.who() == ROOT.client_id
    shown = await browser.get("/tasks/create?done=signed-in")
    assert "You are signed in." in shown.text

    out = await browser.post("/signout", {"csrf": await browser.csrf()})
    assert out.status_code == 303 and out.headers["location"] == "/?done=signed-out"
    assert "max-age=0" in set_cookies(out)[sessions.SESSION_COOKIE]
    assert await browser.who() is None


async def test_over_https_the_cookies_are_secure(browsers: Callable[..., Browser]) -> None:
    browser = browsers(https=True)
    form = await browser.get("/signin")
    assert "secure" in set_cookies(form)[sessions.SIGNIN_COOKIE]
    signed = await browser.signin(ROOT)
    assert signed.status_code == 303
    assert "secure" in set_cookies(signed)[sessions.SESSION_COOKIE]
    assert await browser.who() == ROOT.client_id


async def test_a_limited_client_signs_in(api: Api, browsers: Callable[..., Browser]) -> None:
    creds = await new_client(api, "ui/limited", ["queue:cancel-task:*"])
    browser = browsers()
    assert (await browser.signin(creds)).status_code == 303
    assert await browser.who() == "ui/limited"


async def test_a_wrong_token_is_refused_saying_so(api: Api, browsers: Callable[..., Browser]) -> None:
    creds = await new_client(api, "ui/someone", [])
    browser = browsers()
    refused = await browser.signin(Credentials("ui/someone", creds.access_token[::-1]))
    assert refused.status_code == 401
    assert "the access token is wrong for client ui/someone" in refused.text
    assert 'value="ui/someone"' in refused.text  # the form is shown again, the client id kept
    assert sessions.SESSION_COOKIE not in set_cookies(refused)
    unknown = await browser.signin(Credentials("ui/nobody", creds.access_token))
    assert unknown.status_code == 401
    assert "Client with clientId &#39;ui/nobody&#39; not found" in unknown.text
    blank = await browser.post("/signin", hidden_fields((await browser.get("/signin")).text, "/signin"))
    assert blank.status_code == 400 and "clientId and accessToken: required" in blank.text
    assert await browser.who() is None


async def test_temporary_credentials_sign_in_until_their_certificate_expires(
    api: Api, browsers: Callable[..., Browser]
) -> None:
    creds = temporary(["queue:cancel-task:*"], 10 * dates.MINUTE, start_ms=api.clock())
    browser = browsers()
    assert (await browser.signin(creds)).status_code == 303
    assert await browser.who() == ROOT.client_id  # unnamed temporary credentials act as their issuer
    api.clock.advance(9 * 60)
    assert await browser.who() == ROOT.client_id
    api.clock.advance(2 * 60)  # past the certificate's expiry: the session ended with it
    assert await browser.who() is None


async def test_a_tampered_certificate_is_refused(browsers: Callable[..., Browser]) -> None:
    creds = temporary(["queue:cancel-task:*"], dates.HOUR)
    assert creds.certificate is not None
    forged = Credentials(creds.client_id, creds.access_token, creds.certificate.replace("cancel", "rerun"))
    browser = browsers()
    refused = await browser.signin(forged)
    assert refused.status_code == 401
    assert "ext.certificate.signature is not valid" in refused.text
    broken = await browser.signin(Credentials(creds.client_id, creds.access_token, "{not json"))
    assert broken.status_code == 401 and "the certificate is not valid JSON" in broken.text
    assert await browser.who() is None


async def test_a_signin_not_sent_from_the_signin_form_is_refused(browsers: Callable[..., Browser]) -> None:
    """Login CSRF: another site's form can't carry the token of this browser's sign-in cookie."""
    browser = browsers()
    creds = {"clientId": ROOT.client_id, "accessToken": ROOT.access_token, "next": "/"}
    without = await browser.post("/signin", creds)
    assert without.status_code == 403
    assert "not sent from this site&#39;s own sign-in form" in without.text
    await browser.get("/signin")  # the browser now holds a sign-in cookie
    forged = await browser.post(
        "/signin", creds | {"signin": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()[:43]}
    )
    assert forged.status_code == 403
    assert sessions.SESSION_COOKIE not in set_cookies(forged)
    assert await browser.who() is None


@pytest.mark.parametrize(
    "next_path",
    [
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example",
        "javascript:alert(1)",
        "tasks",
        "/\x00x",
    ],
)
async def test_next_is_a_path_on_this_site_only(browsers: Callable[..., Browser], next_path: str) -> None:
    browser = browsers()
    page = await browser.get("/signin", params={"next": next_path})
    assert hidden_fields(page.text, "/signin")["next"] == "/"
    form = hidden_fields(page.text, "/signin") | {"next": next_path}
    signed = await browser.post(
        "/signin", form | {"clientId": ROOT.client_id, "accessToken": ROOT.access_token}
    )
    assert signed.status_code == 303
    assert signed.headers["location"] == "/?done=signed-in"


async def test_an_expired_session_is_signed_out_and_its_cookie_cleared(
    api: Api, browsers: Callable[..., Browser]
) -> None:
    browser = browsers()
    await browser.signin(ROOT)
    api.clock.advance(sessions.SESSION_MS / 1000 + 1)
    page = await browser.get("/tasks/create")
    assert page.status_code == 200 and "Signed in as" not in page.text
    assert "max-age=0" in set_cookies(page)[sessions.SESSION_COOKIE]
    assert sessions.SESSION_COOKIE not in browser.client.cookies


async def test_a_session_signed_out_elsewhere_is_gone(browsers: Callable[..., Browser]) -> None:
    first = browsers()
    await first.signin(ROOT)
    second = browsers()
    second.client.cookies.set(sessions.SESSION_COOKIE, first.client.cookies[sessions.SESSION_COOKIE])
    assert await second.who() == ROOT.client_id  # the same session, in a second browser
    await first.post("/signout", {"csrf": await first.csrf()})
    page = await second.get("/tasks/create")
    assert "Signed in as" not in page.text
    assert "max-age=0" in set_cookies(page)[sessions.SESSION_COOKIE]


@pytest.mark.parametrize(
    "value", ["forged", "x" * 43, base64.urlsafe_b64encode(bytes(32)).decode().rstrip("=")]
)
async def test_a_forged_cookie_is_nobody(browsers: Callable[..., Browser], value: str) -> None:
    browser = browsers()
    browser.client.cookies.set(sessions.SESSION_COOKIE, value)
    page = await browser.get("/tasks/create")
    assert page.status_code == 200 and "Signed in as" not in page.text
    assert "max-age=0" in set_cookies(page)[sessions.SESSION_COOKIE]
    refused = await browser.post("/signout", {"csrf": "x"})
    assert refused.status_code == 303  # signing out without a session: nothing to end


@pytest.mark.parametrize("change", ["delete", "disable", "reset"])
async def test_a_session_ends_when_its_client_changes(
    api: Api, browsers: Callable[..., Browser], change: str
) -> None:
    creds = await new_client(api, "ui/changing", ["queue:cancel-task:*"])
    browser = browsers()
    await browser.signin(creds)
    assert await browser.who() == "ui/changing"
    method, suffix = {"delete": ("DELETE", ""), "disable": ("POST", "/disable"), "reset": ("POST", "/reset")}[
        change
    ]
    changed = await api.call(method, "/clients/ui%2Fchanging" + suffix, prefix=AUTH)
    assert changed.status_code in (200, 204), changed.text
    assert await browser.who() is None


async def test_signing_out_needs_the_csrf_token(browsers: Callable[..., Browser]) -> None:
    browser = browsers()
    await browser.signin(ROOT)
    for form in ({}, {"csrf": "wrong"}):
        refused = await browser.post("/signout", form)
        assert refused.status_code == 403
        assert "CSRF token" in refused.text
    assert await browser.who() == ROOT.client_id


async def test_each_signin_sweeps_expired_sessions(api: Api, browsers: Callable[..., Browser]) -> None:
    old = browsers()
    await old.signin(ROOT)
    key = session_key(old)
    api.clock.advance(sessions.SESSION_MS / 1000 + 1)
    await browsers().signin(ROOT)
    async with api.services.auth.storage.reader() as db:
        assert await db.fetchrow("ui_session_get", key) is None


async def test_signing_in_again_replaces_the_session(browsers: Callable[..., Browser], api: Api) -> None:
    browser = browsers()
    await browser.signin(ROOT)
    first = session_key(browser)
    await browser.signin(ROOT)
    assert session_key(browser) != first
    async with api.services.auth.storage.reader() as db:
        assert await db.fetchrow("ui_session_get", first) is None


@pytest.mark.parametrize(
    ("client_id", "token", "certificate"),
    [
        ("\x00", "x", ""),
        ('a"b, mac="x', "x", ""),
        ("x" * 5000, "y" * 5000, ""),
        ("ui/é", "ünïcode", ""),
        (ROOT.client_id, ROOT.access_token, "[]"),
        (ROOT.client_id, ROOT.access_token, '{"version": 1, "scopes": ["' + "s" * 5000 + '"]}'),
        (ROOT.client_id, ROOT.access_token, '"a string"'),
    ],
)
async def test_hostile_credentials_are_refused_never_an_error(
    browsers: Callable[..., Browser], client_id: str, token: str, certificate: str
) -> None:
    browser = browsers()
    refused = await browser.signin(Credentials(client_id, token, certificate or None))
    assert refused.status_code == 401, refused.text
    assert "Sign-in refused" in refused.text
    assert await browser.who() is None
