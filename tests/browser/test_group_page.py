"""The task-group page in a real browser: a group of 1,000 tasks (made in one request, as a task
graph), filtered by state and by text as one types and without JavaScript, its dependency graph,
and a row that changes while the page is open (a task claimed and completed through the queue)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import taskcluster
from playwright.sync_api import expect

from tests.api.conftest import Credentials, hawk_header
from tests.browser.conftest import axe_check
from tests.e2e.conftest import Server
from tests.e2e.helpers import definition, slug

TASK_QUEUE = "ui-browser/group"
GRAPH_SCOPES = ["queue:create-task:*", "queue:scheduler-id:task-graph-scheduler"]
VISIBLE = "tbody tr:not([hidden])"
HOSTILE = '<img src=x onerror="document.title=1">build & test'


def name_of(i: int) -> str:
    kind = ("build", "test", "lint")[i % 3]
    return HOSTILE if i == 5 else f"{kind}-{i}"


def create_group(site: Server, n: int, task_queue: str) -> tuple[str, list[str]]:
    """A group of `n` tasks in one createTaskGraph: a tenth of them roots, each other task requiring
    one or two earlier ones. Answers the group's id (the graph's) and the taskIds, in order."""
    graph_id, ids = slug(), [slug() for _ in range(n)]
    roots = max(1, n // 10)
    tasks = []
    for i, task_id in enumerate(ids):
        requires = [] if i < roots else sorted({ids[i // 3], ids[i // 2]} - {task_id})
        meta = {"name": name_of(i), "description": "d", "owner": "o@example.com", "source": "https://x"}
        task = definition(task_queue, metadata=meta, payload={})
        tasks.append({"taskId": task_id, "requires": requires, "reruns": 0, "task": task})
    body = json.dumps({"scopes": GRAPH_SCOPES, "metadata": {**tasks[0]["task"]["metadata"]}, "tasks": tasks})
    url = f"{site.root_url}/api/scheduler/v1/task-graph/{graph_id}"
    creds = Credentials(site.credentials["clientId"], site.credentials["accessToken"])
    headers = {
        "authorization": hawk_header("PUT", url, body.encode(), creds),
        "content-type": "application/json",
    }
    answer = requests.put(url, data=body, headers=headers, timeout=120)
    assert answer.status_code == 200, answer.text
    return graph_id, ids


@pytest.fixture(scope="module")
def big(site: Server) -> tuple[str, list[str]]:
    return create_group(site, 1000, TASK_QUEUE)


@pytest.fixture(scope="module")
def small(site: Server) -> tuple[str, list[str]]:
    return create_group(site, 30, TASK_QUEUE + "-small")


def complete_one(queue: taskcluster.Queue) -> str:
    """Claim the oldest pending task of the queue and report it completed; its taskId."""
    claimed = queue.claimWork(TASK_QUEUE, {"workerGroup": "wg", "workerId": "browser-1", "tasks": 1})
    (claim,) = claimed["tasks"]
    task_id: str = claim["status"]["taskId"]
    queue.reportCompleted(task_id, claim["runId"])
    return task_id


def test_the_group_page_lists_counts_and_filters_as_one_types(
    page: Any, big: tuple[str, list[str]], shot: Any
) -> None:
    group, ids = big
    answer = page.goto(f"/groups/{group}")
    assert answer.status == 200
    assert page.get_by_role("heading", level=1).inner_text() == f"Task group {group}"
    expect(page.locator("#tasks")).to_have_attribute("data-instant", "true")  # every task fetched
    assert page.locator("tbody tr").count() == 500  # a page of rows; the rest on demand
    expect(page.locator("#shown")).to_have_text("Tasks 1 to 500 of 1000")
    assert page.locator('[data-count="all"]').inner_text() == "1000"
    assert page.locator('[data-count="pending"]').inner_text() == "100"
    assert page.locator('[data-count="unscheduled"]').inner_text() == "900"
    page.get_by_role("button", name="Show 500 more (500 not shown)").click()
    expect(page.locator("tbody tr")).to_have_count(1000)
    # The hostile name is text, not markup.
    assert page.title().endswith("taskyard") and page.locator("img").count() == 0
    assert page.locator(f"#t-{ids[5]} td.name").inner_text() == HOSTILE
    axe_check(page)

    page.get_by_label("Name or taskId contains").fill("build-1")
    expected = sum(1 for i in range(1000) if name_of(i).startswith("build-1"))
    expect(page.locator(VISIBLE)).to_have_count(expected)
    expect(page.locator("#shown")).to_have_text(
        f"Tasks 1 to {expected} of {expected} matching the filter (1000 in the group)"
    )
    assert "q=build-1" in page.url

    page.get_by_label("State", exact=True).select_option("pending")
    pending = sum(1 for i in range(100) if name_of(i).startswith("build-1"))
    expect(page.locator(VISIBLE)).to_have_count(pending)
    assert all(s == "pending" for s in page.locator("tbody tr:not([hidden]) td.state").all_inner_texts())
    assert "state=pending" in page.url
    shot(page, "group-filtered")
    axe_check(page)

    page.get_by_label("Name or taskId contains").fill(ids[500][:10])  # a taskId's start
    page.get_by_label("State", exact=True).select_option("")
    expect(page.locator(VISIBLE).first).to_have_id(f"t-{ids[500]}")


def test_the_filter_works_without_javascript(browser: Any, site: Server, big: tuple[str, list[str]]) -> None:
    group, _ = big
    context = browser.new_context(base_url=site.root_url, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"/groups/{group}")
        page.get_by_label("State", exact=True).select_option("pending")
        page.get_by_label("Name or taskId contains").fill("lint")
        page.get_by_role("button", name="Filter").click()
        page.wait_for_url("**state=pending**")
        expected = sum(1 for i in range(100) if name_of(i).startswith("lint"))
        assert page.locator("tbody tr").count() == expected
        shown = f"Tasks 1 to {expected} of {expected} matching the filter (1000 in the group)"
        assert page.locator("#shown").inner_text() == shown
        page.get_by_role("link", name="Show every task").click()
        assert page.locator("tbody tr").count() == 500
        page.get_by_role("link", name="Next 500").click()
        assert page.locator("tbody tr").count() == 500
        assert page.locator("#shown").inner_text() == "Tasks 501 to 1000 of 1000"
    finally:
        context.close()


def test_a_task_completing_while_the_page_is_open_updates_its_row(
    page: Any, big: tuple[str, list[str]], queue: taskcluster.Queue, shot: Any
) -> None:
    group, _ = big
    page.goto(f"/groups/{group}?state=pending")
    assert page.locator("#tasks").get_attribute("data-live").startswith(f"/ui/live/groups/{group}?after=")
    expect(page.locator("#tasks")).to_have_attribute("data-instant", "true")
    before = int(page.locator('[data-count="completed"]').inner_text())
    task_id = complete_one(queue)
    row = page.locator(f"#t-{task_id}")
    expect(row.locator("td.state")).to_have_text("completed", timeout=15_000)
    assert row.locator("td.state").get_attribute("class") == "state state-completed"
    assert row.locator("td").nth(4).inner_text().endswith("Z")  # the last run's start
    assert row.locator("td").nth(6).inner_text() == "wg/browser-1"
    assert row.is_hidden()  # no longer pending: the filter hides it
    expect(page.locator('[data-count="completed"]')).to_have_text(str(before + 1), timeout=15_000)
    page.get_by_label("State", exact=True).select_option(
        "completed"
    )  # narrows nothing the server left out: a reload
    page.wait_for_url("**state=completed**")
    assert page.locator(f"#t-{task_id} td.state").inner_text() == "completed"
    shot(page, "group-live")


def test_new_tasks_in_the_group_are_announced(page: Any, small: tuple[str, list[str]], site: Server) -> None:
    group, ids = small
    page.goto(f"/groups/{group}")
    task = definition(TASK_QUEUE + "-small", payload={}, taskGroupId=group)
    extend = {"tasks": [{"taskId": slug(), "requires": [ids[0]], "reruns": 0, "task": task}]}
    body = json.dumps(extend)
    url = f"{site.root_url}/api/scheduler/v1/task-graph/{group}/extend"
    creds = Credentials(site.credentials["clientId"], site.credentials["accessToken"])
    headers = {
        "authorization": hawk_header("POST", url, body.encode(), creds),
        "content-type": "application/json",
    }
    assert requests.post(url, data=body, headers=headers, timeout=30).status_code == 200
    notice = page.locator("#live-notice")
    notice.wait_for(state="visible", timeout=15_000)
    assert notice.inner_text().startswith("1 new task joined the group.")
    notice.get_by_role("link", name="Reload").click()
    expect(page.locator("tbody tr")).to_have_count(31)


def test_the_graph_of_a_small_group_draws_every_task(
    page: Any, small: tuple[str, list[str]], shot: Any
) -> None:
    group, ids = small
    page.goto(f"/groups/{group}")
    page.get_by_role("link", name="Dependency graph").click()
    page.wait_for_url(f"**/groups/{group}/graph")
    nodes = page.locator("svg.graph a.node")
    assert nodes.count() >= 30
    root = page.locator(f'svg.graph a[href="/tasks/{ids[0]}"]')
    assert root.locator("text").text_content() == "build-0"
    assert page.locator("svg.graph .edges path").count() > 20
    shot(page, "group-graph")
    axe_check(page)


def test_the_graph_of_a_large_group_is_collapsed(page: Any, big: tuple[str, list[str]], shot: Any) -> None:
    group, _ = big
    page.goto(f"/groups/{group}/graph")
    assert "each box stands for the tasks of one state" in page.locator("main").inner_text()
    boxes = page.locator("svg.graph a.node")
    assert 3 <= boxes.count() <= 60
    assert sum(int(t.split()[0].replace(",", "")) for t in boxes.locator("text").all_text_contents()) >= 1000
    shot(page, "group-graph-collapsed")
    axe_check(page)
    boxes.filter(has_text="unscheduled").first.click()
    page.wait_for_url("**state=unscheduled**")
    assert page.locator("#f-state").input_value() == "unscheduled"


def test_an_unknown_group_is_a_404_page(page: Any, shot: Any) -> None:
    answer = page.goto(f"/groups/{slug()}")
    assert answer.status == 404
    assert page.get_by_role("heading", name="Not found").is_visible()
    shot(page, "group-not-found")
    axe_check(page)


@pytest.fixture(autouse=True)
def _no_console_errors(page: Any) -> Iterator[None]:
    """A page of the group raises no script error (the security policy blocks none of its own)."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "404" not in m.text else None)
    yield
    assert errors == []
