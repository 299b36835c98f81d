"""UI tests in process: the `api` fixture of tests/api (the app on both databases, signed calls)."""

from __future__ import annotations

from tests.api.conftest import api, live_log_urls, services

__all__ = ["api", "live_log_urls", "services"]
