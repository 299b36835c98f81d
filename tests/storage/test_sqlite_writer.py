"""The SQLite writer runs on the event loop (storage/sqlite.py): it must never make the loop wait
for another connection's lock, and the write-ahead log must still be checkpointed."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from taskyard.storage import sqlite
from taskyard.storage.port import DatabaseUnavailable


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[sqlite.SQLiteStorage]:
    opened = await sqlite.open_sqlite(str(tmp_path / "taskyard.sqlite3"))
    yield opened
    await opened.close()


async def _add_group(storage: sqlite.SQLiteStorage, group: str) -> None:
    async with storage.transaction() as tx:
        await tx.execute("insert_group", group, "-", 1)


async def test_another_connections_write_lock_is_waited_for_without_stalling_the_loop(
    storage: sqlite.SQLiteStorage, tmp_path: Path
) -> None:
    other = sqlite3.connect(tmp_path / "taskyard.sqlite3", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # say, a second process
        waiting = asyncio.create_task(_add_group(storage, "waited"))
        alone = asyncio.create_task(storage.execute("insert_group", "alone", "-", 1))
        for _ in range(20):  # the loop runs on while both wait for the lock
            await asyncio.sleep(0.005)
        assert not waiting.done() and not alone.done()
        other.execute("COMMIT")
        await waiting
        assert await alone == 1
    finally:
        other.close()
    async with storage.reader() as session:
        assert await session.fetchrow("get_group", "waited") is not None


async def test_a_write_lock_held_too_long_is_unavailable(
    storage: sqlite.SQLiteStorage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite, "BUSY_TIMEOUT", 0.05)
    other = sqlite3.connect(tmp_path / "taskyard.sqlite3", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(DatabaseUnavailable, match="locked"):
            await _add_group(storage, "refused")
        with pytest.raises(DatabaseUnavailable, match="locked"):
            await storage.execute("insert_group", "refused", "-", 1)
        other.execute("ROLLBACK")
    finally:
        other.close()
    await _add_group(storage, "later")  # the writer is free again, no transaction left open


async def test_the_log_is_checkpointed_into_the_main_file(
    storage: sqlite.SQLiteStorage, tmp_path: Path
) -> None:
    path = tmp_path / "taskyard.sqlite3"

    def in_main_file() -> int:
        # immutable=1 reads the main file alone, ignoring the write-ahead log
        conn = sqlite3.connect(f"{path.as_uri()}?immutable=1", uri=True)
        try:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'task_groups'").fetchone() is None:
                return 0  # the migrations themselves are still in the log
            return int(conn.execute("SELECT count(*) FROM task_groups").fetchone()[0])
        finally:
            conn.close()

    for n in range(sqlite.CHECKPOINT_EVERY - 1):
        await _add_group(storage, f"g{n}")
    assert storage._checkpoint is None
    assert in_main_file() == 0  # the writer itself never checkpoints
    await _add_group(storage, "last")
    assert storage._checkpoint is not None
    await storage._checkpoint
    assert in_main_file() == sqlite.CHECKPOINT_EVERY


async def test_list_parameters_reach_json_each_whole(storage: sqlite.SQLiteStorage) -> None:
    """A list travels as JSON text: a name in any script comes back as given, and what the fast
    encoder can't write (an integer past 64 bits, a lone surrogate) goes all the same."""
    names = ["café", "名前", "plain"]
    async with storage.transaction() as tx:
        for name in names:
            await tx.execute("insert_group", name, "-", 1)
    async with storage.reader() as read:
        found = await read.fetch("resolved_groups", [*names, "other"])
    assert sorted(row["task_group_id"] for row in found) == sorted(names)
    conn = sqlite3.connect(":memory:")
    (text, same) = sqlite._args([[2**70, 1], 7])
    assert [v for (v,) in conn.execute("SELECT value FROM json_each(?)", (text,))] == [2**70, 1]
    assert same == 7
    assert sqlite._args([["a\ud800b"]]) == ('["a\\ud800b"]',)
