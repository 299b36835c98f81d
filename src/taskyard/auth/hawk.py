"""Hawk request authentication as TaskCluster does it: headers, bewits and temporary credentials.

Pure and free of I/O: the caller hands in the request, a client lookup and the time. The checks, their
order and their messages follow TaskCluster's auth service (hawk 9 plus `signaturevalidator.js`):

    parse header -> ext + client lookup + certificate -> MAC -> timestamp -> payload hash

Role expansion is a seam: `authenticate(expand=...)` is applied to a client's own scopes before the
certificate checks and, with `assume:anonymous`, before the `authorizedScopes` check. It defaults to no
roles. The result keeps the scopes *unexpanded*; the caller expands `Authenticated.unexpanded_scopes`
plus `assume:anonymous` to get what the request may do.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from taskyard.auth.nonces import Replayed, SeenRequests, TooOld
from taskyard.model import slugid
from taskyard.model.errors import AuthenticationFailed
from taskyard.model.scopes import satisfies_all

Satisfies = Callable[[Sequence[str], Sequence[str]], bool]
Expand = Callable[[Sequence[str]], Sequence[str]]

MAX_HEADER_LENGTH = 4096  # hawk's limit for the Authorization header and a bewit URL
TIMESTAMP_SKEW_MS = 15 * 60 * 1000  # TaskCluster allows 15 minutes of client clock skew
CERTIFICATE_SKEW_MS = 5 * 60 * 1000
MAX_CERTIFICATE_MS = 31 * 24 * 60 * 60 * 1000
ANONYMOUS = "assume:anonymous"
ATTRIBUTES = ("id", "ts", "nonce", "hash", "ext", "mac", "app", "dlg")
MAX_INT_DIGITS = 16  # a longer port or bewit expiry is no real one (and int() refuses 4301 digits)

_BAD_REQUEST = "Bad Request"
_UNAUTHORIZED = "Unauthorized"
# JS regexes from hawk; `\w` there is ASCII, `$` is the very end (hence `\Z`).
_HEADER_RE = re.compile(r"([A-Za-z0-9_]+)(?:\s+(.*))?\Z")
_ATTRIBUTE_RE = re.compile(r'([A-Za-z0-9_]+)="([^"\\]*)"\s*(?:,\s*|\Z)')
_VALUE_RE = re.compile(r"[ A-Za-z0-9_!#$%&'()*+,\-./:;<=>?@\[\]^`{|}~]+")
# A header whose attributes all pass `_check_attributes()` (short of a repeated one): the same
# tokens, with the names it knows and the values `_VALUE_RE` takes (printable ASCII but `"` and `\`).
_WELL_FORMED_RE = re.compile(r"(?:(?:" + "|".join(ATTRIBUTES) + r')="[ !#-\[\]-~]+"\s*(?:,\s*|\Z))+')
_PAIR_RE = re.compile(r'([a-z]+)="([^"]*)"')
_HAS_BEWIT_RE = re.compile(r"/.*[?&]bewit=")
_BEWIT_RE = re.compile(r"(/.*)([?&])bewit=([^&$]*)(?:&(.+))?\Z")
_BEWIT_VALUE_RE = re.compile(r"[A-Za-z0-9_\-]*")
# JS's `\d` is ASCII, Python's is any Unicode digit: spelled `[0-9]` here.
_HOST_RE = re.compile(r"(?:(?:\r\n)?\s)*([^:]+|\[[^\]]+\])(?::([0-9]+))?(?:(?:\r\n)?\s)*\Z")
_JS_INT_RE = re.compile(r"\s*([+-]?[0-9]+)")
_DECIMAL_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SCOPE_RE = re.compile(r"[\x20-\x7e]*")


@dataclass(frozen=True)
class Request:
    """What Hawk signs: `resource` is path + query exactly as sent; `body` is the raw body."""

    method: str
    resource: str
    host: str
    port: int
    authorization: str | None
    body: bytes
    content_type: str


@dataclass(frozen=True)
class ClientSecret:
    """A permanent client as the lookup returns it; `scopes` are its own scopes, unexpanded."""

    client_id: str
    access_token: str = field(repr=False)
    scopes: tuple[str, ...]
    expires_ms: int | None
    disabled: bool


@dataclass(frozen=True)
class Authenticated:
    """Who made the request: the client's (or certificate's) scopes and any `authorizedScopes`."""

    client_id: str
    scopes: tuple[str, ...]
    authorized_scopes: tuple[str, ...] | None
    via_bewit: bool
    expires_ms: int | None = None  # the client's expiry, or the certificate's if earlier
    payload_hash: str | None = field(default=None, compare=False)  # the header's `hash`, if any
    # A header's MAC, and until when (epoch ms) a replay of it could pass the timestamp check; None
    # for a bewit, which is meant to be used again until it expires.
    replay_key: tuple[str, int] | None = field(default=None, compare=False)

    @property
    def unexpanded_scopes(self) -> tuple[str, ...]:
        """The scopes to role-expand (with `assume:anonymous`) for this request."""
        return self.scopes if self.authorized_scopes is None else self.authorized_scopes


@dataclass(frozen=True)
class _Context:
    lookup: Callable[[str], Awaitable[ClientSecret | None]]
    now_ms: int
    satisfies: Satisfies
    expand: Expand
    check_payload: bool = True
    seen: SeenRequests | None = None
    verified: VerifiedCredentials | None = None


@dataclass(frozen=True)
class _Credentials:
    client_id: str
    key: str = field(repr=False)
    scopes: tuple[str, ...]
    expires_ms: int | None
    authorized_scopes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class _Verified:
    client: ClientSecret  # the issuing client's record, as the lookup answered it
    expand: Expand
    satisfies: Satisfies
    creds: _Credentials
    certificate_expiry: float | None  # None: the ext carries no certificate


class VerifiedCredentials:
    """Credentials already built from an `ext` (certificate checks and signature, derived key,
    authorizedScopes), by (id, ext text), so a worker's temporary credentials are checked once.

    An entry is used only while the lookup answers the very same client record and the role
    expansion is the very same: a change to clients or roles makes the owner load new ones (and
    `clear()` this), so the checks run again. The client's own checks (unknown, disabled,
    expired) and the certificate's expiry are made again on every request.
    """

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._entries: dict[tuple[str, str], _Verified] = {}

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _get(self, name: str, ext: str) -> _Verified | None:
        return self._entries.get((name, ext))

    def _keep(self, name: str, ext: str, entry: _Verified) -> None:
        if len(self._entries) >= self.limit:
            self._entries.clear()
        self._entries[(name, ext)] = entry


@dataclass(frozen=True)
class MacInput:
    ts: str
    nonce: str
    method: str
    resource: str
    host: str
    port: int
    hash: str = ""
    ext: str = ""
    app: str = ""
    dlg: str = ""


@dataclass(frozen=True)
class _Bewit:
    client_id: str
    exp: int
    mac: str
    ext: str
    resource: str  # the request target with `bewit=...` removed


@dataclass(frozen=True)
class _Ext:
    certificate: Any = None
    authorized_scopes: Any = None


@dataclass(frozen=True)
class _Certificate:
    scopes: tuple[str, ...]
    start: float
    expiry: float
    seed: str
    signature: Any
    issuer: Any
    has_client_id: bool


# ---------------------------------------------------------------------------------------------------
# Scopes: satisfaction is `model.scopes.satisfies_all`; roles come later through `expand`.


def _no_roles(scopes: Sequence[str]) -> Sequence[str]:
    return scopes


def _valid_scope(scope: object) -> bool:
    return isinstance(scope, str) and _SCOPE_RE.fullmatch(scope) is not None


# ---------------------------------------------------------------------------------------------------
# Entry points.


def host_port(
    host_header: str | None, scheme: str, forwarded_port: str | None, forwarded_proto: str | None
) -> tuple[str, int]:
    """Host and port the client signed, from `Host` and a proxy's `X-Forwarded-Port`/`-Proto`."""
    default = 443 if scheme.lower() == "https" else 80
    match = _HOST_RE.fullmatch(host_header or "")
    if match is None or len(match[2] or "") > MAX_INT_DIGITS:  # no usable Host: the MAC cannot match
        host, port = "", default
    else:
        host, port = match[1].lower(), int(match[2]) if match[2] else default
    if forwarded_port is not None:
        forwarded = _js_parse_int(forwarded_port)
        port = port if forwarded is None else forwarded
    elif forwarded_proto == "https":
        port = 443
    return host, port


