"""The auth service in-process (both backends): who may call what, authenticateHawk, test-authenticate."""

from __future__ import annotations

import taskcluster

from tests.api.conftest import BASE, ROOT, Api, Credentials, assert_error, hawk_header
from tests.api.helpers import ANONYMOUS_ROLE, EXPIRES, call, create_client, ok

# ---------------------------------------------------------------------------------------------------
# Scopes: who may do what


async def test_a_limited_client_cannot_grant_scopes_it_does_not_hold(api: Api) -> None:
    await ok(await call(api, "PUT", "/roles/team", {"description": "d", "scopes": ["queue:status:*"]}))
    limited = await create_client(
        api,
        "limited",
        "auth:create-client:limited/*",
        "auth:update-client:limited/*",
        "auth:create-role:limited/*",
        "auth:update-role:limited/*",
        "assume:team",
        "queue:get-task:*",
    )
    # Scopes it holds, directly or through a role, it may pass on.
    await create_client(api, "limited/sub", "queue:get-task:abc", "queue:status:x", creds=limited)
    await ok(
        await call(
            api,
            "PUT",
            "/roles/limited%2Frole",
            {"description": "d", "scopes": ["queue:get-task:*"]},
            creds=limited,
        )
    )

    for method, path, body in [
        (
            "PUT",
            "/clients/limited%2Fgreedy",
            {"description": "d", "expires": EXPIRES, "scopes": ["queue:create-task:*"]},
        ),
        ("PUT", "/clients/elsewhere", {"description": "d", "expires": EXPIRES, "scopes": []}),
        (
            "POST",
            "/clients/limited%2Fsub",
            {"description": "d", "expires": EXPIRES, "scopes": ["queue:get-task:abc", "*"]},
        ),
        ("PUT", "/roles/limited%2Fgreedy", {"description": "d", "scopes": ["queue:create-task:*"]}),
        ("PUT", "/roles/limited%2Fadmin", {"description": "d", "scopes": ["assume:anything"]}),
        ("POST", "/roles/limited%2Frole", {"description": "d", "scopes": ["secrets:get:x"]}),
        ("PUT", "/roles/elsewhere", {"description": "d", "scopes": []}),
    ]:
        refused = await call(api, method, path, body, creds=limited)
        assert_error(
            refused, 403, "InsufficientScopes", names=["Client ID limited does not have sufficient scopes"]
        )
    missing = (
        await call(
            api,
            "PUT",
            "/roles/limited%2Fgreedy",
            {"description": "d", "scopes": ["queue:create-task:*"]},
            creds=limited,
        )
    ).json()
    assert "queue:create-task:*" in missing["message"]
    assert_error(await call(api, "GET", "/roles/limited%2Fgreedy"), 404, "ResourceNotFound")
    assert_error(await call(api, "GET", "/clients/limited%2Fgreedy"), 404, "ResourceNotFound")
    # Dropping scopes or keeping them needs nothing more than the update scope.
    kept = await ok(
        await call(
            api,
            "POST",
            "/clients/limited%2Fsub",
            {"description": "e", "expires": EXPIRES, "scopes": ["queue:status:x"]},
            creds=limited,
        )
    )
    assert kept["scopes"] == ["queue:status:x"]
    # Reading, resetting, deleting need their own scopes.
    for method, path in [
        ("GET", "/clients/limited%2Fsub"),
        ("POST", "/clients/limited%2Fsub/reset"),
        ("DELETE", "/roles/limited%2Frole"),
        ("GET", "/roles/"),
    ]:
        assert_error(await call(api, method, path, creds=limited), 403, "InsufficientScopes")


async def test_anonymous_callers_hold_the_anonymous_role(api: Api) -> None:
    # A new deployment's anonymous role reads public artifacts only: not even currentScopes.
    refused = await call(api, "GET", "/scopes/current", creds=None)
    assert_error(refused, 403, "InsufficientScopes", names=["auth:current-scopes"])
    anonymous = {"description": "everyone", "scopes": ["auth:current-scopes", *ANONYMOUS_ROLE]}
    await ok(await call(api, "POST", "/roles/anonymous", anonymous))
    current = await ok(await call(api, "GET", "/scopes/current", creds=None))
    expanded = await ok(await call(api, "POST", "/scopes/expand", {"scopes": ["assume:anonymous"]}))
    assert current == expanded == {"scopes": ["assume:anonymous", "auth:current-scopes", *ANONYMOUS_ROLE]}
    # ...and so does every signed caller.
    nobody = await create_client(api, "nobody")
    assert await ok(await call(api, "GET", "/scopes/current", creds=nobody)) == current
    assert (await ok(await call(api, "GET", "/scopes/current"))) == {"scopes": ["*"]}


