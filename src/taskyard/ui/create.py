"""The page that creates a task from a definition in YAML or JSON, through the API's createTask.

The form is prefilled with an example and a fresh taskId. `created` (now) and `deadline` (a day
from now) are filled in when the definition leaves them out, as `taskyard task create` does. A
definition the API refuses shows the form again with the API's message (naming the field) and
the text as it was sent.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
import yaml
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from taskyard.model import dates, slugid
from taskyard.model.errors import InputError, TaskyardError
from taskyard.model.types import JSONValue
from taskyard.ui import calls, forms
from taskyard.ui.render import view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.ui.render import UI

MAX_DEPTH = 64  # as the API refuses a body nested deeper

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


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """YAML's safe loader, refusing aliases (a small text could expand to a huge task) and reading
    dates as the strings the task definition wants, not as datetime objects."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not accepted", event.start_mark
            )
        return super().compose_node(parent, index)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_definition(text: str) -> dict[str, JSONValue]:
    """The task definition in `text` (JSON, or YAML); InputError naming the line and the problem."""
    if not text.strip():
        raise InputError("definition: required (a task definition in YAML or JSON)")
    try:
        value = orjson.loads(text) if text.lstrip().startswith("{") else yaml.load(text, Loader=_Loader)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"definition: not valid JSON: {exc}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"definition: not valid YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise InputError(f"definition: nested more than {MAX_DEPTH} levels deep, the most accepted") from None
    if not isinstance(value, dict):
        raise InputError("definition: must be a mapping (an object): the task definition")
    _check_json(value)
    return value


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + (getattr(exc, "problem", None) or str(exc).splitlines()[0])


def _check_json(value: object) -> None:
    """Refuse what YAML can say and JSON cannot: non-string keys, binary, sets, NaN, deep nesting."""
    stack: list[tuple[object, str, int]] = [(value, "definition", 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(f"definition: nested more than {MAX_DEPTH} levels deep, the most accepted")
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InputError(f"{where}: the key {key!r} must be a string")
                stack.append((child, f"{where}.{key}", depth + 1))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            raise InputError(f"{where}: must be a finite number")
        elif not (item is None or isinstance(item, str | int | float | bool)):
            raise InputError(f"{where}: a {type(item).__name__} is not a JSON value")


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
