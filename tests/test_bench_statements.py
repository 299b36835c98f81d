"""bench/statements.py without a database: how it names the statements `pg_stat_statements` shows."""

from __future__ import annotations

import pytest
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
    assert statements.label("NOTIFY task_pending, $1", names) == "NOTIFY task_pending"


def test_a_notify_is_named_by_its_channel_and_runs_are_compared_by_counts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    names = statements.query_names()
    assert statements.label("NOTIFY events_published, E'12 index'", names) == "NOTIFY events_published"
    row = {"calls": 2, "plans": 0, "exec_ms": 0.5, "plan_ms": 0.0, "wal_bytes": 0}
    rows = [
        {**row, "query": "NOTIFY events_published, E'12'"},
        {**row, "query": "NOTIFY events_published, E'13 notify'"},
        {**row, "query": "CREATE TABLE t (x INTEGER)"},  # a migration's: left out
    ]
    summed = statements.by_label(rows, names)
    assert [(r["query"], r["calls"], r["exec_ms"]) for r in summed] == [("NOTIFY events_published", 4, 1.0)]
    old = statements.per_lifecycle(summed, 2)
    new = {**old, "record_signed_request (deferred)": {"calls": 3.0, "plans": 0.0, "wal_bytes": 260.0}}
    statements.compare([("old", old), ("new", new)])
    printed = capsys.readouterr().out
    assert "record_signed_request (deferred)" in printed  # differs: shown
    assert "NOTIFY events_published" not in printed  # the same in both: left out
    assert printed.splitlines()[-3].split()[-6:] == ["2.00", "0.00p", "0B", "5.00", "0.00p", "260B"]
