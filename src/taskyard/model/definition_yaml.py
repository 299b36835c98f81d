"""Task definitions written in YAML, as the web UI's create form and `taskyard task create` read them.

YAML can say more than JSON, and a task definition is JSON: `load` reads YAML's safe subset with
dates kept as the strings the definition wants, refuses aliases where asked (a small text could
expand to a huge task), and turns every failure, a value its explicit tag cannot read (`!!int abc`, `!!bool
maybe`, `!!timestamp 99999-01-01`) included, into a YamlProblem at its line and column;
`check_json` then refuses what JSON cannot hold.
"""

from __future__ import annotations

import datetime
import math
import re
from typing import Any

import yaml

from taskyard.model.errors import InputError

MAX_DEPTH = 64  # as the API refuses a body nested deeper
MIN_INT, MAX_INT = -(2**63), 2**64 - 1  # the whole numbers a JSON body may hold (orjson's range)
_CORE_TAG = "tag:yaml.org,2002:"
_SURROGATE = re.compile("[\ud800-\udfff]")  # YAML's `"\ud800"` makes one; JSON's UTF-8 cannot
_NOT_UNICODE = "a lone UTF-16 surrogate (such as \\ud800), which is not Unicode text"


class YamlProblem(Exception):
    """Why a text is not YAML we read: `where` (`line L, column C: `, or empty) and `problem`.
    `context` is what the problem is inside of, when that starts on another line."""

    def __init__(self, where: str, problem: str, context: str = "") -> None:
        super().__init__(where + problem)
        self.where, self.problem, self.context = where, problem, context


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            value = super().construct_object(node, deep)
        except (yaml.YAMLError, RecursionError):
            raise
        except Exception as exc:  # PyYAML's constructors raise ValueError, KeyError, IndexError...
            raise yaml.constructor.ConstructorError(
                None, None, f"{_value(node)} is not a valid {_tag(node)} ({_reason(exc)})", node.start_mark
            ) from None
        if isinstance(value, bytes | set | datetime.date):  # what a tag makes and JSON cannot hold
            raise yaml.constructor.ConstructorError(
                None, None, f"a {_tag(node)} is not a JSON value (write it as a string)", node.start_mark
            )
        return value


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _CORE_TAG + "timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _NoAliasLoader(_Loader):
    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not accepted", event.start_mark
            )
        return super().compose_node(parent, index)


def _tag(node: Any) -> str:
    tag = str(node.tag)
    return "!!" + tag.removeprefix(_CORE_TAG) if tag.startswith(_CORE_TAG) else tag


def _value(node: Any) -> str:
    value = node.value if isinstance(node.value, str) else ""
    return f"the value {value[:40]!r}" if value else "the value"


def _reason(exc: Exception) -> str:
    said = str(exc).splitlines()[0][:120] if str(exc) else ""
    if isinstance(exc, ValueError | OverflowError) and said:  # int(), float(), datetime() say why
        return said
    return "not a form that tag reads"


def load(text: str, *, aliases: bool = False) -> object:
    """The value `text` holds; YamlProblem naming the line, the column and the problem if none.
    Aliases (`*name`) only if `aliases`: a server must not expand a small text into a huge one."""
    try:
        return yaml.load(text, Loader=_Loader if aliases else _NoAliasLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None) or ""
        start = getattr(exc, "context_mark", None)
        if not context or start is None or (mark is not None and start.line == mark.line):
            raise YamlProblem(where, problem) from None
        raise YamlProblem(where, problem, f"{context} that starts on line {start.line + 1}") from None
    except RecursionError:
        raise YamlProblem("", f"nested more than {MAX_DEPTH} levels deep, the most accepted") from None


def check_json(value: object, where: str) -> None:
    """InputError naming the field (`where`, then `.key` and `[index]`) for what YAML can say and
    JSON cannot: non-string keys, binary, sets, dates, NaN, numbers past 64 bits, lone surrogates,
    deep nesting."""
    stack: list[tuple[object, str, int]] = [(value, where, 0)]
    while stack:
        item, at, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(f"{where}: nested more than {MAX_DEPTH} levels deep, the most accepted")
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InputError(f"{at}: the key {key!r} must be a string")
                if _SURROGATE.search(key):
                    raise InputError(f"{at}: the key {key!r} holds {_NOT_UNICODE}")
                stack.append((child, f"{at}.{key}", depth + 1))
        elif isinstance(item, list):
            stack.extend((child, f"{at}[{i}]", depth + 1) for i, child in enumerate(item))
        else:
            _check_scalar(item, at)


def _check_scalar(item: object, at: str) -> None:
    if isinstance(item, str):
        if _SURROGATE.search(item):
            raise InputError(f"{at}: holds {_NOT_UNICODE}")
    elif isinstance(item, float) and not math.isfinite(item):
        raise InputError(f"{at}: must be a finite number")
    elif isinstance(item, int) and not isinstance(item, bool) and not MIN_INT <= item <= MAX_INT:
        raise InputError(f"{at}: must be a whole number from {MIN_INT} to {MAX_INT} (64 bits)")
    elif not (item is None or isinstance(item, str | int | float | bool)):
        raise InputError(f"{at}: a {type(item).__name__} is not a JSON value")
