"""Fixtures of the storage tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from taskyard.storage.postgres import PostgresStorage


@pytest.fixture
async def one_connection(db_url: str) -> AsyncIterator[PostgresStorage]:
    """PostgreSQL storage with one pooled connection, so that every transaction runs on it: for what
    a connection keeps between transactions (the statements it prepared)."""
    if not db_url.startswith("postgres"):
        pytest.skip("a SQLite connection keeps nothing of ours between transactions")
    storage = await PostgresStorage(db_url, pool_size=1).open()
    yield storage
    await storage.close()
