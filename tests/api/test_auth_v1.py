"""The auth service's routes in-process (both backends): shapes, status codes and scopes as TaskCluster's."""

from __future__ import annotations

from typing import Any

from taskyard.auth import static
from tests.api.conftest import (
    Api,
    Credentials,
    assert_error,
)
from tests.api.helpers import ANONYMOUS_ROLE, EXPIRES, call, create_client, encode, ok

CLIENT_KEYS = [
    "clientId",
    "description",
    "expires",
    "created",
    "lastModified",
    "lastDateUsed",
    "lastRotated",
    "deleteOnExpiration",
    "scopes",
    "expandedScopes",
    "disabled",
]
ROLE_KEYS = ["roleId", "scopes", "expandedScopes", "description", "lastModified", "created"]


async def test_ping_and_heartbeats(api: Api) -> None:
    assert (await ok(await call(api, "GET", "/ping", creds=None)))["alive"] is True
    assert await ok(await call(api, "GET", "/__heartbeat__", creds=None)) == {}


# ---------------------------------------------------------------------------------------------------
# Roles


async def test_roles_as_the_golden_transcript_shows_them(api: Api) -> None:
    a = {"description": "golden role a", "scopes": ["queue:get-task:*", "assume:golden-role-b"]}
    created = await ok(await call(api, "PUT", "/roles/golden-role-a", a))
    assert list(created) == ROLE_KEYS
    assert created["scopes"] == ["assume:golden-role-b", "queue:get-task:*"]  # sorted
    assert created["expandedScopes"] == ["assume:golden-role-a", "assume:golden-role-b", "queue:get-task:*"]
    assert created["created"] == created["lastModified"] and created["created"].endswith("Z")
    assert await ok(await call(api, "PUT", "/roles/golden-role-a", a)) == created  # identical again
    conflict = await call(api, "PUT", "/roles/golden-role-a", {**a, "description": "golden role a v2"})
    body = assert_error(conflict, 409, "RequestConflict", names=["golden-role-a"])
    assert body["requestInfo"]["method"] == "createRole"
    assert body["requestInfo"]["params"] == {"roleId": "golden-role-a"}
    assert await ok(await call(api, "GET", "/roles/golden-role-a")) == created

    cycle = await call(
        api, "PUT", "/roles/golden-role-b", {"description": "b", "scopes": ["assume:golden-role-a"]}
    )
    assert_error(
        cycle,
        400,
        "InputError",
        names=["'assume:golden-role-a' -> 'assume:golden-role-b' -> 'assume:golden-role-a'"],
    )
    await ok(
        await call(api, "PUT", "/roles/golden-role-b", {"description": "b", "scopes": ["queue:status:*"]})
    )
    expanded = await ok(await call(api, "POST", "/scopes/expand", {"scopes": ["assume:golden-role-a"]}))
    assert expanded == {
        "scopes": ["assume:golden-role-a", "assume:golden-role-b", "queue:get-task:*", "queue:status:*"]
    }

    listed = await ok(await call(api, "GET", "/roles/"))
    assert [r["roleId"] for r in listed] == ["anonymous", "golden-role-a", "golden-role-b"]
    assert listed[1]["expandedScopes"][-1] == "queue:status:*"
    assert await ok(await call(api, "GET", "/roles")) == listed  # as the clients call it, without the `/`

    for role_id in ("golden-role-a", "golden-role-b", "golden-role-a"):
        assert await ok(await call(api, "DELETE", f"/roles/{role_id}"), 204) is None
    gone = assert_error(await call(api, "GET", "/roles/golden-role-a"), 404, "ResourceNotFound")
    assert gone["requestInfo"]["method"] == "role"


async def test_update_role(api: Api) -> None:
    await ok(await call(api, "PUT", "/roles/editable", {"description": "d", "scopes": ["a"]}))
    updated = await ok(
        await call(api, "POST", "/roles/editable", {"description": "d2", "scopes": ["b", "a"]})
    )
    assert (updated["scopes"], updated["description"]) == (["a", "b"], "d2")
    assert_error(
        await call(api, "POST", "/roles/nobody", {"description": "d", "scopes": []}), 404, "ResourceNotFound"
    )


async def test_list_roles2_and_role_ids_page(api: Api) -> None:
    for n in range(3):
        await ok(await call(api, "PUT", f"/roles/page-{n}", {"description": "d", "scopes": []}))
    first = await ok(await call(api, "GET", "/roles2/", query={"limit": "2"}))
    assert [r["roleId"] for r in first["roles"]] == ["anonymous", "page-0"]
    second = await ok(await call(api, "GET", "/roles2/", query={"limit": "2", **token(first)}))
    assert [r["roleId"] for r in second["roles"]] == [
        "page-1",
        "page-2",
    ] and "continuationToken" not in second
    assert list(second["roles"][0]) == ROLE_KEYS
    ids = await ok(await call(api, "GET", "/roleids/", query={"limit": "3"}))
    assert ids["roleIds"] == ["anonymous", "page-0", "page-1"] and "continuationToken" in ids
    assert await ok(await call(api, "GET", "/roleids/")) == {
        "roleIds": ["anonymous", "page-0", "page-1", "page-2"]
    }


