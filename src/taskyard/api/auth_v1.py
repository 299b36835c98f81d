"""The auth service's routes under `<rootUrl>/api/auth/v1/`, with TaskCluster's names and scope expressions.

Client and role ids hold `/`: their routes are matched on the path as sent (`RawPathRoute`), so
`%2F` in an id never reads as a separator. Suffix routes (`/clients/<id>/reset`) come before the
catch-alls they would otherwise fall into.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NotRequired, TypedDict

from taskyard.api import auth_checks, queue_v1
from taskyard.api.routing import PARAM_PATTERNS, Call, Reply, Route
from taskyard.auth import clients, roles
from taskyard.auth.clients import Client, ClientSpec
from taskyard.auth.roles import RoleRecord
from taskyard.auth.service import Auth
from taskyard.model import dates, paging, schema
from taskyard.model.errors import InvalidRequestArguments
from taskyard.model.roles import RoleSet
from taskyard.model.scopes import Template

_SCOPES = schema.array(schema.string(pattern=r"^[\x20-\x7e]*$"), unique=True)
_DESCRIPTION = schema.string(max_length=10240)  # no NUL, as every string (schema.string)
CREATE_CLIENT = schema.obj(
    {
        "expires": schema.date_time(),
        "deleteOnExpiration": schema.boolean(),
        "description": _DESCRIPTION,
        "scopes": _SCOPES,
    },
    required=["expires", "description"],
    additional=False,
)
CREATE_ROLE = schema.obj(
    {"scopes": _SCOPES, "description": _DESCRIPTION}, required=["scopes", "description"], additional=False
)
SCOPESET = schema.obj({"scopes": _SCOPES}, required=["scopes"], additional=False)
_CLIENT_ID = re.compile(PARAM_PATTERNS["clientId"])


class ClientRequest(TypedDict):
    """createClient's and updateClient's body (CREATE_CLIENT)."""

    expires: str
    description: str
    deleteOnExpiration: NotRequired[bool]
    scopes: NotRequired[list[str]]


class RoleRequest(TypedDict):
    """createRole's and updateRole's body (CREATE_ROLE)."""

    scopes: list[str]
    description: str


class Scopes(TypedDict):
    """A scope set: expandScopes's body and answer, currentScopes's answer."""

    scopes: list[str]


class ClientBody(TypedDict):
    clientId: str
    description: str
    expires: str
    created: str
    lastModified: str
    lastDateUsed: str
    lastRotated: str
    deleteOnExpiration: bool
    scopes: list[str]
    expandedScopes: list[str]
    disabled: bool
    accessToken: NotRequired[str]  # createClient and resetAccessToken only


class ClientList(paging.Page):
    clients: list[ClientBody]


class RoleBody(TypedDict):
    roleId: str
    scopes: list[str]
    expandedScopes: list[str]
    description: str
    lastModified: str
    created: str


class RoleList(paging.Page):
    roles: list[RoleBody]


class RoleIdList(paging.Page):
    roleIds: list[str]


def _auth(call: Call) -> Auth:
    return call.services.auth


def client_json(client: Client, role_set: RoleSet) -> ClientBody:
    """A client as TaskCluster answers it (never with its access token)."""
    return {
        "clientId": client.client_id,
        "description": client.description,
        "expires": dates.to_iso(client.expires),
        "created": dates.to_iso(client.created),
        "lastModified": dates.to_iso(client.last_modified),
        "lastDateUsed": dates.to_iso(client.last_date_used),
        "lastRotated": dates.to_iso(client.last_rotated),
        "deleteOnExpiration": client.delete_on_expiration,
        "scopes": list(client.scopes),
        "expandedScopes": role_set.expand(client.scopes),
        "disabled": client.disabled,
    }


def role_json(role: RoleRecord, role_set: RoleSet) -> RoleBody:
    return {
        "roleId": role.role_id,
        "scopes": list(role.scopes),
        "expandedScopes": role_set.expand(["assume:" + role.role_id]),
        "description": role.description,
        "lastModified": dates.to_iso(role.last_modified),
        "created": dates.to_iso(role.created),
    }


async def _client_reply(call: Call, client: Client, token: str | None = None) -> ClientBody:
    body = client_json(client, await _auth(call).role_set())
    if token is not None:
        body["accessToken"] = token  # createClient and resetAccessToken only
    return body


async def _role_reply(call: Call, role: RoleRecord) -> RoleBody:
    return role_json(role, await _auth(call).role_set())


def _spec(body: ClientRequest, *, default_scopes: Sequence[str] | None) -> ClientSpec:
    given = body.get("scopes")
    return ClientSpec(
        description=body["description"],
        expires=schema.to_millis(body["expires"]),
        scopes=tuple(given)
        if given is not None
        else (None if default_scopes is None else tuple(default_scopes)),
        delete_on_expiration=bool(body.get("deleteOnExpiration", False)),
    )


# ---------------------------------------------------------------------------------------------------
# Clients.


async def list_clients(call: Call) -> ClientList:
    query = paging.parse(call.query)
    prefix = call.query.get("prefix", "")
    if prefix and not _CLIENT_ID.fullmatch(prefix):
        raise InvalidRequestArguments(f"query prefix must match {PARAM_PATTERNS['clientId']}")
    (after,) = paging.after(query, 1, [""])
    found = await clients.list_clients(_auth(call), prefix=prefix, after=str(after), limit=query.limit)
    role_set = await _auth(call).role_set()
    items = [client_json(c, role_set) for c in found[: query.limit]]
    last: list[object] | None = [found[query.limit - 1].client_id] if len(found) > query.limit else None
    return {"clients": items, **paging.more(paging.keyset_token(found, last, query.limit))}


async def get_client(call: Call) -> ClientBody:
    return await _client_reply(call, await clients.get_client(_auth(call), call.params["clientId"]))


async def create_client(call: Call) -> ClientBody:
    spec = _spec(call.body_as(ClientRequest), default_scopes=())
    client, token = await clients.create_client(
        _auth(call), call.params["clientId"], spec, guard=call.authorize
    )
    return await _client_reply(call, client, token)


async def update_client(call: Call) -> ClientBody:
    spec = _spec(call.body_as(ClientRequest), default_scopes=None)
    client = await clients.update_client(_auth(call), call.params["clientId"], spec, guard=call.authorize)
    return await _client_reply(call, client)


async def enable_client(call: Call) -> ClientBody:
    return await _client_reply(call, await clients.enable_client(_auth(call), call.params["clientId"]))


async def disable_client(call: Call) -> ClientBody:
    return await _client_reply(call, await clients.disable_client(_auth(call), call.params["clientId"]))


async def reset_access_token(call: Call) -> ClientBody:
    client, token = await clients.reset_access_token(_auth(call), call.params["clientId"])
    return await _client_reply(call, client, token)


async def delete_client(call: Call) -> Reply:
    await clients.delete_client(_auth(call), call.params["clientId"])
    return Reply(204)


# ---------------------------------------------------------------------------------------------------
# Roles.


async def list_roles(call: Call) -> list[RoleBody]:
    found = await roles.list_roles(_auth(call))
    role_set = await _auth(call).role_set()
    return [role_json(r, role_set) for r in found]


async def _roles_page(call: Call) -> tuple[list[RoleRecord], paging.Page]:
    query = paging.parse(call.query)
    start = paging.offset(query)
    found = (await roles.list_roles(_auth(call)))[start : start + query.limit + 1]
    return found[: query.limit], paging.more(paging.offset_token(found, start, query.limit))


async def list_roles2(call: Call) -> RoleList:
    found, more = await _roles_page(call)
    role_set = await _auth(call).role_set()
    return {"roles": [role_json(r, role_set) for r in found], **more}


async def list_role_ids(call: Call) -> RoleIdList:
    found, more = await _roles_page(call)
    return {"roleIds": [r.role_id for r in found], **more}


async def get_role(call: Call) -> RoleBody:
    return await _role_reply(call, await roles.get_role(_auth(call), call.params["roleId"]))


async def create_role(call: Call) -> RoleBody:
    role_id, body = call.params["roleId"], call.body_as(RoleRequest)
    role = await roles.create_role(
        _auth(call), role_id, body["description"], body["scopes"], guard=call.authorize
    )
    return await _role_reply(call, role)


async def update_role(call: Call) -> RoleBody:
    role_id, body = call.params["roleId"], call.body_as(RoleRequest)
    role = await roles.update_role(
        _auth(call), role_id, body["description"], body["scopes"], guard=call.authorize
    )
    return await _role_reply(call, role)


async def delete_role(call: Call) -> Reply:
    await roles.delete_role(_auth(call), call.params["roleId"])
    return Reply(204)


# ---------------------------------------------------------------------------------------------------
# Scopes.


async def current_scopes(call: Call) -> Scopes:
    return {"scopes": list(call.caller.scopes)}


async def expand_scopes(call: Call) -> Scopes:
    return {"scopes": await _auth(call).expand(call.body_as(Scopes)["scopes"])}


def _granting(action: str, scopes_in: str) -> Template:
    """`auth:<action>:<id>` and every scope of the list `scopes_in`."""
    return {"AllOf": [f"auth:{action}", {"for": "scope", "in": scopes_in, "each": "<scope>"}]}


CLIENT = "/clients/{clientId:path}"
ROLE = "/roles/{roleId:path}"

ROUTES = [
    Route("GET", "/ping", "ping", queue_v1.ping),
    Route("GET", "/__heartbeat__", "heartbeat", queue_v1.empty),
    Route("GET", "/__lbheartbeat__", "lbheartbeat", queue_v1.empty),
    Route("GET", "/__version__", "version", queue_v1.version),
    Route("GET", "/clients/", "listClients", list_clients, "auth:list-clients"),
    Route(
        "POST",
        CLIENT + "/reset",
        "resetAccessToken",
        reset_access_token,
        "auth:reset-access-token:<clientId>",
    ),
    Route("POST", CLIENT + "/enable", "enableClient", enable_client, "auth:enable-client:<clientId>"),
    Route("POST", CLIENT + "/disable", "disableClient", disable_client, "auth:disable-client:<clientId>"),
    Route("GET", CLIENT, "client", get_client, "auth:get-client:<clientId>"),
    Route(
        "PUT",
        CLIENT,
        "createClient",
        create_client,
        _granting("create-client:<clientId>", "scopes"),
        CREATE_CLIENT,
        loads=("scopes",),
    ),
    Route(
        "POST",
        CLIENT,
        "updateClient",
        update_client,
        _granting("update-client:<clientId>", "scopesAdded"),
        CREATE_CLIENT,
        loads=("scopesAdded",),
    ),
    Route("DELETE", CLIENT, "deleteClient", delete_client, "auth:delete-client:<clientId>"),
    Route("GET", "/roles/", "listRoles", list_roles, "auth:list-roles"),
    Route("GET", "/roles2/", "listRoles2", list_roles2, "auth:list-roles"),
    Route("GET", "/roleids/", "listRoleIds", list_role_ids, "auth:list-roles"),
    Route("GET", ROLE, "role", get_role, "auth:get-role:<roleId>"),
    Route(
        "PUT",
        ROLE,
        "createRole",
        create_role,
        _granting("create-role:<roleId>", "scopes"),
        CREATE_ROLE,
        loads=("scopes",),
    ),
    Route(
        "POST",
        ROLE,
        "updateRole",
        update_role,
        _granting("update-role:<roleId>", "scopesAdded"),
        CREATE_ROLE,
        loads=("scopesAdded",),
    ),
    Route("DELETE", ROLE, "deleteRole", delete_role, "auth:delete-role:<roleId>"),
    Route("POST", "/scopes/expand", "expandScopes", expand_scopes, "auth:expand-scopes", SCOPESET),
    Route("GET", "/scopes/current", "currentScopes", current_scopes, "auth:current-scopes"),
    Route(
        "POST",
        "/authenticate-hawk",
        "authenticateHawk",
        auth_checks.authenticate_hawk,
        input=auth_checks.AUTHENTICATE_HAWK,
    ),
    Route(
        "POST",
        "/test-authenticate",
        "testAuthenticate",
        auth_checks.test_authenticate,
        input=auth_checks.TEST_AUTHENTICATE,
        own_auth=True,
    ),
    Route(
        "GET",
        "/test-authenticate-get/",
        "testAuthenticateGet",
        auth_checks.test_authenticate_get,
        own_auth=True,
    ),
]
