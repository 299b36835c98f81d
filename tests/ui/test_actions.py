"""The web UI's actions, on both databases: each posts a form with the session's CSRF token and
calls the API route it stands for as the signed-in client, so it needs exactly that route's scopes.
Refused (not signed in, no or a wrong CSRF token, missing scopes), nothing changes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest

from taskyard.model import dates, slugid
from taskyard.ui import create
from taskyard.ui.render import ENVIRONMENT
from taskyard.ui.sessions import Viewer
from tests.api.conftest import ROOT, TASK_QUEUE_ID, Api, task_definition
from tests.ui.conftest import Browser, hidden_fields, new_client

WORKER = ("api-prov", "api-wt", "wg", "w1")
WORKER_PATH = "/provisioners/{}/worker-types/{}/workers/{}/{}".format(*WORKER)
METADATA = {"description": "d", "owner": "o@example.com", "source": "https://example.com"}
QUARANTINE = "/workers/{}/{}/{}/{}/quarantine".format(*WORKER)


async def state_of(api: Api, task_id: str) -> str:
    answer = await api.call("GET", f"/task/{task_id}/status")
    assert answer.status_code == 200, answer.text
    return str(answer.json()["status"]["state"])


async def running_task(api: Api) -> str:
    """A task claimed by the worker WORKER: running."""
    task_id, _ = await api.create_task()
    claimed = await api.call(
        "POST",
        "/claim-work/" + quote(TASK_QUEUE_ID, safe=""),
        {"workerGroup": "wg", "workerId": "w1", "tasks": 1},
    )
    assert [t["status"]["taskId"] for t in claimed.json()["tasks"]] == [task_id], claimed.text
    return task_id


async def not_quarantined(api: Api) -> bool:
    return dates.parse_iso((await worker(api))["quarantineUntil"]) <= api.clock()


async def worker(api: Api) -> dict[str, Any]:
    answer = await api.call("GET", WORKER_PATH)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def test_root_cancels_a_running_task(api: Api, root_browser: Browser) -> None:
    task_id = await running_task(api)
    done = await root_browser.post(f"/tasks/{task_id}/cancel", {"csrf": await root_browser.csrf()})
    assert done.status_code == 303, done.text
    assert done.headers["location"] == f"/tasks/{task_id}?done=cancelled"
    assert await state_of(api, task_id) == "exception"


async def test_rerun_and_schedule(api: Api, root_browser: Browser) -> None:
    csrf = await root_browser.csrf()
    first, _ = await api.create_task()
    second, _ = await api.create_task(dependencies=[first])
    assert await state_of(api, second) == "unscheduled"
    scheduled = await root_browser.post(f"/tasks/{second}/schedule", {"csrf": csrf})
    assert scheduled.status_code == 303 and scheduled.headers["location"].endswith("?done=scheduled")
    assert await state_of(api, second) == "pending"
    assert (await api.call("POST", f"/task/{first}/cancel")).status_code == 200
    rerun = await root_browser.post(f"/tasks/{first}/rerun", {"csrf": csrf})
    assert rerun.status_code == 303 and rerun.headers["location"].endswith("?done=rerun")
    assert await state_of(api, first) == "pending"


async def test_an_action_goes_back_to_the_page_it_came_from(api: Api, root_browser: Browser) -> None:
    task_id, _ = await api.create_task()
    page = f"http://testserver/groups/{task_id}?view=graph"
    done = await root_browser.post(
        f"/tasks/{task_id}/cancel", {"csrf": await root_browser.csrf()}, headers={"referer": page}
    )
    assert done.headers["location"] == f"/groups/{task_id}?view=graph&done=cancelled"
    other, _ = await api.create_task()
    foreign = {"referer": "https://evil.example/x"}
    done = await root_browser.post(
        f"/tasks/{other}/cancel", {"csrf": await root_browser.csrf()}, headers=foreign
    )
    assert done.headers["location"] == f"/tasks/{other}?done=cancelled"


async def test_not_signed_in_is_a_401_page_with_a_signin_link(
    api: Api, browsers: Callable[..., Browser]
) -> None:
    task_id, _ = await api.create_task()
    refused = await browsers().post(f"/tasks/{task_id}/cancel", {"csrf": "anything"})
    assert refused.status_code == 401
    assert "text/html" in refused.headers["content-type"]
    assert f'href="/signin?next=/tasks/{task_id}"' in refused.text
    assert await state_of(api, task_id) == "pending"


@pytest.mark.parametrize("form", [{}, {"csrf": ""}, {"csrf": "wrong"}])
async def test_a_form_without_the_csrf_token_is_refused(
    api: Api, root_browser: Browser, form: dict[str, str]
) -> None:
    task_id = await running_task(api)
    refused = await root_browser.post(f"/tasks/{task_id}/cancel", form)
    assert refused.status_code == 403
    assert "CSRF token" in refused.text
    assert await state_of(api, task_id) == "running"
    quarantine = await root_browser.post(QUARANTINE, form)
    assert quarantine.status_code == 403
    assert await not_quarantined(api)
    created = await root_browser.post(
        "/tasks/create", form | {"taskId": slugid.nice(), "definition": create.EXAMPLE}
    )
    assert created.status_code == 403


async def test_another_session_token_is_refused(
    api: Api, root_browser: Browser, browsers: Callable[..., Browser]
) -> None:
    """A token is its own session's: one stolen from another session is no good."""
    other = browsers()
    await other.signin(ROOT)
    task_id, _ = await api.create_task()
    refused = await root_browser.post(f"/tasks/{task_id}/cancel", {"csrf": await other.csrf()})
    assert refused.status_code == 403
    assert await state_of(api, task_id) == "pending"


