"""The CLI's end-to-end tests drive the real server of `tests/e2e` (one per module and backend)."""

from __future__ import annotations

from tests.e2e.conftest import module_db_url, pytest_runtest_makereport, server, tq

__all__ = ["module_db_url", "pytest_runtest_makereport", "server", "tq"]