async def test_every_guarded_route_refuses_anonymous_callers(api: Api) -> None:
    await create_client(api, "someone")
    await ok(await call(api, "PUT", "/roles/something", {"description": "d", "scopes": []}))
    client = {"description": "d", "expires": EXPIRES, "scopes": []}
    for method, path, body in [
        ("GET", "/clients/", None),
        ("GET", "/clients/someone", None),
        ("PUT", "/clients/someone2", client),
        ("POST", "/clients/someone", client),
        ("POST", "/clients/someone/reset", None),
        ("POST", "/clients/someone/enable", None),
        ("POST", "/clients/someone/disable", None),
        ("DELETE", "/clients/someone", None),
        ("GET", "/roles/", None),
        ("GET", "/roles2/", None),
        ("GET", "/roleids/", None),
        ("GET", "/roles/something", None),
        ("PUT", "/roles/other", {"description": "d", "scopes": []}),
        ("POST", "/roles/something", {"description": "d", "scopes": []}),
        ("DELETE", "/roles/something", None),
        ("POST", "/scopes/expand", {"scopes": []}),
        ("GET", "/scopes/current", None),
    ]:
        args = () if body is None else (body,)
        assert_error(await call(api, method, path, *args, creds=None), 403, "InsufficientScopes")
    await ok(await call(api, "GET", "/clients/someone"))


# ---------------------------------------------------------------------------------------------------
# authenticateHawk and the test-authenticate endpoints


async def test_authenticate_hawk(api: Api) -> None:
    limited = await create_client(api, "hawk-client", "queue:get-task:*")
    url = "https://tc.example.com/api/queue/v1/task/abc?x=1"
    request = {
        "method": "post",
        "resource": "/api/queue/v1/task/abc?x=1",
        "host": "tc.example.com",
        "port": 443,
    }
    signed = {**request, "authorization": hawk_header("POST", url, b'{"a":1}', limited)}
    success = await ok(await call(api, "POST", "/authenticate-hawk", signed, creds=None))
    assert success["status"] == "auth-success" and success["scheme"] == "hawk"
    assert success["clientId"] == "hawk-client" and success["expires"] == EXPIRES
    assert success["scopes"] == ["assume:anonymous", *ANONYMOUS_ROLE, "queue:get-task:*"]
    assert success["hash"]  # the caller has the body and checks the hash itself

    root = {**request, "authorization": hawk_header("POST", url, b"", ROOT)}
    assert (await ok(await call(api, "POST", "/authenticate-hawk", root, creds=None)))["scopes"] == ["*"]
    none = await ok(await call(api, "POST", "/authenticate-hawk", request, creds=None))
    assert (none["status"], none["scheme"]) == ("no-auth", "none")
    assert none["scopes"] == ["assume:anonymous", *ANONYMOUS_ROLE]
    wrong = {**signed, "port": 80}
    assert await ok(await call(api, "POST", "/authenticate-hawk", wrong, creds=None)) == {
        "status": "auth-failed",
        "message": "Unauthorized: Bad mac",
    }
    assert_error(
        await call(api, "POST", "/authenticate-hawk", {**request, "method": "GET"}, creds=None),
        400,
        "InputValidationError",
    )


TESTER = Credentials("tester", "no-secret")


async def test_test_authenticate(api: Api) -> None:
    body = {"clientScopes": ["test:a", "test:b*"], "requiredScopes": ["test:b1"]}
    reply = await ok(await call(api, "POST", "/test-authenticate", body, creds=TESTER))
    assert reply == {"clientId": "tester", "scopes": ["assume:anonymous", "test:a", "test:b*"]}
    short = await call(
        api, "POST", "/test-authenticate", {**body, "requiredScopes": ["test:c"]}, creds=TESTER
    )
    assert_error(short, 403, "InsufficientScopes", names=["test:c"])
    assert_error(await call(api, "POST", "/test-authenticate", body, creds=ROOT), 401, "AuthenticationFailed")
    wrong = Credentials("tester", "some-secret")
    assert_error(
        await call(api, "POST", "/test-authenticate", body, creds=wrong), 401, "AuthenticationFailed"
    )


async def test_test_authenticate_get_with_a_header_and_a_bewit(api: Api) -> None:
    expected = {"clientId": "tester", "scopes": ["assume:anonymous", "auth:create-client:test:*", "test:*"]}
    assert await ok(await call(api, "GET", "/test-authenticate-get/", creds=TESTER)) == expected
    client = taskcluster.Auth(
        {"rootUrl": BASE, "credentials": {"clientId": "tester", "accessToken": "no-secret"}}
    )
    signed_url = client.buildSignedUrl("testAuthenticateGet")
    assert "/test-authenticate-get/?bewit=" in signed_url
    assert await ok(await api.client.get(signed_url)) == expected
    assert_error(await call(api, "GET", "/test-authenticate-get/", creds=None), 403, "InsufficientScopes")
