"""The secrets pages in a real browser against a real `taskyard serve`: the list from the header's
navigation, a value shown only after a click, and axe-core's rules on both pages."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import taskcluster

from tests.browser.conftest import axe_check
from tests.browser.helpers import sign_in
from tests.e2e.conftest import Server


def test_list_then_click_to_show_a_value(page: Any, site: Server, shot: Any) -> None:
    name = f"browser-{uuid.uuid4().hex[:8]}/deploy"
    expires = (datetime.now(UTC) + timedelta(days=1)).isoformat().replace("+00:00", "Z")
    taskcluster.Secrets(site.options()).set(
        name, {"secret": {"password": "hunter2-browser"}, "expires": expires}
    )
    sign_in(page, site.credentials["clientId"], site.credentials["accessToken"], next_path="/secrets")
    page.goto("/")
    with page.expect_navigation():
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Secrets").click()
    assert page.get_by_role("heading", name="Secrets").is_visible()
    assert page.get_by_text(name).is_visible()
    assert "hunter2-browser" not in page.content()
    shot(page, "secrets")
    axe_check(page)

    row = page.get_by_role("row").filter(has_text=name)
    with page.expect_navigation():
        row.get_by_role("link", name="Show value").click()
    assert "hunter2-browser" in page.locator("main").inner_text()
    shot(page, "secret-value")
    axe_check(page)
