"""Named SQL queries, loaded once from `sql/*.sql` and `migrations/*.sql`.

A query file holds blocks that each start with a line `-- name: <query_name>`. The shared file
`queries.sql` is read first, then the dialect's own `queries.<dialect>.sql` overrides names.
Parameters are written `$1, $2 ...` in every dialect.
"""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*([a-z0-9_]+)\s*$", re.MULTILINE)


def _parse(text: str) -> dict[str, str]:
    parts = _NAME.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def _read(path: str) -> str:
    return resources.files("taskyard.storage").joinpath(path).read_text(encoding="utf-8")


def load(dialect: str) -> dict[str, str]:
    """Every named query for `dialect` ('sqlite' or 'postgres')."""
    queries = _parse(_read("sql/queries.sql"))
    queries.update(_parse(_read(f"sql/queries.{dialect}.sql")))
    return queries


def migrations(dialect: str, words: dict[str, str]) -> list[tuple[int, str, list[str]]]:
    """(version, name, statements) for every numbered migration, in order.

    `0001_name.sql` applies to every dialect; `0002_name.postgres.sql` only to PostgreSQL.
    """
    found = []
    for entry in resources.files("taskyard.storage").joinpath("migrations").iterdir():
        match = re.match(r"^(\d{4})_([a-z0-9_]+)(?:\.(sqlite|postgres))?\.sql$", entry.name)
        if match is None or match.group(3) not in (None, dialect):
            continue
        text = entry.read_text(encoding="utf-8")
        for word, replacement in words.items():
            text = text.replace("{{" + word + "}}", replacement)
        statements = [s.strip() for s in _strip_comments(text).split(";") if s.strip()]
        found.append((int(match.group(1)), match.group(2), statements))
    return sorted(found)


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
