"""Signing in and out, creating a task from YAML and cancelling it, in a real browser against a real
`taskyard serve`; the refusals (wrong token, not signed in, missing scopes) as a user sees them.
Each page is screenshot and checked with axe-core's rules."""

from __future__ import annotations

import re
from typing import Any

import taskcluster

from taskyard.model import dates
from tests.browser.conftest import axe_check
from tests.browser.helpers import sign_in
from tests.e2e.conftest import Server

SUBMIT_FORM = """([action, fields]) => {
  const form = document.createElement("form");
  form.method = "post";
  form.action = action;
  for (const [name, value] of Object.entries(fields)) {
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = value;
    form.appendChild(input);
  }
  document.body.appendChild(form);
  form.submit();
}"""


def post_form(page: Any, action: str, fields: dict[str, str]) -> Any:
    """Post a form to `action` from the page, as a button of the page would: the browser's own
    navigation, with its cookies; answers the response."""
    with page.expect_navigation() as navigation:
        page.evaluate(SUBMIT_FORM, [action, fields])
    return navigation.value


def csrf(page: Any) -> str:
    """The session's CSRF token, from the sign-out form every page has."""
    return str(page.locator('form[action="/signout"] input[name="csrf"]').get_attribute("value"))


def test_sign_in_and_out(page: Any, site: Server, shot: Any) -> None:
    page.goto("/signin?next=/tasks/create")
    assert page.get_by_role("heading", name="Sign in").is_visible()
    shot(page, "signin")
    axe_check(page)

    page.get_by_label("Client id").fill(site.credentials["clientId"])
    page.get_by_label("Access token").fill("not-the-token")
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in").click()
    assert "the access token is wrong" in page.get_by_role("alert").inner_text()
    assert page.get_by_label("Client id").input_value() == site.credentials["clientId"]
    shot(page, "signin-refused")
    axe_check(page)

    sign_in(page, site.credentials["clientId"], site.credentials["accessToken"])
    assert page.url.endswith("/tasks/create?done=signed-in")
    assert page.get_by_role("status").inner_text() == "You are signed in."
    assert page.get_by_text(f"Signed in as {site.credentials['clientId']}").is_visible()
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert cookies["taskyard_session"]["httpOnly"] and cookies["taskyard_session"]["sameSite"] == "Strict"

    with page.expect_navigation():
        page.get_by_role("button", name="Sign out").click()
    assert page.get_by_role("link", name="Sign in").is_visible()
    assert "taskyard_session" not in {c["name"] for c in page.context.cookies()}


def test_create_a_task_from_yaml_then_cancel_it(
    page: Any, site: Server, queue: taskcluster.Queue, shot: Any
) -> None:
    sign_in(page, site.credentials["clientId"], site.credentials["accessToken"])
    page.goto("/tasks/create")
    definition = page.get_by_label("Task definition (YAML or JSON)")
    assert "taskQueueId: local/default" in definition.input_value()
    shot(page, "create-task")
    axe_check(page)

    definition.fill(definition.input_value().replace("name: hello", "name: made in a browser"))
    with page.expect_navigation():
        page.get_by_role("button", name="Create the task").click()
    found = re.search(r"/tasks/([A-Za-z0-9_-]{22})\?done=created$", page.url)
    assert found, page.url
    task_id = found[1]
    assert queue.task(task_id)["metadata"]["name"] == "made in a browser"
    claimed = queue.claimWork("local/default", {"workerGroup": "browser", "workerId": "w1", "tasks": 1})
    assert [c["status"]["taskId"] for c in claimed["tasks"]] == [task_id]

    page.goto(f"/tasks/{task_id}")
    assert page.locator(".state-running").first.is_visible()
    shot(page, "task-running-signed-in")
    with page.expect_navigation():
        page.get_by_role("button", name="Cancel task").click()
    assert page.url.endswith(f"/tasks/{task_id}?done=cancelled")
    status = queue.status(task_id)["status"]
    assert status["state"] == "exception" and status["runs"][-1]["reasonResolved"] == "canceled"
    assert page.locator(".state-exception").first.is_visible()  # the page shows what it did
    assert page.get_by_role("button", name="Cancel task").count() == 0
    assert page.get_by_role("button", name="Rerun task").is_visible()


