"""In-process tests of the web UI: the app of `tests/api` (both backends) over httpx's ASGI transport."""

from __future__ import annotations

from tests.api.conftest import api, live_log_urls, services

__all__ = ["api", "live_log_urls", "services"]
