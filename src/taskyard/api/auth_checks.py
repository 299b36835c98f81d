"""The auth service's authentication endpoints: authenticateHawk and the two test-authenticate calls.

authenticateHawk checks a request another service received (no scopes needed) and answers who
made it. testAuthenticate and testAuthenticateGet authenticate the request itself against a
fixed client, `tester` with the access token `no-secret`, so that client libraries can check
their signing against the server; its scopes are not role-expanded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NotRequired, TypedDict

from taskyard.api import authz
from taskyard.api.routing import Call
from taskyard.auth import hawk
from taskyard.model import dates, schema, scopes
from taskyard.model.errors import AuthenticationFailed

ANONYMOUS_EXPIRY_MS = 15 * dates.MINUTE
STATIC_EXPIRES = "3000-01-01T00:00:00.000Z"  # what TaskCluster answers for clients that never expire
TESTER = "tester"
TESTER_TOKEN = "no-secret"
TESTER_GET_SCOPES = ("test:*", "auth:create-client:test:*")
METHODS = (  # noqa: SIM905 (the lower-case HTTP methods TaskCluster's schema lists)
    "get post put head delete options trace copy lock mkcol move purge propfind proppatch unlock "
    "report mkactivity checkout merge m-search notify subscribe unsubscribe patch search connect"
).split()

_SCOPES = schema.array(schema.string(pattern=r"^[\x20-\x7e]*$"), unique=True)
AUTHENTICATE_HAWK = schema.obj(
    {
        "method": schema.enum(*METHODS),
        "resource": schema.string(),
        "host": schema.string(min_length=1, max_length=253),
        "port": schema.integer(minimum=0, maximum=65535),
        "authorization": schema.string(),
        "sourceIp": schema.string(),
    },
    required=["method", "resource", "host", "port"],
    additional=False,
)
TEST_AUTHENTICATE = schema.obj(
    {"clientScopes": _SCOPES, "requiredScopes": _SCOPES},
    required=["clientScopes", "requiredScopes"],
    additional=False,
)
REQUIRED_SCOPES = {"AllOf": [{"for": "scope", "in": "requiredScopes", "each": "<scope>"}]}


class HawkRequest(TypedDict):
    """authenticateHawk's body (AUTHENTICATE_HAWK): the request another service received."""

    method: str
    resource: str
    host: str
    port: int
    authorization: NotRequired[str]
    sourceIp: NotRequired[str]


class TestRequest(TypedDict):
    """testAuthenticate's body (TEST_AUTHENTICATE)."""

    clientScopes: list[str]
    requiredScopes: list[str]


class AuthFailed(TypedDict):
    status: Literal["auth-failed"]
    message: str


class NoAuth(TypedDict):
    status: Literal["no-auth"]
    scheme: Literal["none"]
    scopes: list[str]
    expires: str


class AuthSuccess(TypedDict):
    status: Literal["auth-success"]
    scheme: Literal["hawk"]
    clientId: str
    scopes: list[str]
    expires: str
    hash: NotRequired[str]


class TestAnswer(TypedDict):
    clientId: str
    scopes: list[str]


async def authenticate_hawk(call: Call) -> AuthFailed | NoAuth | AuthSuccess:
    """Who signed the described request: `auth-success`, `no-auth` or `auth-failed` (always 200)."""
    body = call.body_as(HawkRequest)
    request = hawk.Request(
        method=body["method"].upper(),
        resource=body["resource"],
        host=body["host"],
        port=body["port"],
        authorization=body.get("authorization"),
        body=b"",
        content_type="",
    )
    auth = call.services.auth
    try:
        # The calling service has the body: it checks the payload hash, which it gets back as `hash`.
        who = await auth.authenticate(request, check_payload=False)
    except AuthenticationFailed as exc:
        return {"status": "auth-failed", "message": exc.message}
    if who is None:
        return {
            "status": "no-auth",
            "scheme": "none",
            "scopes": await auth.expand([authz.ANONYMOUS]),
            "expires": dates.to_iso(dates.now_ms() + ANONYMOUS_EXPIRY_MS),
        }
    result: AuthSuccess = {
        "status": "auth-success",
        "scheme": "hawk",
        "clientId": who.client_id,
        "scopes": await auth.expand([*who.unexpanded_scopes, authz.ANONYMOUS]),
        "expires": STATIC_EXPIRES if who.expires_ms is None else dates.to_iso(who.expires_ms),
    }
    if who.payload_hash:
        result["hash"] = who.payload_hash
    return result


async def test_authenticate(call: Call) -> TestAnswer:
    """Authenticate as `tester` holding the body's `clientScopes`; require its `requiredScopes`."""
    body = call.body_as(TestRequest)
    who = await _as_tester(call, body["clientScopes"])
    authz.require(who, REQUIRED_SCOPES, {"requiredScopes": body["requiredScopes"]})
    return _answer(who)


async def test_authenticate_get(call: Call) -> TestAnswer:
    """Authenticate as `tester` holding `test:*` and `auth:create-client:test:*` (bewits work too)."""
    who = await _as_tester(call, TESTER_GET_SCOPES)
    authz.require(who, "test:authenticate-get", {})
    return _answer(who)


async def _as_tester(call: Call, tester_scopes: Sequence[str]) -> authz.Caller:
    async def lookup(client_id: str) -> hawk.ClientSecret | None:
        if client_id != TESTER:
            return None
        return hawk.ClientSecret(TESTER, TESTER_TOKEN, tuple(tester_scopes), None, False)

    assert call.request is not None, "the route declares own_auth, so the edge passes the request"
    who = await hawk.authenticate(call.request, lookup, now_ms=dates.now_ms())
    if who is None:
        return authz.caller(None, (), scopes.normalize)
    return authz.caller(who.client_id, who.unexpanded_scopes, scopes.normalize)


def _answer(who: authz.Caller) -> TestAnswer:
    return {"clientId": who.client_id or "auth-failed:no-auth", "scopes": list(who.scopes)}
