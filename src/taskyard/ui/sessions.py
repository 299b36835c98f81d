"""Who is signed in to the UI: sign-in, sessions, sign-out and CSRF tokens. See docs/ui.md.

Signing in checks the credentials exactly as the API checks a request: the server signs a Hawk
request with them (with the certificate of temporary credentials in its `ext`, as TaskCluster's
clients send it) and the auth service authenticates it. Every later page and action checks them
again the same way, so a deleted, disabled or reset client, or an expired certificate, ends the
session at once; the caller an action acts as is built from that check (`Session.caller`).

A session is a row of `ui_sessions` (migration 0012), keyed by the SHA-256 of a random 256-bit id
that only the browser's cookie holds. The row keeps the access token sealed with a key derived
from that id (`seal`), so the table alone neither signs anyone in nor gives a token away. The
cookie is HttpOnly, SameSite=Strict and Secure on https. The sign-in form carries a token that
must equal its own cookie's (double submit), so another site cannot sign a browser in either.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from taskyard.api import authz
from taskyard.auth import hawk, hawk_client
from taskyard.model import dates
from taskyard.model.errors import AuthenticationFailed, Unavailable
from taskyard.ui import forms
from taskyard.ui.render import view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.ui.render import UI

SESSION_COOKIE = "taskyard_session"
SIGNIN_COOKIE = "taskyard_signin"
SESSION_MS = 12 * dates.HOUR  # the longest a session lasts; never past the credentials' expiry
SIGNIN_FORM_SECONDS = 3600  # how long a sign-in form's token cookie lasts
SWEEP_BATCH = 100  # expired sessions each sign-in deletes
FORM_LIMIT = 64 * 1024  # a sign-in form is credentials, nothing big
_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")  # 32 random bytes, URL-safe base64 without padding
_HAWK_URL = "http://taskyard-ui.invalid/ui/session"  # what the server signs to check credentials


@dataclass(frozen=True)
class Viewer:
    """A signed-in session: the client it acts as and the token its forms carry."""

    client_id: str
    csrf: str


@dataclass(frozen=True)
class Session:
    """A signed-in session as actions need it: its row's key, the viewer, and the API caller it is."""

    key: str
    viewer: Viewer
    caller: authz.Caller
    expires: int


@dataclass(frozen=True)
class Credentials:
    """What the sign-in form takes: a client's, or temporary credentials (with their certificate)."""

    client_id: str
    access_token: str
    certificate: str | None = None


async def current(ui: UI, request: Request) -> Viewer | None:
    """The session `request` carries (None: nobody is signed in)."""
    session = await signed_in(ui, request)
    return session.viewer if session is not None else None


async def signed_in(ui: UI, request: Request) -> Session | None:
    """The request's session, its credentials checked again (once per request); None if it has
    none, or a stale or forged one, whose cookie the answer then clears (`settle`)."""
    found: Session | bool | None = getattr(request.state, "ui_session", False)
    if found is False:
        try:
            found = await _load(ui, request)
        except Unavailable:
            request.state.ui_session = None  # the error page shows nobody; the cookie stays
            raise
        request.state.ui_session = found
    assert found is not True
    return found or None


def settle(request: Request, response: Response) -> None:
    """Clear a stale or forged session cookie on the way out (every page calls this)."""
    if getattr(request.state, "ui_forget_session", False):
        response.delete_cookie(
            SESSION_COOKIE, path="/", secure=is_https(request), httponly=True, samesite="strict"
        )


