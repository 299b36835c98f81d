"""Fixtures the auth service's tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from taskyard.auth.service import Auth
from taskyard.storage import open_storage
from tests.conftest import SECRET_KEY


@pytest.fixture
async def other_process(db_url: str, auth: Auth) -> AsyncIterator[Any]:
    """Another `Auth` on its own connection to the same database, as a second process has."""
    storage = await open_storage(db_url)
    # SQLite tells no other process: that one relies on re-reading the generation (every time here).
    recheck = 0.0 if db_url.startswith("sqlite") else 3600.0
    other = Auth(storage, secret_key=SECRET_KEY, recheck_seconds=recheck)
    await other.start()
    yield other
    await storage.close()