def test_a_refused_definition_is_shown_with_the_text_kept(page: Any, site: Server, shot: Any) -> None:
    sign_in(page, site.credentials["clientId"], site.credentials["accessToken"])
    page.goto("/tasks/create")
    text = "taskQueueId: no slash here\npayload: {}\n# <b>kept</b>\n"
    page.get_by_label("Task definition (YAML or JSON)").fill(text)
    with page.expect_navigation():
        page.get_by_role("button", name="Create the task").click()
    assert "taskQueueId" in page.get_by_role("alert").inner_text()
    assert page.get_by_label("Task definition (YAML or JSON)").input_value() == text
    shot(page, "create-task-refused")
    axe_check(page)


def test_refusals_say_why(page: Any, site: Server, queue: taskcluster.Queue, shot: Any) -> None:
    auth = taskcluster.Auth(site.options())
    made = auth.createClient(
        "browser/reader", {"expires": "3000-01-01T00:00:00.000Z", "description": "reads", "scopes": []}
    )
    task_id = taskcluster.slugId()
    queue.createTask(task_id, task(queue))

    page.goto("/tasks/create")
    answer = post_form(page, f"/tasks/{task_id}/cancel", {"csrf": "none"})
    assert answer.status == 401
    assert page.get_by_role("heading", name="Not signed in").is_visible()
    shot(page, "action-not-signed-in")
    axe_check(page)

    sign_in(page, made["clientId"], made["accessToken"])
    answer = post_form(page, f"/tasks/{task_id}/cancel", {"csrf": csrf(page)})
    assert answer.status == 403
    assert f"queue:cancel-task:-/{task_id}/{task_id}" in page.get_by_role("alert").inner_text()
    shot(page, "action-missing-scopes")
    axe_check(page)

    answer = post_form(page, f"/tasks/{task_id}/cancel", {"csrf": "wrong"})
    assert answer.status == 403 and page.get_by_role("heading", name="Form refused").is_visible()
    assert queue.status(task_id)["status"]["state"] == "pending"


def task(queue: taskcluster.Queue) -> dict[str, Any]:
    now = taskcluster.fromNow("0 seconds")
    return {
        "taskQueueId": "browser/nobody-claims",
        "created": taskcluster.stringDate(now),
        "deadline": taskcluster.stringDate(taskcluster.fromNow("1 hour")),
        "payload": {},
        "metadata": {
            "name": "t",
            "description": "d",
            "owner": "o@example.com",
            "source": "https://example.com",
        },
    }


def test_quarantine_a_worker_from_its_queue_page_and_lift_it(
    page: Any, site: Server, queue: taskcluster.Queue, shot: Any
) -> None:
    queue.createTask(taskcluster.slugId(), task(queue) | {"taskQueueId": "browser/quarantine"})
    queue.claimWork("browser/quarantine", {"workerGroup": "grp", "workerId": "w-1", "tasks": 1})
    sign_in(page, site.credentials["clientId"], site.credentials["accessToken"], "/queues/browser/quarantine")
    page.get_by_label("Reason").fill("a flaky disk")
    with page.expect_navigation():
        page.get_by_role("button", name="Quarantine").click()
    assert page.url.endswith("/queues/browser/quarantine?done=quarantined")
    assert page.get_by_role("status").inner_text() == "The worker is quarantined."
    worker = queue.getWorker("browser", "quarantine", "grp", "w-1")
    assert dates.parse_iso(worker["quarantineUntil"]) > dates.now_ms() + 23 * dates.HOUR
    shot(page, "queue-worker-quarantined")
    axe_check(page)

    with page.expect_navigation():
        page.get_by_role("button", name="Lift quarantine").click()
    assert page.get_by_role("status").inner_text() == "The worker is no longer quarantined."
    worker = queue.getWorker("browser", "quarantine", "grp", "w-1")
    assert dates.parse_iso(worker["quarantineUntil"]) <= dates.now_ms()
