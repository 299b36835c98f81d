"""The worker pools pages in a real browser against a real `taskyard serve`: the list from the
header's navigation, a pool's page one click on, and axe-core's rules on both pages."""

from __future__ import annotations

import uuid
from typing import Any

import taskcluster

from tests.browser.conftest import axe_check
from tests.browser.helpers import sign_in
from tests.e2e.conftest import Server


def test_list_then_click_to_a_pool(page: Any, site: Server, shot: Any) -> None:
    pool = f"browser-{uuid.uuid4().hex[:8]}/machines"
    wm = taskcluster.WorkerManager(site.options())
    definition = {
        "providerId": "static",
        "description": "the browser test's machines",
        "config": {},
        "owner": "browser@example.com",
        "emailOnError": False,
    }
    wm.createWorkerPool(pool, definition)
    expires = taskcluster.fromNowJSON("1 day")
    for worker_id in ("m0", "m1"):
        body = {"expires": expires, "capacity": 2, "providerInfo": {"staticSecret": "s" * 44}}
        wm.createWorker(pool, "rack-1", worker_id, body)
    report = {
        "workerGroup": "rack-1",
        "workerId": "m0",
        "kind": "boot-failure",
        "title": "disk full",
        "description": "no space left on /",
        "extra": {},
    }
    wm.reportWorkerError(pool, report)

    sign_in(page, site.credentials["clientId"], site.credentials["accessToken"], next_path="/pools")
    page.goto("/")
    with page.expect_navigation():
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Worker pools").click()
    assert page.get_by_role("heading", name="Worker pools").is_visible()
    row = page.get_by_role("row").filter(has_text=pool)
    assert "2 running" in row.inner_text() and "disk full" in row.inner_text()
    shot(page, "pools")
    axe_check(page)

    with page.expect_navigation():
        row.get_by_role("link", name=pool).click()
    main = page.locator("main").inner_text()
    assert "the browser test's machines" in main and "rack-1/m1" in main and "no space left on /" in main
    shot(page, "pool")
    axe_check(page)