async def test_missing_scopes_are_a_403_naming_them(api: Api, browsers: Callable[..., Browser]) -> None:
    creds = await new_client(api, "ui/reader", ["queue:rerun-task:*"])
    browser = browsers()
    await browser.signin(creds)
    task_id = await running_task(api)
    refused = await browser.post(f"/tasks/{task_id}/cancel", {"csrf": await browser.csrf()})
    assert refused.status_code == 403
    assert "Client ID ui/reader does not have sufficient scopes" in refused.text
    assert f"queue:cancel-task:-/{task_id}/{task_id}" in refused.text  # the missing scope, shown
    assert await state_of(api, task_id) == "running"
    quarantine = await browser.post(QUARANTINE, {"csrf": await browser.csrf()})
    assert quarantine.status_code == 403
    assert "queue:quarantine-worker:api-prov/api-wt/wg/w1" in quarantine.text
    assert await not_quarantined(api)


async def test_a_limited_client_acts_with_its_scopes(api: Api, browsers: Callable[..., Browser]) -> None:
    creds = await new_client(api, "ui/canceller", ["queue:cancel-task-in-project:none"])
    browser = browsers()
    await browser.signin(creds)
    task_id = await running_task(api)
    done = await browser.post(f"/tasks/{task_id}/cancel", {"csrf": await browser.csrf()})
    assert done.status_code == 303, done.text
    assert await state_of(api, task_id) == "exception"


async def test_an_unknown_task_or_worker_is_a_404_page(root_browser: Browser) -> None:
    unknown = await root_browser.post(f"/tasks/{slugid.nice()}/cancel", {"csrf": await root_browser.csrf()})
    assert unknown.status_code == 404 and "text/html" in unknown.headers["content-type"]
    nobody = await root_browser.post(QUARANTINE.replace("/w1/", "/w2/"), {"csrf": await root_browser.csrf()})
    assert nobody.status_code == 404 and "worker wg/w2 of api-prov/api-wt does not exist" in nobody.text


async def test_quarantine_and_lift_it(api: Api, root_browser: Browser) -> None:
    await running_task(api)
    csrf = await root_browser.csrf()
    done = await root_browser.post(
        QUARANTINE, {"csrf": csrf, "until": "2999-01-02T03:04", "info": "flaky disk"}
    )
    assert done.status_code == 303, done.text
    assert done.headers["location"] == "/workers?done=quarantined"
    quarantined = await worker(api)
    assert quarantined["quarantineUntil"] == "2999-01-02T03:04:00.000Z"
    lifted = await root_browser.post(QUARANTINE, {"csrf": csrf, "lift": "1"})
    assert lifted.headers["location"] == "/workers?done=unquarantined"
    assert await not_quarantined(api)
    bad = await root_browser.post(QUARANTINE, {"csrf": csrf, "until": "next tuesday"})
    assert bad.status_code == 400 and "until: must be a date and time in UTC" in bad.text