async def authenticate(
    req: Request,
    lookup: Callable[[str], Awaitable[ClientSecret | None]],
    *,
    now_ms: int,
    satisfies: Satisfies = satisfies_all,
    expand: Expand = _no_roles,
    check_payload: bool = True,
    seen: SeenRequests | None = None,
    verified: VerifiedCredentials | None = None,
) -> Authenticated | None:
    """Check the request's Hawk header or bewit; None if it carries neither.

    Raises `AuthenticationFailed` with TaskCluster's message for every refusal. `expand` is the role
    expansion seam (identity by default); `satisfies` decides scope satisfaction. Without
    `check_payload` the header's payload hash is left to the caller (`Authenticated.payload_hash`),
    as authenticateHawk does for the services that call it. With `seen`, a header accepted before
    by this process is refused as a replay (`auth/nonces.py`); the result's `replay_key` lets the
    caller record it for good (`Auth.authenticate(remember=True)`). With `verified`, credentials
    built from an `ext` are kept there and reused while the client and roles stay the same
    (`VerifiedCredentials`).
    """
    ctx = _Context(lookup, now_ms, satisfies, expand, check_payload, seen, verified)
    has_bewit = _HAS_BEWIT_RE.match(req.resource) is not None
    if req.authorization and has_bewit:
        raise AuthenticationFailed(
            "Cannot use two authentication schemes at once this request has both bewit in "
            "querystring and 'authorization' header"
        )
    if req.authorization:
        return await _authenticate_header(req, req.authorization, ctx)
    if has_bewit:
        return await _authenticate_bewit(req, ctx)
    return None


