"""The UI's actions: cancel, rerun and schedule a task, quarantine a worker (and create a task:
`ui/create.py`). Each is a form posted with the session's CSRF token, and each calls the API
route it stands for as the signed-in client (`calls.invoke`), so it needs exactly that route's
scopes. Done, it sends the browser back to the page it came from with a one-line notice.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from taskyard.model import dates
from taskyard.model.errors import InputError, TaskyardError
from taskyard.model.types import JSONValue
from taskyard.ui import calls, create, forms
from taskyard.ui.render import view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.ui.render import UI

QUARANTINE_DAYS = 1  # how long a quarantine lasts when the form gives no date
_LOCAL_MINUTE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?")  # <input type=datetime-local>
_DATE = re.compile(r"\d{4}-\d\d-\d\d")


# What an action sends, read from its form: the API call's body, and the notice shown when done.
Reading = Callable[[dict[str, str]], tuple[JSONValue, str]]


async def _act(
    ui: UI, request: Request, name: str, params: dict[str, str], fallback: str, read: Reading
) -> Response:
    """Call the API route `name` for a posted form, then go back to the page with a notice."""
    checked = await calls.signed_form(ui, request, fallback)
    if isinstance(checked, Response):
        return checked
    session, form, back = checked
    try:
        body, done = read(form)
        await calls.invoke(ui, session, name, params, body)
    except TaskyardError as refusal:
        return await calls.refused(ui, request, refusal.status, refusal.message, back)
    return RedirectResponse(forms.with_done(back, done), 303)


def _task_action(name: str, done: str) -> Callable[[UI, Request], Awaitable[Response]]:
    async def act(ui: UI, request: Request) -> Response:
        task_id = str(request.path_params["taskId"])
        return await _act(ui, request, name, {"taskId": task_id}, f"/tasks/{task_id}", lambda _: (None, done))

    act.__name__ = name
    return act


cancel = _task_action("cancelTask", "cancelled")
rerun = _task_action("rerunTask", "rerun")
schedule = _task_action("scheduleTask", "scheduled")


def quarantine_until(text: str, now: int) -> int:
    """The form's `until`: empty for a day from now; a date, or a date and time, in UTC."""
    text = text.strip()
    if not text:
        return now + QUARANTINE_DAYS * dates.DAY
    if _LOCAL_MINUTE.fullmatch(text):
        text += "Z"  # what a datetime-local field sends: the form says it is UTC
    elif _DATE.fullmatch(text):
        text += "T00:00:00Z"
    try:
        return dates.parse_iso(text)
    except ValueError:
        raise InputError(
            f"until: must be a date and time in UTC, like 2026-11-28T09:00 (got {text[:40]!r})"
        ) from None


async def quarantine(ui: UI, request: Request) -> Response:
    """quarantineWorker until the form's date (a day by default); `lift`: until now, which ends it."""
    names = ("provisionerId", "workerType", "workerGroup", "workerId")
    params = {name: str(request.path_params[name]) for name in names}
    now = ui.now()

    def read(form: dict[str, str]) -> tuple[JSONValue, str]:
        if form.get("lift"):
            return {"quarantineUntil": dates.to_iso(now), "quarantineInfo": "lifted"}, "unquarantined"
        info = form.get("info", "").strip()
        body: dict[str, JSONValue] = {
            "quarantineUntil": dates.to_iso(quarantine_until(form.get("until", ""), now))
        }
        return body | ({"quarantineInfo": info} if info else {}), "quarantined"

    return await _act(ui, request, "quarantineWorker", params, "/workers", read)


def routes(ui: UI) -> list[BaseRoute]:
    worker = "/workers/{provisionerId}/{workerType}/{workerGroup}/{workerId}"
    return [
        *create.routes(ui),  # `/tasks/create` before any `/tasks/{taskId}`
        Route("/tasks/{taskId}/cancel", view(cancel)(ui), methods=["POST"]),
        Route("/tasks/{taskId}/rerun", view(rerun)(ui), methods=["POST"]),
        Route("/tasks/{taskId}/schedule", view(schedule)(ui), methods=["POST"]),
        Route(worker + "/quarantine", view(quarantine)(ui), methods=["POST"]),
    ]
