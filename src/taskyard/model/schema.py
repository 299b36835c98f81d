"""A tiny declarative validator for JSON request bodies.

Build a schema from the constructors below and check a decoded body with `validate`:

    rule = obj({"name": string(max_length=255)}, required=["name"], additional=False)
    validate(rule, body)  # raises InputValidationError("body.name is required")

Only the first problem is reported, and always the same one for the same value: an object's
unknown properties (sorted), then its missing required properties, then its properties in the
order they were declared. Messages never quote the offending value, so a huge number or string
can't blow up the message.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NoReturn, TypeGuard

from taskyard.model import dates, errors
from taskyard.model.types import Millis

_ARTICLED = {
    "null": "null",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
}
_SIMPLE_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")
_KEY_SHOWN = 64
# RFC 3339 as JSON Schema's `date-time` format reads it; dates.parse_iso then checks the calendar.
_DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}(:?[0-9]{2})?)"
)


class Schema:
    """A rule for one JSON value."""

    def check(self, value: object, path: str) -> None:
        """Raise InputValidationError naming `path` if `value` breaks the rule."""
        raise NotImplementedError

    def json(self) -> dict[str, object]:
        """The rule as JSON Schema (draft 2020-12, which OpenAPI 3.1 uses)."""
        raise NotImplementedError


def validate(schema: Schema, value: object, *, where: str = "body") -> None:
    """Check `value` against `schema`; the error message starts with the field's path, like `body.a.b`."""
    try:
        schema.check(value, where)
    except RecursionError:
        _fail(where, "is nested too deeply")


# Constructors -------------------------------------------------------------------------------


def string(
    *,
    pattern: str | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
    nul: bool = False,
) -> Schema:
    """A string, optionally matching a (JavaScript-style, usually anchored) regular expression.

    No NUL character unless `nul`: PostgreSQL's text cannot hold one (TaskCluster's jsonb refuses
    it too), so a NUL in a field would be stored on SQLite and be a database error on PostgreSQL.
    """
    return _String(pattern, _compile(pattern), min_length, max_length, nul)


def integer(*, minimum: int | None = None, maximum: int | None = None) -> Schema:
    """A whole number. Booleans are not integers; an integral float like 5.0 is, as in JSON Schema."""
    return _Integer(minimum, maximum)


def boolean() -> Schema:
    """`true` or `false`."""
    return _Boolean()


def enum(*values: object) -> Schema:
    """One of the given values (compared as JSON: `true` is not `1`)."""
    return _Enum(values)


def array(
    items: Schema | None = None,
    *,
    min_items: int | None = None,
    max_items: int | None = None,
    unique: bool = False,
) -> Schema:
    """A list whose every item matches `items` (anything, if None)."""
    return _Array(items, min_items, max_items, unique)


def obj(
    properties: Mapping[str, Schema] | None = None,
    *,
    required: Sequence[str] = (),
    additional: bool | Schema = True,
) -> Schema:
    """An object. `additional` is True (anything), False (refused), or the schema of undeclared values."""
    return _Object(dict(properties or {}), tuple(required), additional)


def any_object() -> Schema:
    """Any object, contents unchecked."""
    return obj()


def anything() -> Schema:
    """Any JSON value."""
    return _Anything()


def number() -> Schema:
    """Any finite number, integral or not."""
    return _Number()


def any_of(*choices: Schema) -> Schema:
    """A value matching at least one of `choices`."""
    return _AnyOf(choices)


def null() -> Schema:
    """JSON's `null`."""
    return _Enum((None,))


def date_time() -> Schema:
    """A string holding an RFC 3339 date-time with a timezone, like `2024-01-31T12:00:00.000Z`."""
    return _DateTime()


@functools.lru_cache(maxsize=4096)  # a createTask reads each of its dates more than once
def to_millis(value: str) -> Millis:
    """The instant named by a string that `date_time()` accepts; raises ValueError for others.

    dates.OutOfRange (a ValueError) for a well-formed date-time a client may not send: one
    outside dates.EARLIEST to dates.LATEST.
    """
    if _DATE_TIME.fullmatch(value) is None:
        raise ValueError(f"not an RFC 3339 date-time: {value[:40]!r}")
    return dates.check_range(dates.parse_iso(value[:10] + "T" + value[11:]))