def token(page: dict[str, Any]) -> dict[str, str]:
    return {"continuationToken": page["continuationToken"]}


async def test_role_ids_may_hold_slashes_colons_and_spaces(api: Api) -> None:
    role_id = "repo:github.com/org/a b/*"
    created = await ok(
        await call(api, "PUT", f"/roles/{encode(role_id)}", {"description": "d", "scopes": ["s:<..>"]})
    )
    assert created["roleId"] == role_id
    assert created["expandedScopes"] == [f"assume:{role_id}", "s:*"]
    assert await ok(await call(api, "GET", f"/roles/{encode(role_id)}")) == created
    assert await ok(await call(api, "GET", "/roles/repo:github.com/org/a%20b/*")) == created


# ---------------------------------------------------------------------------------------------------
# Clients


async def test_client_lifecycle(api: Api) -> None:
    await ok(
        await call(api, "PUT", "/roles/golden-role-b", {"description": "b", "scopes": ["queue:status:*"]})
    )
    body = {
        "description": "golden limited",
        "expires": EXPIRES,
        "scopes": ["assume:golden-role-b", "auth:current-scopes"],
    }
    created = await ok(await call(api, "PUT", "/clients/golden%2Flimited", body))
    assert list(created) == [*CLIENT_KEYS, "accessToken"]
    assert created["clientId"] == "golden/limited" and created["expires"] == EXPIRES
    assert created["expandedScopes"] == ["assume:golden-role-b", "auth:current-scopes", "queue:status:*"]
    assert (created["disabled"], created["deleteOnExpiration"]) == (False, False)
    assert len(created["accessToken"]) == 44
    again = await ok(await call(api, "PUT", "/clients/golden%2Flimited", body))
    assert again["accessToken"] == created["accessToken"]
    assert_error(
        await call(api, "PUT", "/clients/golden%2Flimited", {**body, "scopes": []}), 409, "RequestConflict"
    )

    fetched = await ok(await call(api, "GET", "/clients/golden%2Flimited"))
    assert list(fetched) == CLIENT_KEYS and "accessToken" not in fetched
    limited = Credentials("golden/limited", created["accessToken"])
    current = await ok(await call(api, "GET", "/scopes/current", creds=limited))
    assert current == {
        "scopes": [
            "assume:anonymous",
            "assume:golden-role-b",
            "auth:current-scopes",
            *ANONYMOUS_ROLE,
            "queue:status:*",
        ]
    }

    reset = await ok(await call(api, "POST", "/clients/golden%2Flimited/reset"))
    assert list(reset) == [*CLIENT_KEYS, "accessToken"] and reset["accessToken"] != limited.access_token
    refused = await call(api, "GET", "/scopes/current", creds=limited)
    assert_error(refused, 401, "AuthenticationFailed", names=["Bad mac"])
    assert refused.headers["www-authenticate"] == "hawk"
    limited = Credentials("golden/limited", reset["accessToken"])
    await ok(await call(api, "GET", "/scopes/current", creds=limited))

    assert (await ok(await call(api, "POST", "/clients/golden%2Flimited/disable")))["disabled"] is True
    assert_error(
        await call(api, "GET", "/scopes/current", creds=limited),
        401,
        "AuthenticationFailed",
        names=["disabled"],
    )
    assert (await ok(await call(api, "POST", "/clients/golden%2Flimited/enable")))["disabled"] is False
    await ok(await call(api, "GET", "/scopes/current", creds=limited))

    assert await ok(await call(api, "DELETE", "/clients/golden%2Flimited"), 204) is None
    gone = assert_error(await call(api, "GET", "/clients/golden%2Flimited"), 404, "ResourceNotFound")
    assert gone["requestInfo"] == {
        **gone["requestInfo"],
        "method": "client",
        "params": {"clientId": "golden/limited"},
    }
    assert await ok(await call(api, "DELETE", "/clients/golden%2Flimited"), 204) is None
    assert_error(
        await call(api, "GET", "/scopes/current", creds=limited),
        401,
        "AuthenticationFailed",
        names=["not found"],
    )


async def test_update_client(api: Api) -> None:
    await create_client(api, "upd", "a")
    body = {"description": "new", "expires": "2998-01-01T00:00:00.000Z", "deleteOnExpiration": True}
    kept = await ok(await call(api, "POST", "/clients/upd", body))
    assert (kept["scopes"], kept["description"], kept["deleteOnExpiration"]) == (["a"], "new", True)
    changed = await ok(await call(api, "POST", "/clients/upd", {**body, "scopes": ["b"]}))
    assert changed["scopes"] == ["b"] and list(changed) == CLIENT_KEYS
    assert_error(await call(api, "POST", "/clients/nobody", body), 404, "ResourceNotFound")


