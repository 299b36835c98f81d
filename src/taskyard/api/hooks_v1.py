"""The hooks service's routes, under `/api/hooks/v1`: TaskCluster's hooks API.

A hookId may hold `/` (taskgraph's `in-tree-action-1-generic/<hash>`): clients send it as `%2F`,
and the routes with a suffix (`/status`, `/token`, `/trigger`, `/last-fires`) come before the
hook's own so that the suffix is not read as part of its id.
"""

from __future__ import annotations

from taskyard.api.queue_v1 import PING, empty, ping, version
from taskyard.api.routing import Body, Call, Route
from taskyard.hooks import definitions, firing
from taskyard.hooks.definitions import HookRequest
from taskyard.hooks.service import Hooks
from taskyard.model import paging, schema
from taskyard.model.errors import InputError
from taskyard.model.types import JSONValue

GROUP = r"^[a-zA-Z0-9-_]{1,1000}$"
HOOK = r"^[a-zA-Z0-9-_/]{1,1000}$"
METADATA = schema.obj(
    {
        "name": schema.string(max_length=255),
        "description": schema.string(max_length=32768),
        "owner": schema.string(max_length=255),
        "emailOnError": schema.boolean(),
    },
    required=["name", "description", "owner"],
    additional=False,
)
BINDING = schema.obj(
    {"exchange": schema.string(min_length=1), "routingKeyPattern": schema.string(min_length=1)},
    required=["exchange", "routingKeyPattern"],
    additional=False,
)
_FIELDS = {
    "hookGroupId": schema.string(pattern=GROUP),
    "hookId": schema.string(pattern=HOOK),
    "metadata": METADATA,
    "schedule": schema.array(schema.string(), unique=True),
    "task": schema.any_object(),
    "bindings": schema.array(BINDING, unique=True),
    "triggerSchema": schema.any_object(),
}
HOOK_REQUEST = schema.obj(_FIELDS, required=["metadata", "task"], additional=False)
HOOK_DEFINITION = schema.obj(
    _FIELDS,
    required=["hookGroupId", "hookId", "metadata", "task", "schedule", "triggerSchema"],
    additional=False,
)
HOOK_LIST = schema.obj({"hooks": schema.array(HOOK_DEFINITION)}, required=["hooks"], additional=False)
GROUP_LIST = schema.obj({"groups": schema.array(schema.string())}, required=["groups"], additional=False)
TOKEN = schema.obj({"token": schema.string()}, required=["token"], additional=False)
TRIGGER_ANSWER = schema.obj(
    {"taskId": schema.string(), "status": schema.obj({"taskId": schema.string()}, required=["taskId"])},
    additional=False,
)
LAST_FIRE = schema.obj(
    {
        "hookGroupId": schema.string(),
        "hookId": schema.string(),
        "firedBy": schema.enum("schedule", "triggerHook", "triggerHookWithToken", "pulseMessage"),
        "taskId": schema.string(),
        "taskCreateTime": schema.date_time(),
        "result": schema.enum("success", "error"),
        "error": schema.string(),
        "taskState": schema.string(),
    },
    required=["hookGroupId", "hookId", "firedBy", "taskId", "taskCreateTime", "result", "error", "taskState"],
    additional=False,
)
LAST_FIRES = schema.obj(
    {"lastFires": schema.array(LAST_FIRE), "continuationToken": schema.string()},
    required=["lastFires"],
    additional=False,
)
STATUS = schema.obj(
    {"lastFire": schema.any_object(), "nextScheduledDate": schema.date_time()},
    required=["lastFire"],
    additional=False,
)
MODIFY = {"AllOf": ["hooks:modify-hook:<hookGroupId>/<hookId>", "assume:hook-id:<hookGroupId>/<hookId>"]}


def _h(call: Call) -> Hooks:
    return call.services.hooks


def _ids(call: Call) -> tuple[str, str]:
    return call.params["hookGroupId"], call.params["hookId"]


def _payload(call: Call) -> JSONValue:
    if call.body is None:
        return {}
    if not isinstance(call.body, dict):
        raise InputError("the trigger payload must be a JSON object")
    return call.body


async def list_hook_groups(call: Call) -> definitions.GroupList:
    return await definitions.list_groups(_h(call))


async def list_hooks(call: Call) -> definitions.HookList:
    return await definitions.list_hooks(_h(call), call.params["hookGroupId"])