# ---------------------------------------------------------------------------------------------------
# The Authorization header.


async def _authenticate_header(req: Request, header: str, ctx: _Context) -> Authenticated:
    attrs = parse_authorization_header(header)
    if not all(attrs.get(k) for k in ("id", "ts", "nonce", "mac")):
        raise _hawk_error(_BAD_REQUEST, "Missing attributes")
    creds = await _load_credentials(attrs["id"], attrs.get("ext", ""), ctx)
    # MacInput's fields, without building one: this is every signed request's path.
    get = attrs.get
    normalized = _normalized(
        "header",
        attrs["ts"],
        attrs["nonce"],
        req.method,
        req.resource,
        req.host,
        req.port,
        get("hash", ""),
        get("ext", ""),
        get("app", ""),
        get("dlg", ""),
    )
    if not _equal(_hmac_b64(creds.key, normalized), attrs["mac"]):
        raise _hawk_error(_UNAUTHORIZED, "Bad mac")
    ts_ms = _check_timestamp(attrs["ts"], ctx.now_ms)
    if attrs.get("hash") and ctx.check_payload:
        _check_payload_hash(attrs["hash"], req)
    if ctx.seen is not None:
        _check_not_replayed(ctx.seen, attrs["mac"], ts_ms, ctx.now_ms)
    replay_key = (attrs["mac"], ts_ms + TIMESTAMP_SKEW_MS)
    return _result(creds, via_bewit=False, payload_hash=attrs.get("hash") or None, replay_key=replay_key)


def parse_authorization_header(header: str) -> dict[str, str]:
    """The attributes of a `Hawk ...` header, refused exactly where hawk 9 refuses them."""
    if len(header) > MAX_HEADER_LENGTH:
        raise _hawk_error(_BAD_REQUEST, "Header length too long")
    match = _HEADER_RE.fullmatch(header)
    if match is None:
        raise _hawk_error(_BAD_REQUEST, "Invalid header syntax")
    if match[1].lower() != "hawk":
        raise _hawk_error(_UNAUTHORIZED, "Unauthorized")
    if not match[2]:
        raise _hawk_error(_BAD_REQUEST, "Invalid header syntax")
    return _parse_attributes(match[2])


