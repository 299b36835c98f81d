"""A page that forgets its scope check shows nothing: pages read only through the API's call
pipeline (`api/calls.py`), and a step whose check never ran raises instead of answering."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import slugid
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from taskyard.api import authz, calls, pages
from taskyard.api.app import Services, build_app
from taskyard.api.calls import Operation, UncheckedScopes
from taskyard.api.routing import Call
from taskyard.auth import static
from taskyard.ui import access
from taskyard.ui.app import Pages
from taskyard.ui.render import UI, view
from tests.api.conftest import BASE, Api

SECRET = "what-only-a-checked-read-may-show"


async def _forgets(call: Call) -> str:
    """A handler that was meant to pass `call.authorize` to the service, and does not."""
    return SECRET


# Its scopes name a value the service was to supply (`loads`), so nothing checks them before the
# handler: only the handler could, and it forgets.
FORGETFUL = Operation("forgetful", "queue:get-task:<taskId>/<schedulerId>", _forgets, loads=("schedulerId",))


async def leaky_page(ui: UI, request: Request) -> Response:
    return PlainTextResponse(
        await access.read(ui, request, FORGETFUL, {"taskId": request.path_params["taskId"]})
    )


@pytest.fixture
async def client(services: Services) -> AsyncIterator[httpx.AsyncClient]:
    """The app with the web UI, and one page more: `/leaky/<taskId>`, wired to FORGETFUL."""
    site = Pages(services)
    site.routes.append(Route("/leaky/{taskId}", view(leaky_page)(site.ui), methods=["GET"]))
    transport = httpx.ASGITransport(app=build_app(services, site), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as opened:
        yield opened


async def test_a_page_whose_read_forgets_its_check_answers_an_error_not_the_data(
    client: httpx.AsyncClient, api: Api
) -> None:
    task_id, _ = await api.create_task()
    answer = await client.get(f"/leaky/{task_id}", headers={"accept": "text/html"})
    assert answer.status_code == 500
    assert SECRET not in answer.text


async def test_the_pipeline_raises_for_a_step_whose_check_never_ran(services: Services) -> None:
    root = authz.Caller(static.ROOT_CLIENT_ID, ("*",))
    with pytest.raises(UncheckedScopes, match="forgetful"):
        await calls.call(services, root, FORGETFUL, {"taskId": slugid.nice()})


def test_an_operation_cannot_be_declared_without_scopes() -> None:
    with pytest.raises(ValueError, match="declares no scopes"):
        Operation("public", None, _forgets)  # type: ignore[arg-type]


def test_every_page_operation_declares_where_its_scope_values_come_from() -> None:
    """As `tests/api/test_route_tables.py` checks the routes: each template parameter is one of
    the call's parameters the pages pass, or one the service supplies (`loads`)."""
    passed = {"taskId", "runId", "name", "taskGroupId", "taskQueueId", "provisionerId", "workerType"}
    found = [value for value in vars(pages).values() if isinstance(value, Operation)]
    assert len(found) >= 10
    for op in found:
        assert authz.template_names(op.scopes) <= passed | set(op.loads), op.name
