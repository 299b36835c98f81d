"""Dialect words in the query files (`{{for_update}}`, `{{in_texts($1)}}`): a query that differs
between SQLite and PostgreSQL by a word or two is written once, and a dialect file holds only the
queries whose shape differs, each saying why."""

from __future__ import annotations

import difflib
import re

import pytest

from taskyard.storage import _queries

DIALECTS = ("sqlite", "postgres")
SHARED = """-- name: _locked
SELECT * FROM tasks WHERE task_id {{in_texts(:ids)}}
-- name: locked
-- Comments stay.
{{_locked}}
   {{for_update}}
-- name: one_of_many
SELECT * FROM t a LEFT JOIN u b ON b.id = a.id WHERE a.id = $1 {{for_update_of(a)}}
"""


def _as_files(monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    def listed(dialect: str | None) -> list[str]:
        names = [path.removeprefix("sql/") for path in files]
        mine = [n for n in names if (n.split(".")[1] if n.count(".") == 2 else None) == dialect]
        return sorted(mine, key=lambda n: (not n.startswith("queries."), n))

    monkeypatch.setattr(_queries, "_read", files.__getitem__)
    monkeypatch.setattr(_queries, "_files", listed)


def test_each_dialect_gets_its_own_words_and_sqlite_drops_a_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    _as_files(monkeypatch, {"sql/queries.sql": SHARED})
    assert _queries._texts("postgres") == {
        "locked": "-- Comments stay.\nSELECT * FROM tasks WHERE task_id = ANY(:ids::text[])\n   FOR UPDATE",
        "one_of_many": "SELECT * FROM t a LEFT JOIN u b ON b.id = a.id WHERE a.id = $1 FOR UPDATE OF a",
    }
    assert _queries._texts("sqlite") == {
        "locked": "-- Comments stay.\nSELECT * FROM tasks WHERE task_id IN (SELECT value FROM json_each(:ids))",  # noqa: E501
        "one_of_many": "SELECT * FROM t a LEFT JOIN u b ON b.id = a.id WHERE a.id = $1",
    }
    numbered, names = _queries._numbered("locked", _queries._texts("postgres")["locked"])
    assert numbered.endswith("= ANY($1::text[])\n   FOR UPDATE") and names == ("ids",)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT 1 {{for_updat}}", r"query q: no word \{\{for_updat\}\} for sqlite"),
        ("SELECT 1 WHERE a {{in_texts}}", r"query q: the word in_texts takes one argument"),
        ("SELECT 1 {{for_update(t)}}", r"query q: the word for_update takes no argument"),
        ("SELECT 1 {{for_update_of}}", r"query q: the word for_update_of takes one argument"),
    ],
)
def test_an_unknown_word_or_a_wrong_argument_fails_loading(
    monkeypatch: pytest.MonkeyPatch, sql: str, message: str
) -> None:
    _as_files(monkeypatch, {"sql/queries.sql": f"-- name: q\n{sql}"})
    with pytest.raises(ValueError, match=message):
        _queries._texts("sqlite")


def test_the_migrations_take_their_words_from_the_same_table() -> None:
    column = "id {{BIGSERIAL}},"
    assert _queries.expand("sqlite", column, "migration m") == "id INTEGER PRIMARY KEY AUTOINCREMENT,"
    assert _queries.expand("postgres", column, "migration m") == "id BIGSERIAL PRIMARY KEY,"
    with pytest.raises(ValueError, match=r"migration m: no word \{\{SERIAL\}\} for postgres"):
        _queries.expand("postgres", "id {{SERIAL}}", "migration m")
    for dialect in DIALECTS:
        for version, _, statements in _queries.migrations(dialect):
            assert not [s for s in statements if "{{" in s], f"migration {version} keeps a word"


def test_both_dialects_have_every_word() -> None:
    assert set(_queries.WORDS["sqlite"]) == set(_queries.WORDS["postgres"])


def _tokens(text: str) -> list[str]:
    """The statement alone, comments dropped, as words and signs."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return re.findall(r"\w+|[^\w\s]", "\n".join(lines))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_dialect_file_holds_no_near_copy_of_what_the_other_dialect_runs(dialect: str) -> None:
    # What a word can say belongs in the shared file. A dialect's own query, as written, that is
    # 80 % like the other dialect's (its own, or the shared one) is a copy to fold: a row lock or a
    # list's form written out where a word would do, or a query copied to change a line.
    mine = _queries._blocks(dialect)
    theirs = {**_queries._blocks(None), **_queries._blocks("postgres" if dialect == "sqlite" else "sqlite")}
    alike = {}
    for name in mine.keys() & theirs.keys():
        pair = difflib.SequenceMatcher(None, _tokens(mine[name]), _tokens(theirs[name]), autojunk=False)
        ratio = pair.ratio()
        if ratio >= 0.8:
            alike[name] = round(ratio, 2)
    assert not alike, f"{dialect} queries that differ from the other dialect's by a word or two: {alike}"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_dialect_file_says_why_each_of_its_queries_differs(dialect: str) -> None:
    blocks = _queries._blocks(dialect)
    unsaid = [name for name, sql in blocks.items() if not re.search(r"^-- differs: \S", sql, re.M)]
    assert not unsaid, f"{dialect} queries with no `-- differs:` line: {unsaid}"
