"""The hooks pages: groups, a group's hooks, a hook (definition, next fire times, last fires linked
to their tasks) and its Trigger form, shown only to a signed-in viewer holding the trigger scope,
which fires the hook as that viewer with the editor's payload."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from tests.api.conftest import Api
from tests.ui.conftest import Browser, hidden_fields, new_client
from tests.ui.helpers import assert_refused

HOOKS = "/api/hooks/v1"


def hook_body(schedule: list[str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "nightly build", "description": "the UI test's", "owner": "ui@example.com"},
        "schedule": schedule,
        "triggerSchema": {"type": "object", "properties": {"who": {"type": "string"}}},
        "task": {
            "taskQueueId": "ui/hooks",
            "payload": {},
            "metadata": {
                "name": "hooked by ${payload.who}",
                "description": "-",
                "owner": "ui@example.com",
                "source": "https://example.com/ui",
            },
        },
    }


async def define(api: Api, group: str, hook: str, schedule: list[str]) -> None:
    role = {"description": "ui", "scopes": ["queue:create-task:*", "queue:scheduler-id:*"]}
    made = await api.call(
        "PUT", f"/roles/{quote(f'hook-id:{group}/{hook}', safe='')}", role, prefix="/api/auth/v1"
    )
    assert made.status_code == 200, made.text
    path = f"/hooks/{group}/{quote(hook, safe='')}"
    created = await api.call("PUT", path, hook_body(schedule), prefix=HOOKS)
    assert created.status_code == 200, created.text


async def test_browse_and_trigger(api: Api, browsers: Callable[..., Browser]) -> None:
    await define(api, "ui-group", "nightly/linux", ["0 0 2 * * *"])
    viewer = browsers()
    creds = await new_client(
        api,
        "ui-hooks/operator",
        ["hooks:list-hooks:*", "hooks:get:*", "hooks:list-last-fires:*", "hooks:trigger-hook:ui-group/*"],
    )
    assert (await viewer.signin(creds)).status_code == 303
    groups = await viewer.get("/hooks")
    assert groups.status_code == 200, groups.text
    assert 'href="/hooks/ui-group"' in groups.text and 'aria-current="page">Hooks' in groups.text
    group = await viewer.get("/hooks/ui-group")
    assert "nightly/linux" in group.text and "0 0 2 * * *" in group.text
    page = await viewer.get("/hooks/ui-group/" + quote("nightly/linux", safe=""))
    assert page.status_code == 200, page.text
    assert "Never fired." in page.text and "nightly build" in page.text
    assert page.text.count("T02:00:00.000Z</li>") == 5  # the next five fire times, at 02:00 UTC
    action = "/hooks/ui-group/nightly/linux/trigger"
    form = hidden_fields(page.text, action)
    fired = await viewer.post(action, {**form, "payload": '{"who": "dana"}'})
    assert fired.status_code == 303, fired.text
    after = await viewer.get(fired.headers["location"])
    assert "The hook fired" in after.text
    task_link = after.text.split('<a class="id" href="/tasks/')[1].split('"')[0]
    task = await api.call("GET", f"/task/{task_link}")
    assert task.json()["metadata"]["name"] == "hooked by dana"
    refused = await viewer.post(action, {**form, "payload": '{"who": 7}'})
    assert refused.status_code == 400 and "who" in html.unescape(refused.text)


async def test_no_trigger_form_without_the_scope(api: Api, browsers: Callable[..., Browser]) -> None:
    await define(api, "ui-other", "h", [])
    viewer = browsers()
    creds = await new_client(api, "ui-hooks/reader", ["hooks:get:*", "hooks:list-hooks:*"])
    assert (await viewer.signin(creds)).status_code == 303
    page = await viewer.get("/hooks/ui-other/h")
    assert page.status_code == 200, page.text
    assert (
        "/trigger" not in page.text
        and "Triggering needs <code>hooks:trigger-hook:ui-other/h</code>" in page.text
    )
    assert "Needs <code>hooks:list-last-fires:ui-other/h</code>" in page.text
    form = {"csrf": await viewer.csrf(), "payload": "{}"}
    assert_refused(await viewer.post("/hooks/ui-other/h/trigger", form), 403, "hooks:trigger-hook:ui-other/h")
    anonymous = browsers()
    assert_refused(await anonymous.get("/hooks/ui-other/h"), 401, "hooks:get:ui-other:h")
