"""The dashboard, the queues-and-workers page and a queue's page in a real browser.

The dashboard updates itself: a task created with TaskCluster's client shows in its queue's
pending count without a reload.
"""

from __future__ import annotations

import datetime
from typing import Any

import taskcluster

from tests.browser.conftest import axe_check

TASK_QUEUE_ID = "browser-prov/dashboard"
# Waits for the page's own refresh (every ~2 s); a bound on waiting, not on speed.
LIVE_WAIT_MS = 60_000


def create_task(queue: taskcluster.Queue, name: str = "a dashboard task") -> str:
    now = datetime.datetime.now(datetime.UTC)
    task_id: str = taskcluster.slugId()
    queue.createTask(
        task_id,
        {
            "taskQueueId": TASK_QUEUE_ID,
            "created": taskcluster.stringDate(now),
            "deadline": taskcluster.stringDate(now + datetime.timedelta(hours=1)),
            "payload": {},
            "metadata": {
                "name": name,
                "description": "made by the browser tests",
                "owner": "tests@example.com",
                "source": "https://example.com/tests/browser",
            },
        },
    )
    return task_id


def test_the_dashboard_counts_a_new_task_without_a_reload(page: Any, queue: Any, shot: Any) -> None:
    from playwright.sync_api import expect

    answer = page.goto("/")
    assert answer.status == 200
    expect(page.get_by_role("heading", name="No tasks yet")).to_be_visible()
    shot(page, "dashboard-empty")
    axe_check(page)
    page.evaluate("window.stillTheSamePage = true")

    task_id = create_task(queue)
    pending = page.locator(f'tr[data-queue="{TASK_QUEUE_ID}"] td.pending')
    expect(pending).to_have_text("1", timeout=LIVE_WAIT_MS)
    create_task(queue, "another one")
    expect(pending).to_have_text("2", timeout=LIVE_WAIT_MS)

    queue.claimWork(TASK_QUEUE_ID, {"workerGroup": "browser", "workerId": "w-1", "tasks": 1})
    row = page.locator(f'tr[data-queue="{TASK_QUEUE_ID}"]')
    expect(row.locator("td.claimed")).to_have_text("1", timeout=LIVE_WAIT_MS)
    expect(row.locator("td.claims")).to_have_text("1", timeout=LIVE_WAIT_MS)
    expect(row.locator("td.workers")).to_have_text("1", timeout=LIVE_WAIT_MS)
    assert page.evaluate("window.stillTheSamePage") is True  # updated in place, never reloaded
    expect(page.get_by_role("heading", name="No tasks yet")).to_have_count(0)
    group_link = page.get_by_role("link", name=task_id)  # its own group: taskGroupId = taskId
    expect(group_link).to_have_attribute("href", f"/groups/{task_id}")
    shot(page, "dashboard")
    axe_check(page)


def test_the_workers_page_and_a_queue_page(page: Any, queue: Any, shot: Any) -> None:
    from playwright.sync_api import expect

    create_task(queue, "<b>not bold</b>")
    claimed = queue.claimWork(TASK_QUEUE_ID, {"workerGroup": "browser", "workerId": "w-2", "tasks": 1})
    (task,) = claimed["tasks"]
    task_id = task["status"]["taskId"]

    page.goto("/workers")
    expect(page.get_by_role("heading", name="Queues and workers")).to_be_visible()
    expect(page.get_by_role("cell", name="w-2", exact=True)).to_be_visible()
    shot(page, "workers")
    axe_check(page)

    page.get_by_role("link", name=TASK_QUEUE_ID).click()
    page.wait_for_url(f"**/queues/{TASK_QUEUE_ID}")
    expect(page.get_by_role("heading", name=f"Task queue {TASK_QUEUE_ID}")).to_be_visible()
    running = page.locator("#worker-browser-w-2").get_by_role("link", name=task_id)
    expect(running).to_have_attribute("href", f"/tasks/{task_id}")
    expect(page.get_by_role("cell", name="<b>not bold</b>")).to_be_visible()  # shown as text
    shot(page, "queue")
    axe_check(page)

    page.goto("/")
    page.get_by_label("Task or group id").fill(task_id)
    page.get_by_role("button", name="Open").click()
    page.wait_for_url(f"**/tasks/{task_id}")