def _parse_attributes(text: str) -> dict[str, str]:
    # What every client sends: known attributes, each once, each value well formed. Such a header
    # is taken apart by two regexes; any other gets the full check (and its message) below.
    if _WELL_FORMED_RE.fullmatch(text) is not None:
        pairs = _PAIR_RE.findall(text)
        attributes = dict(pairs)
        if len(attributes) == len(pairs):
            return attributes
    return _check_attributes(text)


def _check_attributes(text: str) -> dict[str, str]:
    """The header's attributes, each checked in turn as hawk checks them: the last error wins."""
    attributes: dict[str, str] = {}
    errors: list[str] = []

    def take(m: re.Match[str]) -> str:
        key, value = m[1], m[2]
        if key not in ATTRIBUTES:
            errors.append(f"Unknown attribute: {key}")
        elif _VALUE_RE.fullmatch(value) is None:
            errors.append(f"Bad attribute value: {key}")
        elif key in attributes:
            errors.append(f"Duplicate attribute: {key}")
        else:
            attributes[key] = value
            return ""
        return "\0"  # leave something behind, as hawk's replace() does

    if _ATTRIBUTE_RE.sub(take, text) != "":
        raise _hawk_error(_BAD_REQUEST, errors[-1] if errors else "Bad header format")
    return attributes


def _check_timestamp(ts: str, now_ms: int) -> int:
    """The timestamp in epoch ms, if within the skew allowed of `now_ms`; 401 if not."""
    # hawk coerces with Number(); a ts that is not a number is refused here rather than never stale.
    seconds = float(ts) if _DECIMAL_RE.fullmatch(ts.strip()) else None
    if seconds is None or abs(seconds * 1000 - now_ms) > TIMESTAMP_SKEW_MS:
        raise _hawk_error(_UNAUTHORIZED, "Stale timestamp")
    return int(seconds * 1000)


def _check_not_replayed(seen: SeenRequests, mac: str, ts_ms: int, now_ms: int) -> None:
    try:
        seen.admit(mac, ts_ms, now_ms)
    except Replayed:
        raise _hawk_error(
            _UNAUTHORIZED, "Replayed request: this signed request was accepted before; sign each request anew"
        ) from None
    except TooOld:
        raise _hawk_error(_UNAUTHORIZED, "Stale timestamp") from None


def _check_payload_hash(given: str, req: Request) -> None:
    # Like TaskCluster's API layer, only an application/json body is read; any other body hashes as empty.
    content_type = _media_type(req.content_type)
    body = req.body if content_type == "application/json" else b""
    computed = payload_hash(body.decode("utf-8", "replace").encode("utf-8"), content_type)
    if not _equal(computed, given):
        raise AuthenticationFailed(
            f"Invalid payload hash: {given}\nComputed payload hash: {computed}\n"
            "This happens when your request carries a signed hash of the payload and the hash "
            "doesn't match the hash we've computed on the server-side."
        )


# ---------------------------------------------------------------------------------------------------
# Bewits.


async def _authenticate_bewit(req: Request, ctx: _Context) -> Authenticated:
    bewit = _parse_bewit(req)
    if bewit.exp * 1000 <= ctx.now_ms:
        raise _hawk_error(_UNAUTHORIZED, "Access expired")
    creds = await _load_credentials(bewit.client_id, bewit.ext, ctx)
    artifacts = MacInput(
        ts=str(bewit.exp),
        nonce="",
        method="GET",
        resource=bewit.resource,
        host=req.host,
        port=req.port,
        ext=bewit.ext,
    )
    if not _equal(calculate_mac("bewit", creds.key, artifacts), bewit.mac):
        raise _hawk_error(_UNAUTHORIZED, "Bad mac")
    return _result(creds, via_bewit=True)


