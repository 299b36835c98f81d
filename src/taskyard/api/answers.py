"""The schema of each route's answer, for the OpenAPI documents: the route's `output` where it has
one, else derived from its handler's return annotation — the TypedDicts the code is already
type-checked against — so the documented answers are not written a second time by hand.

A TypedDict becomes an object with its keys and its required keys (extra keys allowed); `str`,
`int`, `float`, `bool` and `None` their JSON types; `list[X]` an array; `dict[str, X]` an object of
X; a union `anyOf`; `Literal` an `enum`. Anything else (a `Reply`, a stream, `Any`) documents the
answer as any JSON value.
"""

from __future__ import annotations

import functools
import sys
import types
import typing
from typing import Any

from taskyard.api.routing import Route

Schema = dict[str, object]
_SCALARS: dict[object, Schema] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    type(None): {"type": "null"},
}
_MARKERS = (typing.NotRequired, typing.Required)


def answer_schema(route: Route) -> Schema:
    """The schema of `route`'s 200 answer ({}: any JSON value)."""
    if route.output is not None:
        return route.output.json()
    annotations = getattr(route.handler, "__annotations__", {})
    if "return" not in annotations:
        return {}
    return json_schema(_resolve(annotations["return"], route.handler.__module__))


def json_schema(tp: Any) -> Schema:
    """`tp` as a JSON schema ({} where it says nothing checkable)."""
    if tp in _SCALARS:
        return dict(_SCALARS[tp])
    if typing.is_typeddict(tp):
        return _object(tp)
    value = getattr(tp, "__value__", None)  # a `type X = ...` alias
    if value is not None:
        return json_schema(value)
    supertype = getattr(tp, "__supertype__", None)  # a NewType
    if supertype is not None:
        return json_schema(supertype)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple) or origin is typing.get_origin(typing.Sequence[int]):
        return {"type": "array", "items": json_schema(args[0])} if args else {"type": "array"}
    if origin is dict or origin is typing.get_origin(typing.Mapping[str, int]):
        return (
            {"type": "object", "additionalProperties": json_schema(args[1])} if args else {"type": "object"}
        )
    if origin in (typing.Union, types.UnionType):
        choices = [json_schema(a) for a in args]
        return {} if {} in choices else {"anyOf": choices}
    if origin is typing.Literal:
        return {"enum": list(args)}
    return {}


def _resolve(annotation: object, module: str) -> Any:
    """An annotation (a string, under `from __future__ import annotations`) as the type it names:
    evaluated in `module`, then (a key a TypedDict inherits was annotated in its base's module) in
    taskyard's other modules; Any where only a type checker could resolve it."""
    if isinstance(annotation, typing.ForwardRef):  # how a TypedDict keeps its annotations
        annotation = annotation.__forward_arg__
    if not isinstance(annotation, str):
        return annotation
    return _evaluate(annotation, module)


@functools.cache
def _evaluate(text: str, module: str) -> Any:
    names = [module, *sorted(m for m in sys.modules if m.startswith("taskyard.") and m != module)]
    for name in names:
        try:  # the module's own annotation text, never outside input
            return eval(text, {**vars(typing), **vars(sys.modules[name])})
        except Exception:  # a name this module lacks: the next
            continue
    return Any


def _object(tp: Any) -> Schema:
    """A TypedDict as an object schema. Its required keys are worked out here: with string
    annotations, Python's own `__required_keys__` can't see a `NotRequired[...]`."""
    properties: Schema = {}
    required = []
    for key, annotation in tp.__annotations__.items():
        resolved = _resolve(annotation, tp.__module__)
        marker = typing.get_origin(resolved)
        if marker in _MARKERS:
            resolved = typing.get_args(resolved)[0]
        if marker is typing.Required or (marker is not typing.NotRequired and tp.__total__):
            required.append(key)
        properties[key] = json_schema(resolved)
    found: Schema = {"type": "object", "properties": properties}
    if required:
        found["required"] = sorted(required)
    return found