async def test_client_ids_that_end_like_a_sub_route(api: Api) -> None:
    """`a%2Freset` is the client `a/reset`, never resetAccessToken of `a`."""
    await create_client(api, "a", "x")
    await create_client(api, "a/reset", "y")
    updated = await ok(
        await call(api, "POST", "/clients/a%2Freset", {"description": "d", "expires": EXPIRES})
    )
    assert updated["clientId"] == "a/reset" and "accessToken" not in updated
    reset = await ok(await call(api, "POST", "/clients/a/reset/reset"))
    assert reset["clientId"] == "a/reset" and "accessToken" in reset
    assert (await ok(await call(api, "GET", "/clients/a/reset")))["scopes"] == ["y"]  # a bare `/` works too
    assert (await ok(await call(api, "POST", "/clients/a%2Freset/disable")))["clientId"] == "a/reset"
    assert (await ok(await call(api, "GET", "/clients/a")))["disabled"] is False


async def test_list_clients_pages_and_filters(api: Api) -> None:
    for n in range(3):
        await create_client(api, f"page/{n}")
    await create_client(api, "other")
    first = await ok(await call(api, "GET", "/clients/", query={"prefix": "page/", "limit": "2"}))
    assert [c["clientId"] for c in first["clients"]] == ["page/0", "page/1"]
    assert list(first["clients"][0]) == CLIENT_KEYS
    second = await ok(
        await call(api, "GET", "/clients", query={"prefix": "page/", "limit": "2", **token(first)})
    )
    assert [c["clientId"] for c in second["clients"]] == ["page/2"] and "continuationToken" not in second
    everyone = await ok(await call(api, "GET", "/clients/"))
    ids = [c["clientId"] for c in everyone["clients"]]
    assert ids == [
        "other",
        "page/0",
        "page/1",
        "page/2",
        static.QUEUE_CLIENT_ID,
        static.ROOT_CLIENT_ID,
        static.WORKER_MANAGER_CLIENT_ID,
    ]
    assert_error(await call(api, "GET", "/clients/", query={"prefix": "a b"}), 400, "InvalidRequestArguments")
    bad_token = await call(api, "GET", "/clients/", query={"continuationToken": "nonsense!"})
    assert_error(bad_token, 400, "InputError")


async def test_bad_input_is_400(api: Api) -> None:
    good = {"description": "d", "expires": EXPIRES, "scopes": ["a"]}
    assert_error(await call(api, "PUT", "/clients/static%2Fmine", good), 400, "InputError", names=["static/"])
    assert_error(
        await call(api, "POST", f"/clients/{encode(static.ROOT_CLIENT_ID)}/reset"), 400, "InputError"
    )
    assert_error(
        await call(api, "PUT", "/clients/stars", {**good, "scopes": ["a:**"]}),
        400,
        "InputError",
        names=["**"],
    )
    assert_error(
        await call(api, "PUT", "/clients/x", {"expires": EXPIRES}),
        400,
        "InputValidationError",
        names=["description"],
    )
    assert_error(
        await call(api, "PUT", "/clients/x", {**good, "expires": "soon"}), 400, "InputValidationError"
    )
    assert_error(
        await call(api, "PUT", "/clients/a%20b", good), 400, "InvalidRequestArguments", names=["clientId"]
    )
    assert_error(
        await call(api, "PUT", "/roles/r", {"description": "d", "scopes": ["x**"]}), 400, "InputError"
    )
    assert_error(await call(api, "PUT", "/roles/r**", {"description": "d", "scopes": []}), 400, "InputError")
    assert_error(await call(api, "PUT", "/roles/r", {"scopes": []}), 400, "InputValidationError")
    bad_param = await call(api, "PUT", "/roles/p*", {"description": "d", "scopes": ["a<..>b<..>"]})
    assert_error(bad_param, 400, "InputError", names=["multiple"])
    assert_error(await call(api, "POST", "/scopes/expand", {"scopes": "a"}), 400, "InputValidationError")


async def test_a_description_holding_nul_is_400_on_both_backends(api: Api) -> None:
    """PostgreSQL's text can't hold NUL: it was a 500 there (schemathesis found it)."""
    client = {"description": "a\x00b", "expires": EXPIRES, "scopes": []}
    role = {"description": "a\x00b", "scopes": []}
    for response in [
        await call(api, "PUT", "/clients/nul", client),
        await call(api, "POST", "/clients/nul", client),
        await call(api, "PUT", "/roles/nul", role),
        await call(api, "POST", "/roles/nul", role),
    ]:
        assert_error(response, 400, "InputValidationError", names=["body.description"])
    await create_client(api, "nul")
    role_ok = await call(api, "PUT", "/roles/nul", {"description": "tabs\tand\nnewlines", "scopes": []})
    assert role_ok.status_code == 200, role_ok.text
