"""Upgrades lose nothing: databases made by earlier releases, opened by today's taskyard.

The fixtures (`fixtures/<release>/<dialect>/`) were written by the old releases' own servers;
`make_fixtures.py` says which commits and how. Each is restored into a scratch database and
opened with today's `open_storage`, which migrates it.
"""

from __future__ import annotations

import pytest

from taskyard.storage import open_storage
from taskyard.storage.schema import NewerSchema, known_versions
from tests.upgrade.databases import execute_raw, fetch_raw


async def test_a_database_from_a_newer_taskyard_is_refused(db_url: str) -> None:
    newest = max(known_versions("postgres" if db_url.startswith("postgres") else "sqlite"))
    future = newest + 1
    await execute_raw(db_url, f"INSERT INTO schema_migrations VALUES ({future}, 'from_the_future', 0)")
    with pytest.raises(NewerSchema) as refused:
        await open_storage(db_url)
    assert str(refused.value).count("\n") == 0
    assert f"has schema version {future}, written by a newer taskyard" in str(refused.value)
    assert f"this one knows versions up to {newest}" in str(refused.value)
    versions = await fetch_raw(db_url, "SELECT version FROM schema_migrations ORDER BY version")
    assert versions[-1] == (future,)