def _parse_bewit(req: Request) -> _Bewit:
    if len(req.resource) > MAX_HEADER_LENGTH:
        raise _hawk_error(_BAD_REQUEST, "Resource path exceeds max length")
    match = _BEWIT_RE.fullmatch(req.resource)
    if match is None:
        raise _hawk_error(_UNAUTHORIZED, "Unauthorized")
    if not match[3]:
        raise _hawk_error(_UNAUTHORIZED, "Empty bewit")
    if req.method.upper() not in ("GET", "HEAD"):
        raise _hawk_error(_UNAUTHORIZED, "Invalid method")
    parts = _decode_bewit(match[3]).split("\\")
    if len(parts) != 4:
        raise _hawk_error(_BAD_REQUEST, "Invalid bewit structure")
    exp = _js_parse_int(parts[1])
    if not parts[0] or not exp or not parts[2]:
        raise _hawk_error(_BAD_REQUEST, "Missing bewit attributes")
    resource = match[1] + (match[2] + match[4] if match[4] else "")
    return _Bewit(client_id=parts[0], exp=exp, mac=parts[2], ext=parts[3], resource=resource)


def _decode_bewit(value: str) -> str:
    try:
        if _BEWIT_VALUE_RE.fullmatch(value) is None:
            raise ValueError("invalid character")
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (ValueError, binascii.Error):
        raise _hawk_error(_BAD_REQUEST, "Invalid bewit encoding") from None
    return raw.decode("latin-1")  # node's 'binary'


# ---------------------------------------------------------------------------------------------------
# MACs and hashes.


def calculate_mac(kind: str, key: str, a: MacInput) -> str:
    """base64 HMAC-SHA256 of hawk's normalized string; `kind` is "header" or "bewit"."""
    text = _normalized(kind, a.ts, a.nonce, a.method, a.resource, a.host, a.port, a.hash, a.ext, a.app, a.dlg)
    return _hmac_b64(key, text)


def _normalized(
    kind: str,
    ts: str,
    nonce: str,
    method: str,
    resource: str,
    host: str,
    port: int,
    hash: str,
    ext: str,
    app: str,
    dlg: str,
) -> str:
    """Hawk's normalized string, which the MAC signs."""
    # hawk escapes only the first backslash and newline of ext (JS string replace).
    ext = ext.replace("\\", "\\\\", 1).replace("\n", "\\n", 1)
    return (
        f"hawk.1.{kind}\n{ts}\n{nonce}\n{method.upper()}\n{resource}\n{host.lower()}\n{port}\n"
        f"{hash}\n{ext}\n" + (f"{app}\n{dlg}\n" if app else "")
    )


def payload_hash(body: bytes, content_type: str) -> str:
    """Hawk's payload hash of `body` sent with Content-Type `content_type`."""
    digest = hashlib.sha256(f"hawk.1.payload\n{_media_type(content_type)}\n".encode())
    digest.update(body)
    digest.update(b"\n")
    return base64.b64encode(digest.digest()).decode()


