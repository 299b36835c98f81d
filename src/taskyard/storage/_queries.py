"""Named SQL queries, loaded once from `sql/*.sql` and `migrations/*.sql`.

A query file holds blocks that each start with a line `-- name: <query_name>`. The shared files
(`queries.sql`, and one per service such as `index.sql`, every `sql/<area>.sql`) are read first,
then the dialect's own (`queries.<dialect>.sql`, `<area>.<dialect>.sql`) override names. A name
may appear once among the shared files and once among a dialect's.
Parameters are written `$1, $2 ...` in every dialect, or by name, `:task_id`, in a query that
takes many: loading numbers them (`$1` for the first name to appear), and `parameter_names` says
which name is which, so that a call passes them by keyword and can't misorder them.

A block whose name starts with `_` is a fragment, not a query: another query of the same dialect
(or a dialect's query, of a shared fragment) includes it where it writes `{{_name}}` (two queries
that share a long part say it once).

A line `-- literal: <name>` in a query says that its last parameter, an int, is written into the
text instead of sent (`written_in`): PostgreSQL then caches a plan for each of its values rather
than one plan for all, where the value decides the plan (a LIMIT) and planning afresh each time
would cost more than running.

Where the dialects differ by a word or two, a query is still written once, in a shared file, and
says `{{word}}` (or `{{word(argument)}}`) where the words differ; loading puts each dialect's words
in (`WORDS`, the same table the migrations' `{{BIGSERIAL}}` and `{{NOW_MS}}` come from). A word
that SQLite goes without takes the blanks before it away with it. The words:

- `{{for_update}}`, `{{for_share}}`, `{{for_update_skip_locked}}`, `{{for_update_of(t)}}`,
  `{{for_update_of_skip_locked(t)}}`: PostgreSQL's row lock (`OF t`: of table `t` alone, where
  the others are outer-joined); nothing on SQLite, whose writers are serialised by BEGIN
  IMMEDIATE, and a transaction's reads, taken under that lock, can't be raced.
- `{{in_texts(:p)}}`: `IN` a list of texts, passed as a Python list: PostgreSQL's `= ANY(:p::text[])`
  (asyncpg sends the array), SQLite's `IN (SELECT value FROM json_each(:p))` (its adapter sends a
  list as JSON).
- `{{in_ids(:p)}}`: `IN` a list of integer ids passed as JSON text, in both dialects (asyncpg would
  look bigint[]'s type up on each new connection).
- `{{as_json(x)}}`: a text column read as JSON: `x::json` on PostgreSQL, `x` on SQLite.
- `{{bytewise(x)}}`: `x` compared byte by byte: `x COLLATE "C"` on PostgreSQL, whatever the
  database's collation; `x` on SQLite, whose own collation is that.

A word not in the table, or one given an argument it does not take (or none it needs), fails
loading, naming the query. A query keeps a dialect file of its own only when its shape differs
(another statement, another JSON function), and a `-- differs:` line in it says why;
tests/storage/test_query_words.py keeps near copies out.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*([a-z0-9_]+)\s*$", re.MULTILINE)
_NAMED_PARAMETER = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")  # `:name`, not a `::type` cast
_LITERAL = re.compile(r"^--\s*literal:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_FRAGMENT = re.compile(r"\{\{(_[a-z0-9_]+)\}\}")
_WORD = re.compile(r"([ \t]*)\{\{([A-Za-z][A-Za-z0-9_]*)(?:\(([^(){}]*)\))?\}\}")

WORDS: dict[str, dict[str, str]] = {
    "sqlite": {
        "BIGSERIAL": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "NOW_MS": "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
        "for_update": "",
        "for_share": "",
        "for_update_skip_locked": "",
        "for_update_of": "",
        "for_update_of_skip_locked": "",
        "in_texts": "IN (SELECT value FROM json_each({}))",
        "in_ids": "IN (SELECT value FROM json_each({}))",
        "as_json": "{}",
        "bytewise": "{}",
    },
    "postgres": {
        "BIGSERIAL": "BIGSERIAL PRIMARY KEY",
        "NOW_MS": "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
        "for_update": "FOR UPDATE",
        "for_share": "FOR SHARE",
        "for_update_skip_locked": "FOR UPDATE SKIP LOCKED",
        "for_update_of": "FOR UPDATE OF {}",
        "for_update_of_skip_locked": "FOR UPDATE OF {} SKIP LOCKED",
        "in_texts": "= ANY({}::text[])",
        "in_ids": "= ANY(ARRAY(SELECT json_array_elements_text({}::json)::bigint))",
        "as_json": "{}::json",
        "bytewise": '{} COLLATE "C"',
    },
}
"""Each dialect's words, `{{word}}` in a query or a migration: `{}` is where an argument goes."""


def _parse(text: str) -> dict[str, str]:
    parts = _NAME.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


_DIALECTS = ("sqlite", "postgres")


