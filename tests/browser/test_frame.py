"""The frame every page shares: navigation, the error page for an unknown address."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import axe_check


def test_an_unknown_page_is_a_404_page_in_html(page: Any, shot: Any) -> None:
    answer = page.goto("/no/such/page")
    assert answer.status == 404
    assert page.get_by_role("heading", name="Not found").is_visible()
    assert "/no/such/page" in page.locator("main").inner_text()
    page.get_by_role("link", name="Dashboard").first.is_visible()
    shot(page, "not-found")
    axe_check(page)
