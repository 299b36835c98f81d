"""The page that creates a task from a definition in YAML or JSON, through the API's createTask.

The form is prefilled with an example and a fresh taskId; `?from=TASK_ID` (a task page's "Edit and
re-create") prefills it with that task's definition instead, read as the viewer with the API's
`task` route (so only a viewer who may read the task sees it), without its dates. `created` (now)
and `deadline` (a day from now) are filled in when the definition leaves them out, as `taskyard
task create` does. A definition the API refuses shows the form again with the API's message
(naming the field) and the text as it was sent.
"""

from __future__ import annotations

from typing import cast

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from taskyard.api import calls as api_calls
from taskyard.model import dates, definition_yaml, slugid
from taskyard.model.errors import InputError, TaskyardError
from taskyard.model.types import JSONValue
from taskyard.queue.tasks import check_task_id
from taskyard.ui import access, calls, forms
from taskyard.ui.render import view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.ui.render import UI

MAX_DEPTH = definition_yaml.MAX_DEPTH  # as the API refuses a body nested deeper

EXAMPLE = """\
# A task definition in YAML (JSON works too). `created` (now) and `deadline` (a day from now)
# are filled in when left out. The worker `taskyard up` starts claims tasks of local/default.
taskQueueId: local/default
metadata:
  name: hello
  description: A first task, created from the web UI
  owner: someone@example.com
  source: https://example.com/taskyard
payload:
  command:
    - [/bin/sh, -c, 'echo "hello from $TASK_ID"']
  maxRunTime: 600
"""


def parse_definition(text: str) -> dict[str, JSONValue]:
    """The task definition in `text` (JSON, or YAML); InputError naming the line and the problem."""
    if not text.strip():
        raise InputError("definition: required (a task definition in YAML or JSON)")
    try:
        value = orjson.loads(text) if text.lstrip().startswith("{") else definition_yaml.load(text)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"definition: not valid JSON: {exc}") from None
    except definition_yaml.YamlProblem as exc:
        raise InputError(f"definition: not valid YAML: {exc.where}{exc.problem}") from None
    except RecursionError:
        raise InputError(f"definition: nested more than {MAX_DEPTH} levels deep, the most accepted") from None
    if not isinstance(value, dict):
        raise InputError("definition: must be a mapping (an object): the task definition")
    definition_yaml.check_json(value, "definition")
    return value


def with_dates(definition: dict[str, JSONValue], now: int) -> dict[str, JSONValue]:
    """`definition` with `created` (now) and `deadline` (a day from now) when it leaves them out."""
    return {"created": dates.to_iso(now), "deadline": dates.to_iso(now + dates.DAY), **definition}


async def _form(
    ui: UI, request: Request, status: int, task_id: str, text: str, problem: str = "", copied_from: str = ""
) -> Response:
    return await ui.page(
        request,
        "create.html",
        status,
        task_id=task_id,
        definition=text,
        problem=problem,
        copied_from=copied_from,
    )


# What a re-created task does not take from the task it copies: its dates, which are filled in
# again when the form is sent (and an old deadline would be refused).
NOT_COPIED = ("created", "deadline", "expires")


def copied(task_id: str, definition: dict[str, JSONValue]) -> str:
    """The text the form shows to re-create task `task_id`: its definition in YAML, less NOT_COPIED."""
    from taskyard.ui.task import definition_texts

    kept = {key: value for key, value in definition.items() if key not in NOT_COPIED}
    head = (
        f"# The definition of task {task_id}, to edit and create as a new task. `created` and\n"
        "# `deadline` (a day from now) are filled in when sent, and `expires` from the deadline.\n"
    )
    return head + definition_texts(kept)[0]


async def create_form(ui: UI, request: Request) -> Response:
    source = request.query_params.get("from")
    if source is None:
        return await _form(ui, request, 200, slugid.nice(), EXAMPLE)
    task_id = check_task_id(source)
    definition = cast(
        dict[str, JSONValue], await access.read(ui, request, api_calls.route("task"), {"taskId": task_id})
    )
    return await _form(ui, request, 200, slugid.nice(), copied(task_id, definition), copied_from=task_id)


async def create_task(ui: UI, request: Request) -> Response:
    checked = await calls.signed_form(ui, request, "/tasks/create")
    if isinstance(checked, Response):
        return checked
    session, form, _ = checked
    task_id, text = form.get("taskId", "").strip(), form.get("definition", "")
    try:
        if not task_id:
            raise InputError("taskId: required")
        definition = with_dates(parse_definition(text), ui.now())
        await calls.invoke(ui, session, "createTask", {"taskId": task_id}, definition)
    except TaskyardError as refusal:
        return await _form(ui, request, refusal.status, task_id, text, refusal.message)
    return RedirectResponse(forms.with_done(f"/tasks/{task_id}", "created"), 303)


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/tasks/create", view(create_form)(ui), methods=["GET"]),
        Route("/tasks/create", view(create_task)(ui), methods=["POST"]),
    ]
