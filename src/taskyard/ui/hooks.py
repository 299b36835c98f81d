"""`GET /hooks`, `/hooks/{group}`, `/hooks/{group}/{hookId}`: the hooks service's groups, a group's
hooks, and one hook (its definition, its schedule's next fire times, its last fires linked to
their tasks); `POST /hooks/{group}/{hookId}/trigger`: fire it with a payload.

Every read goes through the API's call pipeline as the viewer, with the hooks API's own scopes
(`hooks:list-hooks:...`, `hooks:get:<g>:<h>`, `hooks:list-last-fires:<g>/<h>`). The Trigger form
is shown to a signed-in viewer holding `hooks:trigger-hook:<g>/<h>`; it calls triggerHook as that
viewer, with the payload the editor holds (a JSON object).
"""

from __future__ import annotations

import json
from typing import Any, cast
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from taskyard.api import calls as api_calls
from taskyard.api.routing import check_params
from taskyard.hooks import schedules
from taskyard.model import dates, scopes
from taskyard.model.errors import InputError, ResourceNotFound, TaskyardError
from taskyard.ui import access, calls, forms
from taskyard.ui.render import UI, view

UPCOMING = 5  # next fire times shown
FIRES = 50  # last fires shown


async def groups_page(ui: UI, request: Request) -> Response:
    found = await access.read(ui, request, api_calls.route("listHookGroups", "hooks"), {})
    return await ui.page(request, "hooks.html", group=None, groups=cast(dict[str, Any], found)["groups"])


async def group_page(ui: UI, request: Request) -> Response:
    params = check_params({"hookGroupId": request.path_params["group"]})
    found = await access.read(ui, request, api_calls.route("listHooks", "hooks"), params)
    hooks = cast(dict[str, Any], found)["hooks"]
    return await ui.page(request, "hooks.html", group=params["hookGroupId"], hooks=hooks)


async def hook_page(ui: UI, request: Request) -> Response:
    params = check_params(
        {"hookGroupId": request.path_params["group"], "hookId": request.path_params["hook"]}
    )
    hook = cast(dict[str, Any], await access.read(ui, request, api_calls.route("hook", "hooks"), params))
    fires: list[dict[str, Any]] | None = []
    try:
        page = await access.attempt(
            ui, request, api_calls.route("listLastFires", "hooks"), params, {"limit": str(FIRES)}
        )
        fires = None if page is None else cast(dict[str, Any], page)["lastFires"]
    except ResourceNotFound:
        fires = []  # never fired
    who = await access.viewer(ui, request)
    trigger_scope = f"hooks:trigger-hook:{params['hookGroupId']}/{params['hookId']}"
    return await ui.page(
        request,
        "hook.html",
        hook=hook,
        definition=json.dumps(hook, indent=2),
        upcoming=[dates.to_iso(t) for t in schedules.upcoming(hook["schedule"], ui.now(), UPCOMING)],
        fires=fires,
        fires_scope=f"hooks:list-last-fires:{params['hookGroupId']}/{params['hookId']}",
        may_trigger=who.client_id is not None and scopes.satisfies(who.scopes, trigger_scope),
        trigger_scope=trigger_scope,
    )


async def trigger(ui: UI, request: Request) -> Response:
    """triggerHook as the signed-in viewer, with the form's payload (JSON); back to the hook's page."""
    params = check_params(
        {"hookGroupId": request.path_params["group"], "hookId": request.path_params["hook"]}
    )
    page = f"/hooks/{forms_quote(params['hookGroupId'])}/{forms_quote(params['hookId'])}"
    checked = await calls.signed_form(ui, request, page)
    if isinstance(checked, Response):
        return checked
    session, form, back = checked
    try:
        text = form.get("payload", "").strip() or "{}"
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"payload: line {exc.lineno}, column {exc.colno}: not valid JSON: {exc.msg}"
            ) from None
        answer = await api_calls.call(
            ui.services, session.caller, api_calls.route("triggerHook", "hooks"), params, payload
        )
    except TaskyardError as refusal:
        return await calls.refused(ui, request, refusal.status, refusal.message, back)
    done = "hook-triggered" if cast(dict[str, Any], answer).get("taskId") else "hook-declined"
    return RedirectResponse(forms.with_done(back, done), 303)


def forms_quote(value: str) -> str:
    return quote(value, safe="/")


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/hooks", view(groups_page)(ui), methods=["GET"]),
        Route("/hooks/{group}", view(group_page)(ui), methods=["GET"]),
        Route("/hooks/{group}/{hook:path}/trigger", view(trigger)(ui), methods=["POST"]),
        Route("/hooks/{group}/{hook:path}", view(hook_page)(ui), methods=["GET"]),
    ]
