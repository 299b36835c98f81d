"""The page that creates a task from a definition in YAML or JSON, through the API's createTask.

The form is prefilled with an example and a fresh taskId. `created` (now) and `deadline` (a day
from now) are filled in when the definition leaves them out, as `taskyard task create` does. A
definition the API refuses shows the form again with the API's message (naming the field) and
the text as it was sent.
"""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from taskyard.model import dates, definition_yaml, slugid
from taskyard.model.errors import InputError, TaskyardError
from taskyard.model.types import JSONValue
from taskyard.ui import calls, forms
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
    ui: UI, request: Request, status: int, task_id: str, text: str, problem: str = ""
) -> Response:
    return await ui.page(request, "create.html", status, task_id=task_id, definition=text, problem=problem)


async def create_form(ui: UI, request: Request) -> Response:
    return await _form(ui, request, 200, slugid.nice(), EXAMPLE)


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
