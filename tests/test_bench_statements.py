"""bench/statements.py without a database: how it names the statements `pg_stat_statements` shows."""

from __future__ import annotations

from bench import statements

from taskyard.storage import _queries


def test_statements_are_named_by_their_query() -> None:
    names = statements.query_names()
    queries = _queries.load("postgres")
    # As pg_stat_statements shows them: deferred writes by their PREPARE, constants made parameters.
    deferred = "PREPARE ty_insert_task AS INSERT INTO tasks ..."
    assert statements.label(deferred, names) == "insert_task (deferred)"
    assert statements.label(queries["get_task"], names) == "get_task"
    normalized = queries["take_pending"].replace("LIMIT $5", "LIMIT 1").replace("'", "") + " $6"
    assert statements.label(normalized, names) == "take_pending"
    assert statements.label("NOTIFY task_pending, $1", names) == "NOTIFY task_pending, $1"
