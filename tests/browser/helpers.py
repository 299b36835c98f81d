"""Helpers the browser tests share."""

from __future__ import annotations

from typing import Any


def sign_in(page: Any, client_id: str, access_token: str, next_path: str = "/tasks/create") -> None:
    page.goto(f"/signin?next={next_path}")
    page.get_by_label("Client id").fill(client_id)
    page.get_by_label("Access token").fill(access_token)
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in").click()
