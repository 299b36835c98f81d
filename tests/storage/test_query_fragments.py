"""Fragments of the query files (`-- name: _part`, included by `{{_part}}`): what two queries
share is written once, and is not a query of its own."""

from __future__ import annotations

import pytest

from taskyard.storage import _queries

SHARED = """-- name: _pick
SELECT :a AS a
-- name: first
{{_pick}} WHERE :b = 1
"""


def test_a_fragment_is_included_where_named_and_is_no_query(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"sql/queries.sql": SHARED, "sql/queries.sqlite.sql": "-- name: second\n{{_pick}}, 2"}
    monkeypatch.setattr(_queries, "_read", files.__getitem__)
    monkeypatch.setattr(
        _queries, "_files", lambda dialect: [f"queries.{dialect}.sql" if dialect else "queries.sql"]
    )
    assert _queries._texts("sqlite") == {
        "first": "SELECT :a AS a WHERE :b = 1",
        "second": "SELECT :a AS a, 2",
    }
    files["sql/queries.sqlite.sql"] = "-- name: second\n{{_missing}}"
    with pytest.raises(ValueError, match="no fragment _missing in the sqlite queries"):
        _queries._texts("sqlite")


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_the_group_join_is_written_once_for_both_of_its_queries(dialect: str) -> None:
    queries = _queries.load(dialect)
    assert not [name for name in queries if name.startswith("_")]
    upsert = "ON CONFLICT (task_group_id) DO UPDATE"
    assert upsert in queries["join_group"] and upsert in queries["join_group_checked"]
