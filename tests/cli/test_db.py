"""`taskyard migrate`, `backup` and `restore`, on old releases' databases and fresh ones."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from taskyard.cli.main import main
from taskyard.cli.options import DATA_DIR_LOCK
from taskyard.lockfile import acquire
from taskyard.storage.schema import known_versions
from tests.upgrade.databases import FIXTURES, restored

FIRST = "schema1-ca9d4ad"


@pytest.fixture(autouse=True)
def _no_taskyard_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("TASKYARD_DB", "TASKYARD_DATA_DIR"):
        monkeypatch.delenv(variable, raising=False)


def taskyard(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    """(exit status, stdout lines, stderr lines) of `taskyard ARGS`, run in this process."""
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


def old_sqlite(tmp_path: Path, release: str = FIRST) -> Path:
    """A data directory holding `release`'s SQLite database."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    shutil.copyfile(FIXTURES / release / "sqlite" / "taskyard.sqlite3", data_dir / "taskyard.sqlite3")
    return data_dir


def count_tasks(database: Path) -> int:
    conn = sqlite3.connect(database)
    try:
        return int(conn.execute("SELECT count(*) FROM tasks").fetchone()[0])
    finally:
        conn.close()


def versions(database: Path) -> list[int]:
    conn = sqlite3.connect(database)
    try:
        return [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
    finally:
        conn.close()


@pytest.mark.parametrize("dialect", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_migrate_names_each_migration_it_applies(
    dialect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    known = known_versions(dialect)
    with restored(FIRST, dialect, tmp_path) as old:
        where = ["--data-dir", str(old.data_dir), "--db", old.db_url]
        status, out, err = taskyard(capsys, "migrate", *where)
        assert (status, err) == (0, [])
        missing = [v for v in known if v > old.schema]
        assert out[:-1] == [f"applied migration {v:04d} {known[v]}" for v in missing]
        assert out[-1].endswith(f": migrated to schema version {max(known)}")
        status, out, err = taskyard(capsys, "migrate", *where)
        assert (status, err) == (0, [])
        assert len(out) == 1 and out[0].endswith(f"nothing to apply, already at schema version {max(known)}")


def test_migrate_refuses_a_database_from_a_newer_taskyard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = old_sqlite(tmp_path)
    database = data_dir / "taskyard.sqlite3"
    future = max(known_versions("sqlite")) + 1
    with sqlite3.connect(database) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (?, 'from_the_future', 0)", (future,))
    conn.close()
    status, out, err = taskyard(capsys, "migrate", "--data-dir", str(data_dir))
    assert (status, out) == (1, [])
    assert len(err) == 1 and f"has schema version {future}, written by a newer taskyard" in err[0]
    assert versions(database) == [1, future]  # nothing applied


def test_migrate_and_restore_refuse_while_a_server_holds_the_data_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = old_sqlite(tmp_path)
    backup = tmp_path / "backup.sqlite3"
    assert taskyard(capsys, "backup", str(backup), "--data-dir", str(data_dir))[0] == 0
    with acquire(
        data_dir / DATA_DIR_LOCK, what="the data directory", flag="--data-dir", process="taskyard up"
    ):
        status, out, err = taskyard(capsys, "migrate", "--data-dir", str(data_dir))
        assert (status, out) == (3, [])
        assert "is in use by taskyard up" in err[0]
        status, out, err = taskyard(capsys, "restore", str(backup), "--data-dir", str(data_dir))
        assert (status, out) == (3, [])
        # A backup needs no lock: the server keeps running while it is taken.
        assert (
            taskyard(capsys, "backup", str(tmp_path / "again.sqlite3"), "--data-dir", str(data_dir))[0] == 0
        )
    assert versions(data_dir / "taskyard.sqlite3") == [1]


def test_backup_then_restore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = old_sqlite(tmp_path, "schema5-c6ea60f")
    assert taskyard(capsys, "migrate", "--data-dir", str(data_dir))[0] == 0
    backup = tmp_path / "backups" / "taskyard.sqlite3"
    backup.parent.mkdir()
    status, out, err = taskyard(capsys, "backup", str(backup), "--data-dir", str(data_dir))
    assert (status, err) == (0, [])
    assert (
        out[0].startswith(f"wrote {backup}: ")
        and f"schema version {max(known_versions('sqlite'))}, 6 tasks" in out[0]
    )
    assert "secret key" in out[1]
    assert sorted(p.name for p in backup.parent.iterdir()) == ["taskyard.sqlite3"]  # no partial files left

    status, out, err = taskyard(capsys, "backup", str(backup), "--data-dir", str(data_dir))
    assert status == 1 and "exists already" in err[0]

    with sqlite3.connect(data_dir / "taskyard.sqlite3") as conn:
        conn.execute("DELETE FROM tasks")
    conn.close()
    status, out, err = taskyard(capsys, "restore", str(backup), "--data-dir", str(data_dir))
    assert (status, err) == (0, [])
    kept = next(data_dir.glob("taskyard.sqlite3.before-restore-*"))
    assert out[0] == f"kept the database it replaces as {kept}"
    assert "6 tasks" in out[1]
    assert sqlite3.connect(data_dir / "taskyard.sqlite3").execute(
        "SELECT count(*) FROM tasks"
    ).fetchone() == (6,)
    assert sqlite3.connect(kept).execute("SELECT count(*) FROM tasks").fetchone() == (0,)


def test_restore_into_an_empty_data_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    backup = FIXTURES / FIRST / "sqlite" / "taskyard.sqlite3"
    data_dir = tmp_path / "fresh"
    status, out, err = taskyard(capsys, "restore", str(backup), "--data-dir", str(data_dir))
    assert (status, err) == (0, [])
    assert len(out) == 1 and out[0].startswith(f"restored {backup} to sqlite:///")
    assert versions(data_dir / "taskyard.sqlite3") == [1]  # migrated when a server next starts


def test_restore_refuses_what_is_not_a_taskyard_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = old_sqlite(tmp_path)
    before = (data_dir / "taskyard.sqlite3").read_bytes()
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database at all" * 100)
    other = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    for bad in (junk, other, tmp_path / "missing.sqlite3"):
        status, out, err = taskyard(capsys, "restore", str(bad), "--data-dir", str(data_dir))
        assert (status, out) == (1, []) and len(err) == 1, err
    assert (data_dir / "taskyard.sqlite3").read_bytes() == before
    assert not list(data_dir.glob("*before-restore*"))


def test_backup_and_restore_point_postgresql_to_its_own_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "postgresql://taskyard@db.example.com/taskyard"
    status, out, err = taskyard(capsys, "backup", str(tmp_path / "x.dump"), "--db", url)
    assert (status, out) == (2, [])
    assert err == [
        "taskyard: backup copies SQLite databases; back PostgreSQL up with pg_dump:",
        f"  pg_dump --format=custom --file {tmp_path / 'x.dump'} {url}",
    ]
    status, out, err = taskyard(capsys, "restore", str(tmp_path / "x.dump"), "--db", url)
    assert (status, out) == (2, []) and err[
        1
    ] == f"  pg_restore --no-owner --dbname {url} {tmp_path / 'x.dump'}"