def _media_type(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()


def _hmac_b64(key: str, message: str, *, urlsafe: bool = False) -> str:
    mac = hmac.digest(key.encode(), message.encode(), "sha256")  # one call into OpenSSL
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(mac).decode()


def _equal(expected: str, given: str) -> bool:
    return hmac.compare_digest(expected.encode(), given.encode())


# ---------------------------------------------------------------------------------------------------
# Credentials: the client, the ext field and temporary credentials.


async def _load_credentials(name: str, ext_value: str, ctx: _Context) -> _Credentials:
    cache = ctx.verified if ext_value else None
    if cache is not None:
        known = cache._get(name, ext_value)
        if known is not None:
            client = await _load_client(known.client.client_id, ctx)  # refused as before if it is
            if _still_valid(known, client, ctx):
                return known.creds
    ext = _parse_ext(ext_value) if ext_value else _Ext()
    issuer = _issuer_of(ext.certificate, name)
    client = await _load_client(issuer, ctx)
    creds = _Credentials(name, client.access_token, client.scopes, client.expires_ms)
    expiry = None
    if _truthy(ext.certificate):
        # seam: the issuer's scopes are role-expanded before the certificate is checked against them
        held = tuple(ctx.expand(client.scopes))
        creds, expiry = _apply_certificate(creds, ext.certificate, issuer, held, ctx)
    if _truthy(ext.authorized_scopes):
        creds = _apply_authorized_scopes(creds, ext.authorized_scopes, ctx)
    if cache is not None:
        cache._keep(name, ext_value, _Verified(client, ctx.expand, ctx.satisfies, creds, expiry))
    return creds


def _still_valid(known: _Verified, client: ClientSecret, ctx: _Context) -> bool:
    """Whether credentials checked before still stand: the same client record and roles (bound
    methods compare their object by identity), and a certificate not expired since."""
    return (
        client is known.client
        and ctx.expand == known.expand
        and ctx.satisfies is known.satisfies
        and (known.certificate_expiry is None or known.certificate_expiry >= ctx.now_ms - CERTIFICATE_SKEW_MS)
    )


async def _load_client(client_id: str, ctx: _Context) -> ClientSecret:
    client = await ctx.lookup(client_id)
    if client is None:
        raise AuthenticationFailed(f"Client with clientId '{client_id}' not found")
    if client.disabled:
        raise AuthenticationFailed(f"Client with clientId '{client_id}' is disabled")
    if client.expires_ms is not None and client.expires_ms < ctx.now_ms:
        raise AuthenticationFailed(f"Client with clientId: '{client_id}' has expired")
    return client


def _parse_ext(value: str) -> _Ext:
    """Decode ext: base64 (either alphabet, padding optional) of a JSON object."""
    try:
        text = value.replace("-", "+").replace("_", "/").rstrip("=")
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        parsed = _JSON.decode(raw.decode("utf-8", "replace"))
    except (ValueError, binascii.Error):
        raise AuthenticationFailed("Failed to parse ext") from None
    if not isinstance(parsed, dict):  # JSON that is not an object carries no fields
        return _Ext()
    return _Ext(_decode_certificate(parsed.get("certificate")), parsed.get("authorizedScopes"))


def _decode_certificate(cert: Any) -> Any:
    # Beyond TaskCluster: also take the certificate as the JSON string clients store it as.
    if isinstance(cert, str) and cert:
        try:
            decoded = _JSON.decode(cert)
        except ValueError:
            return cert  # refused later as "must be a JSON object", in TaskCluster's order
        return decoded if isinstance(decoded, dict) else cert
    return cert


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# json.loads(text, parse_constant=...) and json.dumps(value, separators=...) build a decoder or
# an encoder per call; one of each serves every call.
_JSON = json.JSONDecoder(parse_constant=_reject_constant)
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))


def _issuer_of(cert: Any, name: str) -> str:
    issuer = cert.get("issuer") if isinstance(cert, dict) else None
    if not _truthy(issuer):
        return name
    if not isinstance(issuer, str):
        raise AuthenticationFailed("ext.certificate.issuer must be a string")
    if issuer == name:
        raise AuthenticationFailed("ext.certificate.issuer must differ from the supplied clientId")
    return issuer


def _apply_certificate(
    creds: _Credentials, raw: Any, issuer: str, held: tuple[str, ...], ctx: _Context
) -> tuple[_Credentials, float]:
    """TaskCluster's certificate checks 1-14, then the temporary key, expiry and scopes; and the
    certificate's expiry."""
    cert = _parse_certificate(raw)
    _check_certificate_time(cert, ctx.now_ms)
    _check_issuer_rights(cert, creds.client_id, issuer, held, ctx.satisfies)
    expected = _certificate_signature(
        creds.key, cert.seed, cert.start, cert.expiry, cert.scopes, _named(cert, creds.client_id)
    )
    if not isinstance(cert.signature, str) or not _equal(expected, cert.signature):
        wrong_name = ", or wrong clientId provided" if _truthy(cert.issuer) else ""
        raise AuthenticationFailed(f"ext.certificate.signature is not valid{wrong_name}")
    expires = int(cert.expiry) if creds.expires_ms is None else min(creds.expires_ms, int(cert.expiry))
    derived = replace(
        creds, key=derive_access_token(creds.key, cert.seed), scopes=cert.scopes, expires_ms=expires
    )
    return derived, cert.expiry