async def get_hook(call: Call) -> definitions.HookDefinition:
    return await definitions.get_hook(_h(call), *_ids(call))


async def hook_status(call: Call) -> Body:
    return await definitions.hook_status(_h(call), *_ids(call))


async def create_hook(call: Call) -> definitions.HookDefinition:
    body = call.body_as(HookRequest)
    return await definitions.create_hook(_h(call), *_ids(call), body, client_id=call.client_id)


async def update_hook(call: Call) -> definitions.HookDefinition:
    body = call.body_as(HookRequest)
    return await definitions.update_hook(_h(call), *_ids(call), body, client_id=call.client_id)


async def remove_hook(call: Call) -> Body:
    await definitions.remove_hook(_h(call), *_ids(call), client_id=call.client_id)
    return {}


async def trigger_hook(call: Call) -> firing.TriggerAnswer:
    group, hook = _ids(call)
    return await firing.trigger(_h(call), group, hook, _payload(call), client_id=call.caller.client_id)


async def trigger_with_token(call: Call) -> firing.TriggerAnswer:
    group, hook = _ids(call)
    payload = _payload(call)
    return await firing.trigger(_h(call), group, hook, payload, client_id=None, token=call.params["token"])


async def get_token(call: Call) -> definitions.TokenAnswer:
    return await definitions.get_token(_h(call), *_ids(call))


async def reset_token(call: Call) -> definitions.TokenAnswer:
    return await definitions.reset_token(_h(call), *_ids(call))


async def list_last_fires(call: Call) -> definitions.LastFires:
    return await definitions.list_last_fires(_h(call), *_ids(call), paging.parse(call.query))


HOOK_PATH = "/hooks/{hookGroupId}/{hookId:path}"
ROUTES = [
    Route("GET", "/ping", "ping", ping, output=PING),
    Route("GET", "/__heartbeat__", "heartbeat", empty),
    Route("GET", "/__lbheartbeat__", "lbheartbeat", empty),
    Route("GET", "/__version__", "version", version),
    Route("GET", "/hooks", "listHookGroups", list_hook_groups, "hooks:list-hooks:", output=GROUP_LIST),
    Route(
        "GET",
        HOOK_PATH + "/status",
        "getHookStatus",
        hook_status,
        "hooks:status:<hookGroupId>/<hookId>",
        stability="deprecated",
        output=STATUS,
    ),
    Route(
        "POST",
        HOOK_PATH + "/trigger/{token}",
        "triggerHookWithToken",
        trigger_with_token,
        None,
        schema.any_object(),
        output=TRIGGER_ANSWER,
    ),
    Route(
        "POST",
        HOOK_PATH + "/trigger",
        "triggerHook",
        trigger_hook,
        "hooks:trigger-hook:<hookGroupId>/<hookId>",
        schema.any_object(),
        output=TRIGGER_ANSWER,
    ),
    Route(
        "GET",
        HOOK_PATH + "/token",
        "getTriggerToken",
        get_token,
        "hooks:get-trigger-token:<hookGroupId>/<hookId>",
        output=TOKEN,
    ),
    Route(
        "POST",
        HOOK_PATH + "/token",
        "resetTriggerToken",
        reset_token,
        "hooks:reset-trigger-token:<hookGroupId>/<hookId>",
        output=TOKEN,
    ),
    Route(
        "GET",
        HOOK_PATH + "/last-fires",
        "listLastFires",
        list_last_fires,
        "hooks:list-last-fires:<hookGroupId>/<hookId>",
        output=LAST_FIRES,
    ),
    Route(
        "GET",
        "/hooks/{hookGroupId}",
        "listHooks",
        list_hooks,
        "hooks:list-hooks:<hookGroupId>",
        output=HOOK_LIST,
    ),
    Route("GET", HOOK_PATH, "hook", get_hook, "hooks:get:<hookGroupId>:<hookId>", output=HOOK_DEFINITION),
    Route("PUT", HOOK_PATH, "createHook", create_hook, MODIFY, HOOK_REQUEST, output=HOOK_DEFINITION),
    Route("POST", HOOK_PATH, "updateHook", update_hook, MODIFY, HOOK_REQUEST, output=HOOK_DEFINITION),
    Route("DELETE", HOOK_PATH, "removeHook", remove_hook, "hooks:modify-hook:<hookGroupId>/<hookId>"),
]
