"""The secrets service's routes, under `/api/secrets/v1`: TaskCluster's secrets API.

A name is a catch-all (`project/foo/bar`, `worker-pool:proj/type`): clients send it
percent-encoded, `/` as `%2F`, and an unencoded `/` works as well. The value of a `set` is never
echoed in an error body, nor logged.
"""

from __future__ import annotations

from taskyard.api.queue_v1 import PING, empty, ping, version
from taskyard.api.routing import Body, Call, Route
from taskyard.model import paging, schema
from taskyard.model.types import JSONValue
from taskyard.secrets import store

SECRET = schema.obj(
    {"secret": schema.any_object(), "expires": schema.date_time()},
    required=["secret", "expires"],
    additional=False,
)
SECRET_LIST = schema.obj(
    {"secrets": schema.array(schema.string()), "continuationToken": schema.string()},
    required=["secrets"],
    additional=False,
)
OMITTED = "(OMITTED)"


def without_value(body: JSONValue) -> JSONValue:
    """A set's body as error bodies show it: the secret's value replaced, as TaskCluster does."""
    if isinstance(body, dict) and "secret" in body:
        return {**body, "secret": OMITTED}
    return OMITTED if body is not None else None


async def set_secret(call: Call) -> Body:
    body = call.body_as(store.SecretBody)
    expires = schema.to_millis(body["expires"])
    await store.set_secret(
        call.services.secrets, call.params["name"], body["secret"], expires, client_id=call.client_id
    )
    return {}


async def remove_secret(call: Call) -> Body:
    await store.remove_secret(call.services.secrets, call.params["name"], client_id=call.client_id)
    return {}


async def get_secret(call: Call) -> store.SecretBody:
    return await store.get_secret(call.services.secrets, call.params["name"])


async def list_secrets(call: Call) -> store.SecretList:
    query = paging.parse(call.query)
    (after,) = paging.after(query, 1, [""])
    found = await store.list_secrets(call.services.secrets, after=str(after), limit=query.limit)
    shown = [entry["name"] for entry in found[: query.limit]]
    last: list[object] | None = [shown[-1]] if len(found) > query.limit else None
    return {"secrets": shown, **paging.more(paging.keyset_token(found, last, query.limit))}


ROUTES = [
    Route("GET", "/ping", "ping", ping, output=PING),
    Route("GET", "/__heartbeat__", "heartbeat", empty),
    Route("GET", "/__lbheartbeat__", "lbheartbeat", empty),
    Route("GET", "/__version__", "version", version),
    Route("PUT", "/secret/{name:path}", "set", set_secret, "secrets:set:<name>", SECRET, echo=without_value),
    Route("DELETE", "/secret/{name:path}", "remove", remove_secret, "secrets:set:<name>"),
    Route("GET", "/secret/{name:path}", "get", get_secret, "secrets:get:<name>", output=SECRET),
    Route("GET", "/secrets", "list", list_secrets, "secrets:list-secrets", output=SECRET_LIST),
]