def _parse_certificate(raw: Any) -> _Certificate:
    if not isinstance(raw, dict | list):  # a JS array is an object too; it then fails on version
        raise AuthenticationFailed("ext.certificate must be a JSON object")
    cert: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if not (_is_number(cert.get("version")) and cert["version"] == 1):
        raise AuthenticationFailed("ext.certificate.version must be 1")
    seed = cert.get("seed")
    if not isinstance(seed, str):
        raise AuthenticationFailed("ext.certificate.seed must be a string")
    if len(seed.encode("utf-16-le")) // 2 != 44:  # JS length counts UTF-16 units
        raise AuthenticationFailed("ext.certificate.seed must be 44 characters")
    for key in ("start", "expiry"):
        if not _is_number(cert.get(key)):
            raise AuthenticationFailed(f"ext.certificate.{key} must be a number")
    scopes = cert.get("scopes")
    if not isinstance(scopes, list):
        raise AuthenticationFailed("ext.certificate.scopes must be an array")
    if not all(_valid_scope(s) for s in scopes):
        raise AuthenticationFailed("ext.certificate.scopes must be an array of valid scopes")
    return _Certificate(
        scopes=tuple(scopes),
        start=cert["start"],
        expiry=cert["expiry"],
        seed=seed,
        signature=cert.get("signature"),
        issuer=cert.get("issuer"),
        has_client_id="clientId" in cert,
    )


def _check_certificate_time(cert: _Certificate, now_ms: int) -> None:
    if cert.start > now_ms + CERTIFICATE_SKEW_MS:
        raise AuthenticationFailed("ext.certificate.start > now")
    if cert.expiry < now_ms - CERTIFICATE_SKEW_MS:
        raise AuthenticationFailed("ext.certificate.expiry < now")
    if cert.expiry - cert.start > MAX_CERTIFICATE_MS:
        raise AuthenticationFailed("ext.certificate cannot last longer than 31 days!")


def _check_issuer_rights(
    cert: _Certificate, name: str, issuer: str, held: tuple[str, ...], satisfies: Satisfies
) -> None:
    if issuer != name:
        create = f"auth:create-client:{name}"
        if not satisfies(held, [create]):
            raise AuthenticationFailed(
                f"ext.certificate issuer `{issuer}` doesn't have `{create}` for supplied clientId."
            )
    elif cert.has_client_id:
        raise AuthenticationFailed("ext.certificate.clientId must only be used with ext.certificate.issuer")
    if not satisfies(held, cert.scopes):
        raise AuthenticationFailed(
            f"ext.certificate issuer `{issuer}` doesn't satisfy all certificate scopes "
            f"{', '.join(cert.scopes)}.  The temporary credentials were not generated correctly."
        )


def _named(cert: _Certificate, name: str) -> tuple[str, str] | None:
    return (name, cert.issuer) if _truthy(cert.issuer) else None


def _apply_authorized_scopes(creds: _Credentials, authorized: Any, ctx: _Context) -> _Credentials:
    if not isinstance(authorized, list):
        raise AuthenticationFailed("ext.authorizedScopes must be an array")
    if not all(_valid_scope(s) for s in authorized):
        raise AuthenticationFailed("ext.authorizedScopes must be an array of valid scopes")
    # seam: the credentials' scopes plus the anonymous role, role-expanded
    held = tuple(ctx.expand(_with_anonymous(creds.scopes)))
    if not ctx.satisfies(held, authorized):
        fence = "\n".join
        raise AuthenticationFailed(
            "Supplied credentials do not satisfy authorizedScopes; credentials have scopes:\n\n"
            f"```\n{fence(held)}\n```\n\nauthorizedScopes are:\n\n```\n{fence(authorized)}\n```"
        )
    return replace(creds, authorized_scopes=tuple(authorized))


def _with_anonymous(scopes: Sequence[str]) -> tuple[str, ...]:
    return tuple(scopes) if ANONYMOUS in scopes else (*scopes, ANONYMOUS)