async def test_a_day_by_default(api: Api, root_browser: Browser) -> None:
    await running_task(api)
    done = await root_browser.post(QUARANTINE, {"csrf": await root_browser.csrf(), "until": ""})
    assert done.status_code == 303
    assert dates.parse_iso((await worker(api))["quarantineUntil"]) == api.clock() + dates.DAY


async def test_create_a_task_from_yaml(api: Api, root_browser: Browser) -> None:
    page = await root_browser.get("/tasks/create")
    form = hidden_fields(page.text, "/tasks/create")
    task_id = re.search(r'name="taskId" value="([^"]+)"', page.text)[1]  # type: ignore[index]
    assert slugid.is_valid(task_id)
    assert "taskQueueId: local/default" in page.text
    text = create.EXAMPLE.replace("local/default", TASK_QUEUE_ID)
    done = await root_browser.post("/tasks/create", form | {"taskId": task_id, "definition": text})
    assert done.status_code == 303, done.text
    assert done.headers["location"] == f"/tasks/{task_id}?done=created"
    task = (await api.call("GET", f"/task/{task_id}")).json()
    assert task["metadata"]["name"] == "hello" and task["taskQueueId"] == TASK_QUEUE_ID
    assert dates.parse_iso(task["deadline"]) == api.clock() + dates.DAY
    assert await state_of(api, task_id) == "pending"


async def test_create_a_task_from_json(api: Api, root_browser: Browser) -> None:
    task_id = slugid.nice()
    text = json.dumps(task_definition(api.clock, metadata={"name": "j"} | METADATA), indent=2)
    done = await root_browser.post(
        "/tasks/create", {"csrf": await root_browser.csrf(), "taskId": task_id, "definition": text}
    )
    assert done.status_code == 303, done.text
    assert await state_of(api, task_id) == "pending"


@pytest.mark.parametrize(
    ("text", "status", "says"),
    [
        ("taskQueueId: [unclosed", 400, "definition: not valid YAML: line 2, column"),
        ("- a list", 400, "definition: must be a mapping"),
        ("a: &x [1]\nb: *x", 400, "aliases (*name) are not accepted"),
        ("{broken json", 400, "definition: not valid JSON"),
        ("taskQueueId: no-slash\npayload: {}", 400, "taskQueueId"),
        ("  \n", 400, "definition: required"),
        ("1: one", 400, "definition: the key 1 must be a string"),
        ("x: !!binary aGVsbG8=", 400, "line 1, column 4: a !!binary is not a JSON value"),
    ],
)
async def test_a_refused_definition_shows_the_form_again(
    api: Api, root_browser: Browser, text: str, status: int, says: str
) -> None:
    task_id = slugid.nice()
    text += "\n# <script>alert(1)</script>" if text.strip() else ""
    refused = await root_browser.post(
        "/tasks/create", {"csrf": await root_browser.csrf(), "taskId": task_id, "definition": text}
    )
    assert refused.status_code == status
    assert says.replace("'", "&#39;") in refused.text.replace("&#34;", '"'), refused.text
    if text.strip():
        assert "# &lt;script&gt;alert(1)&lt;/script&gt;</textarea>" in refused.text  # kept, escaped
    assert f'value="{task_id}"' in refused.text
    assert not await api.task_exists(task_id)


async def test_a_bad_task_id_is_named(root_browser: Browser) -> None:
    refused = await root_browser.post(
        "/tasks/create",
        {"csrf": await root_browser.csrf(), "taskId": "not a slug", "definition": create.EXAMPLE},
    )
    assert refused.status_code == 400
    assert "URL parameter taskId" in refused.text


async def test_creating_needs_the_create_task_scope(api: Api, browsers: Callable[..., Browser]) -> None:
    creds = await new_client(api, "ui/no-create", ["queue:cancel-task:*"])
    browser = browsers()
    await browser.signin(creds)
    task_id = slugid.nice()
    text = create.EXAMPLE.replace("local/default", TASK_QUEUE_ID)
    refused = await browser.post(
        "/tasks/create", {"csrf": await browser.csrf(), "taskId": task_id, "definition": text}
    )
    assert refused.status_code == 403
    assert f"queue:create-task:lowest:{TASK_QUEUE_ID}" in refused.text
    assert "taskQueueId: api-prov/api-wt" in refused.text  # the text is kept
    assert not await api.task_exists(task_id)


