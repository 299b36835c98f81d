"""Every named query the code runs exists in both dialects and is given the arguments it takes.

Queries are called by name, with positional arguments (`tx.fetchrow("get_task", task_id)`) or, for
those written with `:name` parameters, by keyword (`tx.execute("insert_task", task_id=..., ...)`),
so a misspelt name or a missing argument would show only when that line runs. This reads every
such call in `src/` and checks it against the query files, for SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from taskyard.storage import _queries
from taskyard.storage.port import Storage

SRC = Path(__file__).resolve().parents[2] / "src" / "taskyard"
METHODS = {"execute", "executemany", "fetch", "fetchrow", "fetchval", "defer", "defer_many", "defer_checked"}
MANY = {"executemany", "defer_many"}  # their arguments are rows
PLACEHOLDER = re.compile(r"\$(\d+)")


@dataclass(frozen=True)
class QueryCall:
    where: str
    method: str
    name: str
    arguments: int | None  # None: not countable here (starred arguments, or executemany's rows)
    keywords: frozenset[str] = frozenset()


def calls() -> list[QueryCall]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in METHODS or not node.args:
                continue
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            rest = node.args[1:]
            countable = node.func.attr not in MANY and not any(isinstance(a, ast.Starred) for a in rest)
            where = f"{path.relative_to(SRC)}:{node.lineno}"
            if any(k.arg is None for k in node.keywords):
                continue  # `**params`: its names are not countable here
            keywords = frozenset(k.arg for k in node.keywords if k.arg is not None)
            arguments = len(rest) if countable else None
            found.append(QueryCall(where, node.func.attr, first.value, arguments, keywords))
    return found


def takes(sql: str) -> int:
    return max((int(n) for n in PLACEHOLDER.findall(sql)), default=0)


def test_the_code_runs_named_queries() -> None:
    assert len(calls()) > 100  # the reader finds the calls (a broken reader would pass the rest)


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_every_query_called_exists_and_gets_its_arguments(dialect: str) -> None:
    queries = _queries.load(dialect)
    named = _queries.parameter_names(dialect)
    wrong = []
    for call in calls():
        if call.name not in queries:
            if call.name.startswith(("SELECT", "CREATE", "INSERT", "BEGIN", "COMMIT", "ROLLBACK", "PRAGMA")):
                continue  # raw SQL run by an adapter on its own connection
            wrong.append(f"{call.where}: {call.method}({call.name!r}) names no {dialect} query")
            continue
        if call.name in named:
            if call.arguments or call.keywords != set(named[call.name]):
                wrong.append(f"{call.where}: {call.name} takes {sorted(named[call.name])} by keyword")
            continue
        expected = takes(queries[call.name])
        if call.keywords or (call.arguments is not None and call.arguments != expected):
            wrong.append(f"{call.where}: {call.name} takes {expected} positional arguments")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_every_query_is_used(dialect: str) -> None:
    # Some names reach a call through a variable (a resolver's query, the expiry sweep's list), and
    # tests read what they check with queries of their own.
    used = {
        node.value
        for path in [*SRC.rglob("*.py"), *Path(__file__).parent.parent.rglob("*.py")]
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    unused = sorted(set(_queries.load(dialect)) - used)
    assert not unused, f"queries no code runs: {unused}"


def test_the_longest_queries_take_their_arguments_by_name() -> None:
    named = _queries.parameter_names("postgres")
    assert {"insert_task", "update_task_checked", "put_artifact", "upsert_worker"} <= set(named)
    assert named == _queries.parameter_names("sqlite")
    longest = max(takes(sql) for name, sql in _queries.load("postgres").items() if name not in named)
    assert longest <= 5  # a query of more positional arguments is easy to misorder: name them


async def test_a_named_query_refuses_missing_unknown_or_positional_arguments(storage: Storage) -> None:
    for args, params in [
        ((), {"task_id": "a"}),
        ((), {"task_id": "a", "run_id": 0, "task_queue_id": "p/w", "priority": 1, "inserted": 1,
              "deadline": 1, "extra": 1}),
        (("a",), {"run_id": 0}),
    ]:  # fmt: skip
        with pytest.raises(TypeError, match="insert_pending"):
            async with storage.transaction() as tx:
                await tx.execute("insert_pending", *args, **params)
    async with storage.transaction() as tx:
        params = {"task_queue_id": "p/w", "priority": 1, "inserted": 1, "deadline": 10**13}
        assert await tx.execute("insert_pending", run_id=0, task_id="a", **params) == 1
        assert await tx.execute("delete_pending_run", "a", 0) == 1  # the row went in under its key