def _result(
    creds: _Credentials,
    *,
    via_bewit: bool,
    payload_hash: str | None = None,
    replay_key: tuple[str, int] | None = None,
) -> Authenticated:
    return Authenticated(
        client_id=creds.client_id,
        scopes=creds.scopes,
        authorized_scopes=creds.authorized_scopes,
        via_bewit=via_bewit,
        expires_ms=creds.expires_ms,
        payload_hash=payload_hash,
        replay_key=replay_key,
    )


# ---------------------------------------------------------------------------------------------------
# Issuing temporary credentials (the queue's task credentials).


def create_certificate(
    issuer_client_id: str,
    issuer_access_token: str,
    scopes: Sequence[str],
    *,
    start_ms: int,
    expiry_ms: int,
    seed: str,
    client_id: str | None = None,
) -> dict[str, Any]:
    """A signed certificate, key for key as the Python client builds it; named if `client_id`."""
    cert: dict[str, Any] = {
        "version": 1,
        "scopes": list(scopes),
        "start": start_ms,
        "expiry": expiry_ms,
        "seed": seed,
    }
    if client_id:
        cert["issuer"] = issuer_client_id
    named = (client_id, issuer_client_id) if client_id else None
    cert["signature"] = _certificate_signature(issuer_access_token, seed, start_ms, expiry_ms, scopes, named)
    return cert


class TemporaryCredentials(TypedDict):
    clientId: str
    accessToken: str
    certificate: str  # the certificate as a JSON string


def temporary_credentials(  # positional as the queue calls it: the one exception to keyword-only
    issuer_client_id: str,
    issuer_access_token: str,
    scopes: Sequence[str],
    start_ms: int,
    expiry_ms: int,
    client_id: str | None = None,
    *,
    seed: str | None = None,
) -> TemporaryCredentials:
    """`{clientId, accessToken, certificate}` (certificate as a JSON string), as TaskCluster issues them.

    Named when `client_id` is given. `seed` (44 characters) is random unless given, for tests.
    """
    if expiry_ms - start_ms > MAX_CERTIFICATE_MS:
        raise ValueError("temporary credentials cannot last longer than 31 days")
    if client_id == issuer_client_id:
        raise ValueError("a named temporary credential's clientId must differ from its issuer")
    seed = seed or slugid.nice() + slugid.nice()
    cert = create_certificate(
        issuer_client_id,
        issuer_access_token,
        scopes,
        start_ms=start_ms,
        expiry_ms=expiry_ms,
        seed=seed,
        client_id=client_id,
    )
    return {
        "clientId": client_id or issuer_client_id,
        "accessToken": derive_access_token(issuer_access_token, seed),
        "certificate": _COMPACT_JSON.encode(cert),
    }


def derive_access_token(issuer_access_token: str, seed: str) -> str:
    """The temporary access token: URL-safe base64 HMAC-SHA256 of the seed, padding dropped."""
    return _hmac_b64(issuer_access_token, seed, urlsafe=True).rstrip("=")


def _certificate_signature(
    token: str,
    seed: str,
    start: float,
    expiry: float,
    scopes: Sequence[str],
    named: tuple[str, str] | None,
) -> str:
    lines = ["version:1"]
    if named is not None:
        lines += [f"clientId:{named[0]}", f"issuer:{named[1]}"]
    lines += [f"seed:{seed}", f"start:{_js_number(start)}", f"expiry:{_js_number(expiry)}", "scopes:"]
    return _hmac_b64(token, "\n".join([*lines, *scopes]))


# ---------------------------------------------------------------------------------------------------
# JavaScript semantics the server relies on.


def _truthy(value: Any) -> bool:
    """JS truthiness of a parsed JSON value: `[]` and `{}` are true; null, false, 0 and "" are not."""
    return value is not None and value is not False and value != 0 and value != ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _js_number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


def _js_parse_int(text: str) -> int | None:
    match = _JS_INT_RE.match(text)
    return int(match[1]) if match and len(match[1].lstrip("+-")) <= MAX_INT_DIGITS else None


def _hawk_error(reason: str, message: str) -> AuthenticationFailed:
    """An error as hawk reports it: `<HTTP reason>: <message>`."""
    return AuthenticationFailed(f"{reason}: {message}")