def csrf_ok(session: Session, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(session.viewer.csrf.encode(), (given or "").encode())


def is_https(request: Request) -> bool:
    """Whether the browser reached us over https (directly, or through a proxy that says so)."""
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"


async def verify(ui: UI, creds: Credentials) -> hawk.Authenticated:
    """The credentials checked as the API checks a request signed with them; AuthenticationFailed if not."""
    try:
        ext = hawk_client.certificate_ext(creds.certificate)
    except ValueError:
        raise AuthenticationFailed("the certificate is not valid JSON") from None
    header = hawk_client.sign_header("GET", _HAWK_URL, None, "", creds.client_id, creds.access_token, ext=ext)
    request = hawk.Request("GET", "/ui/session", "taskyard-ui.invalid", 80, header, b"", "")
    who = await ui.services.auth.authenticate(request)
    assert who is not None  # a request with an Authorization header is authenticated or refused
    return who


# -------------------------------------------------------------------------------------------------
# The session's row.


async def _load(ui: UI, request: Request) -> Session | None:
    raw = request.cookies.get(SESSION_COOKIE)
    if raw is None:
        return None
    session_id = _decode_id(raw)
    row = None
    if session_id is not None:
        async with ui.services.auth.storage.reader() as db:
            row = await db.fetchrow("ui_session_get", _key(session_id))
    if session_id is None or row is None:
        request.state.ui_forget_session = True  # forged, or signed out elsewhere, or swept
        return None
    key = _key(session_id)
    creds = _unsealed(session_id, row)
    try:
        if creds is None or row["expires"] <= ui.now():
            raise AuthenticationFailed("the session has expired")
        who = await verify(ui, creds)
    except AuthenticationFailed:
        await _end(ui, key)
        request.state.ui_forget_session = True
        return None
    role_set = await ui.services.auth.role_set()
    caller = authz.caller(who.client_id, who.unexpanded_scopes, role_set.expand)
    return Session(key, Viewer(who.client_id, row["csrf"]), caller, row["expires"])


async def _start(
    ui: UI, creds: Credentials, who: hawk.Authenticated, replacing: str | None
) -> tuple[str, int]:
    """A new session for `who` (replacing the request's, if any): its cookie value and expiry."""
    session_id, now = secrets.token_bytes(32), ui.now()
    expires = now + SESSION_MS
    if who.expires_ms is not None:
        expires = min(expires, who.expires_ms)
    async with ui.services.auth.storage.transaction() as tx:
        await tx.execute("ui_session_sweep", now, SWEEP_BATCH)
        if replacing is not None:
            await tx.execute("ui_session_delete", replacing)
        await tx.execute(
            "ui_session_insert",
            session_hash=_key(session_id),
            client_id=who.client_id,
            sealed_token=seal(session_id, creds.access_token),
            certificate=creds.certificate,
            csrf=secrets.token_urlsafe(32),
            created=now,
            expires=expires,
        )
    return _encode_id(session_id), expires


async def _end(ui: UI, key: str) -> None:
    async with ui.services.auth.storage.transaction() as tx:
        await tx.execute("ui_session_delete", key)


def _key(session_id: bytes) -> str:
    return hashlib.sha256(session_id).hexdigest()


def _encode_id(session_id: bytes) -> str:
    return base64.urlsafe_b64encode(session_id).decode().rstrip("=")


def _decode_id(value: str) -> bytes | None:
    if _TOKEN.fullmatch(value) is None:
        return None
    return base64.urlsafe_b64decode(value + "=")


def _keystream(session_id: bytes, size: int) -> bytes:
    blocks = (size + 31) // 32
    stream = b"".join(
        hmac.new(session_id, b"taskyard-ui-session-token:%d" % i, hashlib.sha256).digest()
        for i in range(blocks)
    )
    return stream[:size]


def seal(session_id: bytes, token: str) -> str:
    """`token` encrypted with a key only the session's id gives (a fresh key for each session)."""
    data = token.encode()
    return base64.b64encode(
        bytes(a ^ b for a, b in zip(data, _keystream(session_id, len(data)), strict=True))
    ).decode()


def _unsealed(session_id: bytes, row: Any) -> Credentials | None:
    try:
        data = base64.b64decode(row["sealed_token"], validate=True)
        token = bytes(a ^ b for a, b in zip(data, _keystream(session_id, len(data)), strict=True)).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return Credentials(row["client_id"], token, row["certificate"])


# -------------------------------------------------------------------------------------------------
# The pages: sign in, sign out.


def _signin_token(request: Request) -> str:
    """The sign-in form's double-submit token: the browser's, if it has one already, else a new one."""
    held = request.cookies.get(SIGNIN_COOKIE, "")
    return held if _TOKEN.fullmatch(held) else _encode_id(secrets.token_bytes(32))


async def _signin_page(
    ui: UI,
    request: Request,
    status: int,
    *,
    next_path: str,
    problem: str = "",
    client_id: str = "",
    certificate: str = "",
) -> Response:
    token = _signin_token(request)
    page = await ui.page(
        request,
        "signin.html",
        status,
        signin_token=token,
        next_path=next_path,
        problem=problem,
        client_id=client_id,
        certificate=certificate,
    )
    page.set_cookie(
        SIGNIN_COOKIE,
        token,
        max_age=SIGNIN_FORM_SECONDS,
        path="/signin",
        secure=is_https(request),
        httponly=True,
        samesite="strict",
    )
    return page


async def signin_form(ui: UI, request: Request) -> Response:
    next_path = forms.local_path(request.query_params.get("next")) or "/"
    return await _signin_page(ui, request, 200, next_path=next_path)


async def signin(ui: UI, request: Request) -> Response:
    form = await forms.read(request, FORM_LIMIT)
    next_path = forms.local_path(form.get("next")) or "/"
    given, held = form.get("signin", ""), request.cookies.get(SIGNIN_COOKIE, "")
    if not given or not held or not hmac.compare_digest(given.encode(), held.encode()):
        return await ui.page(
            request,
            "refused.html",
            403,
            title="Sign-in form refused",
            message="This sign-in was not sent from this site's own sign-in form (its form token is missing "
            "or does not match), so it was refused. Open the sign-in page again and sign in there.",
            signin_next=next_path,
            back=next_path,
        )
    certificate = form.get("certificate", "").strip() or None
    creds = Credentials(form.get("clientId", "").strip(), form.get("accessToken", "").strip(), certificate)
    again = {"next_path": next_path, "client_id": creds.client_id, "certificate": certificate or ""}
    missing = [
        name
        for name, value in (("clientId", creds.client_id), ("accessToken", creds.access_token))
        if not value
    ]
    if missing:
        return await _signin_page(ui, request, 400, problem=f"{' and '.join(missing)}: required", **again)
    try:
        who = await verify(ui, creds)
    except AuthenticationFailed as exc:
        return await _signin_page(ui, request, 401, problem=refusal(creds, exc.message), **again)
    old = await signed_in(ui, request)
    cookie, expires = await _start(ui, creds, who, old.key if old is not None else None)
    response = RedirectResponse(forms.with_done(next_path, "signed-in"), 303)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=max(1, (expires - ui.now()) // 1000),
        path="/",
        secure=is_https(request),
        httponly=True,
        samesite="strict",
    )
    response.delete_cookie(
        SIGNIN_COOKIE, path="/signin", secure=is_https(request), httponly=True, samesite="strict"
    )
    return response


def refusal(creds: Credentials, message: str) -> str:
    """Why the credentials were refused, in the sign-in form's words, with the auth service's reason."""
    if message.endswith("Bad mac"):
        what = "the certificate or access token" if creds.certificate else "the access token"
        return f"Sign-in refused: {what} is wrong for client {creds.client_id} ({message})."
    return f"Sign-in refused: {message}"


async def signout(ui: UI, request: Request) -> Response:
    form = await forms.read(request, FORM_LIMIT)
    session = await signed_in(ui, request)
    if session is not None and not csrf_ok(session, form.get("csrf")):
        return await csrf_refused(ui, request)
    if session is not None:
        await _end(ui, session.key)
    response = RedirectResponse(forms.with_done("/", "signed-out"), 303)
    response.delete_cookie(
        SESSION_COOKIE, path="/", secure=is_https(request), httponly=True, samesite="strict"
    )
    return response


async def csrf_refused(ui: UI, request: Request) -> Response:
    """The 403 page for a form without the session's CSRF token, or with a wrong one."""
    return await ui.page(
        request,
        "refused.html",
        403,
        title="Form refused",
        message="This form did not carry this session's CSRF token (it was missing or wrong), so nothing "
        "was done. A form from another site, or from before you signed in again, is refused this way: "
        "go back, reload the page and try again.",
        signin_next="",
        back=forms.referrer_path(request) or "/",
    )


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/signin", view(signin_form)(ui), methods=["GET"]),
        Route("/signin", view(signin)(ui), methods=["POST"]),
        Route("/signout", view(signout)(ui), methods=["POST"]),
    ]
