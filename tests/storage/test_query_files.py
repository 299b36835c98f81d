"""Query files: `queries.sql` and one file per area (`sql/<area>.sql`), each with its dialects'
overrides; a name is written once among the shared files, and once among a dialect's."""

from __future__ import annotations

import pytest

from taskyard.storage import _queries

FILES = {
    "sql/queries.sql": "-- name: first\nSELECT 1\n-- name: second\nSELECT 2",
    "sql/queries.sqlite.sql": "-- name: second\nSELECT 'sqlite'",
    "sql/index.sql": "-- name: third\nSELECT 3",
    "sql/index.postgres.sql": "-- name: third\nSELECT 'postgres'",
}


def _as_files(monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    names = [path.removeprefix("sql/") for path in files]

    def listed(dialect: str | None) -> list[str]:
        mine = [n for n in names if (n.split(".")[1] if n.count(".") == 2 else None) == dialect]
        return sorted(mine, key=lambda n: (not n.startswith("queries."), n))

    monkeypatch.setattr(_queries, "_read", files.__getitem__)
    monkeypatch.setattr(_queries, "_files", listed)


def test_every_area_file_is_read_and_a_dialect_overrides_its_names(monkeypatch: pytest.MonkeyPatch) -> None:
    _as_files(monkeypatch, FILES)
    assert _queries._texts("sqlite") == {
        "first": "SELECT 1",
        "second": "SELECT 'sqlite'",
        "third": "SELECT 3",
    }
    assert _queries._texts("postgres") == {
        "first": "SELECT 1",
        "second": "SELECT 2",
        "third": "SELECT 'postgres'",
    }


def test_a_name_written_in_two_shared_files_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _as_files(monkeypatch, {**FILES, "sql/index.sql": "-- name: first\nSELECT 'again'"})
    with pytest.raises(ValueError, match=r"sql/index.sql names again .*'first'"):
        _queries._texts("sqlite")


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_the_package_lists_its_files_shared_first_then_the_dialects(dialect: str) -> None:
    shared, own = _queries._files(None), _queries._files(dialect)
    assert shared[0] == "queries.sql" and own[0] == f"queries.{dialect}.sql"
    assert all(name.count(".") == 1 for name in shared) and all(f".{dialect}." in name for name in own)