async def test_the_create_page_asks_to_sign_in_first(browsers: Callable[..., Browser]) -> None:
    page = await browsers().get("/tasks/create")
    assert page.status_code == 200
    assert 'href="/signin?next=/tasks/create"' in page.text
    assert 'action="/tasks/create"' not in page.text


def render(macro: str, *args: object) -> str:
    template = ENVIRONMENT.from_string(
        '{% from "_actions.html" import ' + macro + " %}{{ " + macro + "(*args) }}"
    )
    return template.render(args=args)


@pytest.mark.parametrize(
    ("state", "buttons"),
    [
        ("unscheduled", ["cancel", "schedule"]),
        ("pending", ["cancel"]),
        ("running", ["cancel"]),
        ("completed", ["rerun"]),
        ("failed", ["rerun"]),
        ("exception", ["rerun"]),
    ],
)
def test_the_task_actions_macro(state: str, buttons: list[str]) -> None:
    viewer = Viewer("ui/someone", "the-token")
    shown = render("task_actions", "fKz7yXv3Q0m2p9Wq1bC4dA", state, viewer, "the-token")
    assert re.findall(r'action="/tasks/fKz7yXv3Q0m2p9Wq1bC4dA/(\w+)"', shown) == buttons
    assert shown.count('name="csrf" value="the-token"') == len(buttons)
    signed_out = render("task_actions", "fKz7yXv3Q0m2p9Wq1bC4dA", state, None, "")
    assert "<form" not in signed_out and "Sign in to act" in signed_out


def test_the_worker_actions_macro() -> None:
    viewer = Viewer("ui/someone", "the-token")
    free = render("worker_actions", *WORKER, False, viewer, "the-token")
    assert f'action="{QUARANTINE}"' in free and 'name="until"' in free and 'name="lift"' not in free
    held = render("worker_actions", *WORKER, True, viewer, "the-token")
    assert 'name="lift"' in held and "Lift quarantine" in held
    assert render("worker_actions", *WORKER, False, None, "").strip() == ""


HOSTILE_BODIES = [
    (b"", "application/x-www-form-urlencoded"),
    (b"%ff%fe=%00&&&==&csrf", "application/x-www-form-urlencoded"),
    (b"\xff\xfe\x00" * 100, "application/x-www-form-urlencoded"),
    (b"a=1&" * 200, "application/x-www-form-urlencoded"),
    (b'{"csrf": "x"}', "application/json"),
    (
        b"--b\r\nContent-Disposition: form-data; name=csrf\r\n\r\nx\r\n--b--",
        "multipart/form-data; boundary=b",
    ),
]
HOSTILE_FIELDS = [
    {"until": "9999-99-99T99:99"},
    {"until": "0001-01-01T00:00"},
    {"until": "x" * 10_000, "info": "y" * 10_000},
    {"taskId": "x" * 500, "definition": "[" * 5000},
    {"taskId": slugid.nice(), "definition": "a: " + "[" * 200 + "]" * 200},
    {"taskId": slugid.nice(), "definition": "a: .nan"},
    {"taskId": slugid.nice(), "definition": "a: !!python/object:os.system [x]"},
    {"taskId": slugid.nice(), "definition": "\x00\x01: \x7f"},
    {"next": "//evil.example", "lift": "1"},
]


async def test_hostile_forms_get_an_answer_never_an_error(api: Api, root_browser: Browser) -> None:
    """Whatever a form posts, a signed-in session gets a page or a redirect home, never a 5xx."""
    await running_task(api)
    task_id = await running_task(api)
    csrf = await root_browser.csrf()
    paths = [
        f"/tasks/{task_id}/cancel",
        f"/tasks/{task_id}/rerun",
        QUARANTINE,
        "/tasks/create",
        "/signin",
        "/signout",
    ]
    for path in paths:
        for body, content_type in HOSTILE_BODIES:
            answer = await root_browser.client.post(
                path, content=body, headers={"content-type": content_type}
            )
            assert answer.status_code in (303, 400, 401, 403, 409, 413), (path, body[:40], answer.status_code)
        for fields in HOSTILE_FIELDS:
            answer = await root_browser.post(path, {"csrf": csrf} | fields)
            assert answer.status_code < 500, (path, fields, answer.text[:300])
            location = answer.headers.get("location", "/")
            assert location.startswith("/") and not location.startswith("//"), location
        assert await root_browser.who() == ROOT.client_id or path == "/signout"
        if path == "/signout":
            break
