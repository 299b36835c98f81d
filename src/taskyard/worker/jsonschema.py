"""A small JSON Schema checker: only the keywords the worker's payload schema uses.

It lists every problem, not just the first, worded as gojsonschema (generic-worker's validator)
words them, so a task's log reads as it would on generic-worker:
`- onExitStatus.retry.0: Must be greater than or equal to 1`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from taskyard.model import schema

Problem = tuple[str, str]  # (field, what is wrong), as gojsonschema reports it
_IS_TYPE: dict[str, Callable[[object], bool]] = {
    "null": lambda value: value is None,
    "boolean": lambda value: isinstance(value, bool),
    "integer": lambda value: _is_integer(value),
    "number": lambda value: _is_integer(value) or isinstance(value, float),
    "string": lambda value: isinstance(value, str),
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}


def errors(rule: Mapping[str, Any], value: object, path: str) -> Iterator[Problem]:
    """Every way `value` breaks `rule`; a value of the wrong type gets no further checks."""
    expected = rule.get("type")
    if expected is not None and not _IS_TYPE[expected](value):
        yield path, f"Invalid type. Expected: {expected}, given: {_type_of(value)}"
        return
    if isinstance(value, dict):
        yield from _object(rule, value, path)
    for keyword, check in _KEYWORDS.items():
        if keyword in rule:
            yield from check(rule, value, path)


def _child(path: str, key: object) -> str:
    return str(key) if path == "(root)" else f"{path}.{key}"


def _object(rule: Mapping[str, Any], value: Any, path: str) -> Iterator[Problem]:
    declared = rule.get("properties", {})
    for name in rule.get("required", ()):
        if name not in value:
            yield path, f"{name} is required"
    extra = rule.get("additionalProperties", True)
    for name in value:
        if name in declared:
            yield from errors(declared[name], value[name], _child(path, name))
        elif extra is False:
            yield path, f"Additional property {name} is not allowed"
        elif isinstance(extra, Mapping):
            yield from errors(extra, value[name], _child(path, name))


def _min_items(rule: Mapping[str, Any], value: Any, path: str) -> Iterator[Problem]:
    if len(value) < rule["minItems"]:
        yield path, f"Array must have at least {rule['minItems']} items"


def _unique(rule: Mapping[str, Any], value: Any, path: str) -> Iterator[Problem]:
    if not rule["uniqueItems"]:
        return
    seen: dict[str, int] = {}
    for index, item in enumerate(value):
        first = seen.setdefault(json.dumps(item, sort_keys=True, default=repr), index)
        if first != index:
            yield path, f"array items[{first},{index}] must be unique"
            return  # one pair is enough to say the list is not unique


def _items(rule: Mapping[str, Any], value: Any, path: str) -> Iterator[Problem]:
    for index, item in enumerate(value):
        yield from errors(rule["items"], item, _child(path, index))


def _minimum(rule: Mapping[str, Any], value: Any, path: str) -> Iterator[Problem]:
    if value < rule["minimum"]:
        yield path, f"Must be greater than or equal to {rule['minimum']}"


def _enum(rule: Mapping[str, Any], value: Any, path: str) -> Iterator[Problem]:
    if value not in rule["enum"]:
        allowed = ", ".join(json.dumps(option) for option in rule["enum"])
        yield path, f"{path} must be one of the following: {allowed}"


def _format(rule: Mapping[str, Any], value: Any, path: str) -> Iterator[Problem]:
    if rule["format"] == "date-time" and not _is_date_time(value):
        yield path, "Does not match format 'date-time'"


Check = Callable[[Mapping[str, Any], Any, str], Iterator[Problem]]
# The array, number and string keywords SCHEMA uses; `_object` reads the object ones.
_KEYWORDS: dict[str, Check] = {
    "minItems": _min_items,
    "uniqueItems": _unique,
    "items": _items,
    "minimum": _minimum,
    "enum": _enum,
    "format": _format,
}
# Every keyword `_schema_errors` understands; annotations say nothing about validity.
UNDERSTOOD = frozenset(
    {*_KEYWORDS, "type", "properties", "required", "additionalProperties"}
    | {"$schema", "title", "description", "default"}
)


def _is_integer(value: object) -> bool:
    # As in JSON Schema, 5.0 is an integer; booleans are not numbers at all.
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)


def _is_date_time(value: str) -> bool:
    try:
        schema.to_millis(value)
    except (ValueError, OverflowError):
        return False
    return True


def _type_of(value: object) -> str:
    # _IS_TYPE lists "integer" before "number", so 5 is given as an integer.
    return next((name for name, test in _IS_TYPE.items() if test(value)), type(value).__name__)
