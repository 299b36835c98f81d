"""Every named query the code runs exists in both dialects and is given as many arguments as it takes.

Queries are called by name with positional arguments (`tx.execute("insert_task", a, b, ...)`), so a
misspelt name or a missing argument would show only when that line runs. This reads every such call
in `src/` and checks it against the query files, for SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from taskyard.storage import _queries

SRC = Path(__file__).resolve().parents[2] / "src" / "taskyard"
METHODS = {"execute", "executemany", "fetch", "fetchrow", "fetchval"}
PLACEHOLDER = re.compile(r"\$(\d+)")


@dataclass(frozen=True)
class QueryCall:
    where: str
    method: str
    name: str
    arguments: int | None  # None: not countable here (starred arguments, or executemany's rows)


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
            countable = node.func.attr != "executemany" and not any(isinstance(a, ast.Starred) for a in rest)
            where = f"{path.relative_to(SRC)}:{node.lineno}"
            found.append(QueryCall(where, node.func.attr, first.value, len(rest) if countable else None))
    return found


def takes(sql: str) -> int:
    return max((int(n) for n in PLACEHOLDER.findall(sql)), default=0)


def test_the_code_runs_named_queries() -> None:
    assert len(calls()) > 100  # the reader finds the calls (a broken reader would pass the rest)


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_every_query_called_exists_and_gets_its_arguments(dialect: str) -> None:
    queries = _queries.load(dialect)
    wrong = []
    for call in calls():
        if call.name not in queries:
            if call.name.startswith(("SELECT", "CREATE", "INSERT", "BEGIN", "COMMIT", "ROLLBACK", "PRAGMA")):
                continue  # raw SQL run by an adapter on its own connection
            wrong.append(f"{call.where}: {call.method}({call.name!r}) names no {dialect} query")
            continue
        expected = takes(queries[call.name])
        if call.arguments is not None and call.arguments != expected:
            wrong.append(f"{call.where}: {call.name} takes {expected} arguments, given {call.arguments}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_every_query_is_used(dialect: str) -> None:
    # Some names reach a call through a variable (a resolver's query, the expiry sweep's list).
    used = {
        node.value
        for path in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    unused = sorted(set(_queries.load(dialect)) - used)
    assert not unused, f"queries no code runs: {unused}"