def _read(path: str) -> str:
    return resources.files("taskyard.storage").joinpath(path).read_text(encoding="utf-8")


def _files(dialect: str | None) -> list[str]:
    """The query files shared by every dialect (None), or `dialect`'s own, in a fixed order."""
    found = []
    for entry in resources.files("taskyard.storage").joinpath("sql").iterdir():
        parts = entry.name.split(".")
        if parts[-1] == "sql" and (parts[1] if len(parts) == 3 else None) == dialect and len(parts) <= 3:
            found.append(entry.name)
    return sorted(found, key=lambda name: (not name.startswith("queries."), name))


def _blocks(dialect: str | None) -> dict[str, str]:
    blocks: dict[str, str] = {}
    for file in _files(dialect):
        parsed = _parse(_read(f"sql/{file}"))
        twice = blocks.keys() & parsed.keys()
        if twice:
            raise ValueError(f"sql/{file} names again what another file names: {sorted(twice)}")
        blocks.update(parsed)
    return blocks


def _texts(dialect: str) -> dict[str, str]:
    if dialect not in _DIALECTS:
        raise ValueError(f"no dialect {dialect}")
    blocks = _blocks(None)
    blocks.update(_blocks(dialect))
    fragments = {name: sql for name, sql in blocks.items() if name.startswith("_")}

    def included(match: re.Match[str]) -> str:
        if match[1] not in fragments:
            raise ValueError(f"no fragment {match[1]} in the {dialect} queries")
        return fragments[match[1]]

    return {
        name: expand(dialect, _FRAGMENT.sub(included, sql), f"query {name}").strip()
        for name, sql in blocks.items()
        if name not in fragments
    }


def expand(dialect: str, text: str, where: str) -> str:
    """`text` with each `{{word}}` and `{{word(argument)}}` replaced by `dialect`'s words."""
    words = WORDS[dialect]

    def replaced(match: re.Match[str]) -> str:
        blanks, word, argument = match[1], match[2], match[3]
        if word not in words:
            raise ValueError(f"{where}: no word {{{{{word}}}}} for {dialect} (storage/_queries.py, WORDS)")
        takes = any("{}" in table.get(word, "") for table in WORDS.values())
        if takes != (argument is not None):
            needs = "takes one argument, {{" + word + "(...)}}" if takes else "takes no argument"
            raise ValueError(f"{where}: the word {word} {needs}")
        put = words[word].replace("{}", (argument or "").strip())
        return blanks + put if put else ""

    return _WORD.sub(replaced, text)


@functools.cache
def _loaded(dialect: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """(name, numbered query, parameter names) of each query: read and numbered once a process."""
    return tuple((name, *_numbered(name, sql)) for name, sql in _texts(dialect).items())


def load(dialect: str) -> dict[str, str]:
    """Every named query for `dialect` ('sqlite' or 'postgres'), its parameters numbered."""
    return {name: sql for name, sql, _ in _loaded(dialect)}


def parameter_names(dialect: str) -> dict[str, tuple[str, ...]]:
    """For each query written with `:name` parameters, their names in the order of `$1, $2 ...`."""
    return {name: names for name, _, names in _loaded(dialect) if names}


def written_in(dialect: str) -> dict[str, int]:
    """For each query with a `-- literal: <name>` line, the index of that parameter: the last."""
    found = {name: _literal_index(name, sql) for name, sql in _texts(dialect).items()}
    return {name: index for name, index in found.items() if index is not None}


def _literal_index(query: str, sql: str) -> int | None:
    match = _LITERAL.search(sql)
    if match is None:
        return None
    order = _numbered(query, sql)[1]
    if not order or order[-1] != match[1]:
        raise ValueError(f"query {query}: only its last parameter can be written in, not {match[1]}")
    return len(order) - 1


def _numbered(query: str, sql: str) -> tuple[str, tuple[str, ...]]:
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    numbered = _NAMED_PARAMETER.sub(number, sql)
    if names and re.search(r"\$[0-9]", sql):
        raise ValueError(f"query {query} mixes $1-style and :name parameters")
    return numbered, tuple(names)


def migrations(dialect: str) -> list[tuple[int, str, list[str]]]:
    """(version, name, statements) for every numbered migration, in order, `{{WORD}}`s put in.

    `0001_name.sql` applies to every dialect; `0002_name.postgres.sql` only to PostgreSQL.
    """
    found = []
    for entry in resources.files("taskyard.storage").joinpath("migrations").iterdir():
        match = re.match(r"^(\d{4})_([a-z0-9_]+)(?:\.(sqlite|postgres))?\.sql$", entry.name)
        if match is None or match.group(3) not in (None, dialect):
            continue
        text = expand(dialect, _strip_comments(entry.read_text(encoding="utf-8")), f"migration {entry.name}")
        statements = [s.strip() for s in text.split(";") if s.strip()]
        found.append((int(match.group(1)), match.group(2), statements))
    return sorted(found)


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