# Rules --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _String(Schema):
    pattern: str | None
    compiled: re.Pattern[str] | None
    min_length: int | None
    max_length: int | None
    nul: bool

    def check(self, value: object, path: str) -> None:
        if not isinstance(value, str):
            _fail(path, _wrong_type("string", value))
        if not self.nul and "\x00" in value:
            _fail(path, "must not contain a NUL character (\\u0000)")
        if self.min_length is not None and len(value) < self.min_length:
            _fail(path, f"must be at least {_count(self.min_length, 'character')}; it has {len(value)}")
        if self.max_length is not None and len(value) > self.max_length:
            _fail(path, f"must be at most {_count(self.max_length, 'character')}; it has {len(value)}")
        if self.compiled is not None and self.compiled.search(value) is None:
            _fail(path, f"must match {self.pattern}")

    def json(self) -> dict[str, object]:
        pattern = self.pattern if self.pattern is not None or self.nul else r"^[^\u0000]*$"
        rule = {"pattern": pattern, "minLength": self.min_length, "maxLength": self.max_length}
        return {"type": "string", **_given(rule)}


@dataclass(frozen=True)
class _Integer(Schema):
    minimum: int | None
    maximum: int | None

    def check(self, value: object, path: str) -> None:
        if not _is_integer(value):
            _fail(path, _wrong_type("integer", value))
        if self.minimum is not None and value < self.minimum:
            _fail(path, f"must be at least {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            _fail(path, f"must be at most {self.maximum}")

    def json(self) -> dict[str, object]:
        return {"type": "integer", **_given({"minimum": self.minimum, "maximum": self.maximum})}


@dataclass(frozen=True)
class _Number(Schema):
    def check(self, value: object, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            _fail(path, _wrong_type("number", value))
        if not math.isfinite(value):
            _fail(path, "must be a finite number")

    def json(self) -> dict[str, object]:
        return {"type": "number"}


@dataclass(frozen=True)
class _Anything(Schema):
    def check(self, value: object, path: str) -> None:
        pass

    def json(self) -> dict[str, object]:
        return {}


@dataclass(frozen=True)
class _AnyOf(Schema):
    choices: tuple[Schema, ...]

    def check(self, value: object, path: str) -> None:
        problems: list[str] = []
        for choice in self.choices:
            try:
                choice.check(value, path)
            except errors.InputValidationError as exc:
                problems.append(exc.message)
            else:
                return
        _fail(path, "must match one of its forms: " + "; ".join(problems))

    def json(self) -> dict[str, object]:
        return {"anyOf": [choice.json() for choice in self.choices]}


@dataclass(frozen=True)
class _Boolean(Schema):
    def check(self, value: object, path: str) -> None:
        if not isinstance(value, bool):
            _fail(path, _wrong_type("boolean", value))

    def json(self) -> dict[str, object]:
        return {"type": "boolean"}


@dataclass(frozen=True)
class _Enum(Schema):
    values: tuple[object, ...]
    frozen: tuple[object, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "frozen", tuple(_freeze(allowed) for allowed in self.values))

    def check(self, value: object, path: str) -> None:
        if isinstance(value, str) and ("string", value) in self.frozen:
            return  # the common case, without freezing the value
        key = _freeze(value)
        if not any(allowed == key for allowed in self.frozen):
            _fail(path, "must be one of: " + ", ".join(_show(v) for v in self.values))

    def json(self) -> dict[str, object]:
        return {"enum": list(self.values)}


@dataclass(frozen=True)
class _Array(Schema):
    items: Schema | None
    min_items: int | None
    max_items: int | None
    unique: bool

    def check(self, value: object, path: str) -> None:
        if not isinstance(value, list):
            _fail(path, _wrong_type("array", value))
        if self.min_items is not None and len(value) < self.min_items:
            _fail(path, f"must have at least {_count(self.min_items, 'item')}; it has {len(value)}")
        if self.max_items is not None and len(value) > self.max_items:
            _fail(path, f"must have at most {_count(self.max_items, 'item')}; it has {len(value)}")
        if self.items is not None:
            problems: list[str] = []
            for index, item in enumerate(value):
                _attempt(problems, self.items, item, f"{path}[{index}]")
            _raise_any(path, problems)
        if self.unique:
            _check_unique(value, path)

    def json(self) -> dict[str, object]:
        rule = {
            "items": None if self.items is None else self.items.json(),
            "minItems": self.min_items,
            "maxItems": self.max_items,
            "uniqueItems": self.unique or None,
        }
        return {"type": "array", **_given(rule)}


@dataclass(frozen=True)
class _Object(Schema):
    properties: dict[str, Schema]
    required: tuple[str, ...]
    additional: bool | Schema

    def check(self, value: object, path: str) -> None:
        if not isinstance(value, dict):
            _fail(path, _wrong_type("object", value))
        properties = self.properties
        extra = [key for key in value if key not in properties]  # every key that is not a string too
        if extra:
            if not all(isinstance(key, str) for key in extra):
                _fail(path, "must have only string keys")
            extra.sort()
        # Every problem at once, so that a client fixes its body in one go.
        problems: list[str] = []
        if self.additional is False:
            problems += [f"{_child(path, key)} is not allowed (unknown property)" for key in extra]
        problems += [f"{_child(path, name)} is required" for name in self.required if name not in value]
        for name, rule in properties.items():
            if name in value:
                _attempt(problems, rule, value[name], _child(path, name))
        if isinstance(self.additional, Schema):
            for name in extra:
                _attempt(problems, self.additional, value[name], _child(path, name))
        _raise_any(path, problems)

    def json(self) -> dict[str, object]:
        additional = self.additional.json() if isinstance(self.additional, Schema) else self.additional
        rule = {
            "properties": {name: p.json() for name, p in self.properties.items()} or None,
            "required": list(self.required) or None,
            "additionalProperties": None if additional is True else additional,
        }
        return {"type": "object", **_given(rule)}


@dataclass(frozen=True)
class _DateTime(Schema):
    def check(self, value: object, path: str) -> None:
        if not isinstance(value, str):
            _fail(path, _wrong_type("string", value))
        try:
            to_millis(value)
        except dates.OutOfRange:
            _fail(path, dates.RANGE_RULE)
        except (ValueError, OverflowError):
            _fail(path, "must be a date-time with a timezone, like 2024-01-31T12:00:00.000Z")

    def json(self) -> dict[str, object]:
        return {"type": "string", "format": "date-time"}


# Helpers ------------------------------------------------------------------------------------


def _given(rule: Mapping[str, object]) -> dict[str, object]:
    """`rule` without the keywords left unset."""
    return {key: value for key, value in rule.items() if value is not None}


def _fail(path: str, rule: str) -> NoReturn:
    raise errors.InputValidationError(f"{path} {rule}")


class InvalidFields(errors.InputValidationError):
    """Several fields break their rules: the message lists each, one per line."""

    def __init__(self, path: str, problems: Sequence[str]) -> None:
        shown = list(problems[:MAX_PROBLEMS])
        more = len(problems) - len(shown)
        lines = [f"- {p}" for p in shown] + ([f"- ... and {more} more"] if more else [])
        super().__init__(f"{path} has {len(problems)} problems:\n" + "\n".join(lines))
        self.problems = list(problems)


MAX_PROBLEMS = 50


def _attempt(problems: list[str], rule: Schema, value: object, path: str) -> None:
    """Check `value`, adding what is wrong with it to `problems` instead of raising."""
    try:
        rule.check(value, path)
    except InvalidFields as exc:
        problems += exc.problems
    except errors.InputValidationError as exc:
        problems.append(exc.message)


def _raise_any(path: str, problems: list[str]) -> None:
    if len(problems) == 1:
        raise errors.InputValidationError(problems[0])
    if problems:
        raise InvalidFields(path, problems)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _wrong_type(expected: str, value: object) -> str:
    actual = _json_type(value)
    return f"must be {_ARTICLED[expected]}, not {_ARTICLED.get(actual, actual)}"


def _is_integer(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def _compile(pattern: str | None) -> re.Pattern[str] | None:
    """Compile a JavaScript-style pattern: its final `$` means the very end, not "before a newline"."""
    if pattern is None:
        return None
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


@functools.lru_cache(maxsize=4096)  # mostly the schemas' own property names under a few paths
def _child(path: str, key: str) -> str:
    if _SIMPLE_KEY.fullmatch(key):
        return f"{path}.{key}"
    shown = key if len(key) <= _KEY_SHOWN else key[:_KEY_SHOWN] + "..."
    return f"{path}[{json.dumps(shown)}]"


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def _show(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _check_unique(items: list[object], path: str) -> None:
    seen: dict[object, int] = {}
    for index, item in enumerate(items):
        first = seen.setdefault(_freeze(item), index)
        if first != index:
            _fail(path, f"must not contain duplicates; items {first} and {index} are equal")


def _freeze(value: object) -> object:
    """A hashable key equal for equal JSON values (so `true` differs from `1`, but `1` equals `1.0`)."""
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(_freeze(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _freeze(item)) for key, item in value.items()))
    if isinstance(value, str):
        return ("string", value)
    return ("other", id(value))  # not a JSON value: equal only to itself
