"""Scopes, scope expressions and the scope templates of API definitions (docs/protocol.md, Scopes).

A scope is printable ASCII. A held scope `p` satisfies a required scope `r` when they are equal, or
when `p` ends with `*` and `r` starts with `p[:-1]`; a `*` anywhere else is literal. An expression
is a scope, `{"AllOf": [...]}` or `{"AnyOf": [...]}`. A template is an expression with `<param>`
placeholders and `{"for", "in", "each"}` / `{"if", "then"[, "else"]}` forms, rendered once per request.
Role expansion lives in `roles.py`; nothing here expands roles.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeAlias

Expression: TypeAlias = "str | dict[str, list[Expression]]"
# A template as the route tables declare it: an expression with placeholders, `for` and `if` forms.
Template: TypeAlias = "str | Mapping[str, Any]"

_SCOPE_RE = re.compile(r"[\x20-\x7e]*")
_PARAM_RE = re.compile(r"<([a-zA-Z][a-zA-Z0-9_]*)>")
_NAME_RE = re.compile(r"[a-zA-Z][a-zA-Z0-9_]*")
_OPERATORS = ("AllOf", "AnyOf")


class TemplateError(ValueError):
    """A scope template is malformed, or its parameters cannot fill it (a server bug: 500)."""


# ---------------------------------------------------------------------------------------------------
# Validity and satisfaction


def valid_scope(scope: object) -> bool:
    """Whether `scope` is a string of printable ASCII (0x20-0x7E); the empty string is valid."""
    return isinstance(scope, str) and _SCOPE_RE.fullmatch(scope) is not None


class _Held:
    """A held scope set indexed for satisfaction: exact members, and the prefixes of the `p*` ones."""

    def __init__(self, held: Iterable[str]) -> None:
        self.exact = set(held)
        self.prefixes = {scope[:-1] for scope in self.exact if scope.endswith("*")}
        self.lengths = sorted({len(prefix) for prefix in self.prefixes})

    def satisfies(self, required: str) -> bool:
        if required in self.exact:
            return True
        for length in self.lengths:
            if length > len(required):
                return False
            if required[:length] in self.prefixes:
                return True
        return False


def _index(held: Iterable[str]) -> _Held:
    """`held` indexed; a tuple (a caller's expanded scopes, an issuer's) is indexed once."""
    return _indexed_tuple(held) if isinstance(held, tuple) else _Held(held)


@functools.lru_cache(maxsize=1024)
def _indexed_tuple(held: tuple[str, ...]) -> _Held:
    return _Held(held)


def satisfies(held: Iterable[str], required: str) -> bool:
    """Whether some scope of `held` satisfies the scope `required` (no role expansion)."""
    return any(
        scope == required or (scope.endswith("*") and required.startswith(scope[:-1])) for scope in held
    )


def satisfies_all(held: Iterable[str], required: Iterable[str]) -> bool:
    """Whether `held` satisfies every scope of `required`."""
    index = _index(held)
    return all(index.satisfies(scope) for scope in required)


# ---------------------------------------------------------------------------------------------------
# Expressions


def _operator(expr: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """The one key (`AllOf` or `AnyOf`) of a compound expression and its list."""
    if len(expr) == 1:
        ((key, value),) = expr.items()
        if key in _OPERATORS and isinstance(value, list):
            return key, value
    raise ValueError(f"a scope expression must be a scope or {{'AllOf'|'AnyOf': [...]}}, not {expr!r}")


def validate_expression(expr: object) -> None:
    """Raise ValueError unless `expr` is a valid scope expression (valid scopes, one known key)."""
    if isinstance(expr, str):
        if not valid_scope(expr):
            raise ValueError(f"scope {expr!r} must be printable ASCII")
        return
    if not isinstance(expr, Mapping):
        raise ValueError(f"a scope expression must be a string or an object, not {expr!r}")
    for item in _operator(expr)[1]:
        validate_expression(item)


def satisfies_expression(held: Iterable[str], expr: Expression) -> bool:
    """Whether `held` satisfies `expr`: `AllOf: []` always does, `AnyOf: []` never."""
    return _satisfied(_index(held), expr)


def _satisfied(held: _Held, expr: Expression) -> bool:
    if isinstance(expr, str):
        return held.satisfies(expr)
    key, items = _operator(expr)
    if key == "AllOf":
        return all(_satisfied(held, item) for item in items)
    return any(_satisfied(held, item) for item in items)


def scopes_satisfying(held: Iterable[str], expr: Expression) -> list[str] | None:
    """The required scopes `held` used to satisfy `expr` (all satisfied AnyOf branches), normalized.

    None when `held` does not satisfy `expr`.
    """
    used: list[str] = []
    if not _collect(_index(held), expr, used):
        return None
    return normalize(used)


def _collect(held: _Held, expr: Expression, used: list[str]) -> bool:
    """Evaluate `expr`, appending the scopes used; a failing branch leaves `used` as it was."""
    if isinstance(expr, str):
        if held.satisfies(expr):
            used.append(expr)
            return True
        return False
    key, items = _operator(expr)
    start = len(used)
    if key == "AllOf":
        found = all(_collect(held, item, used) for item in items)
    else:
        found = False
        for item in items:  # every branch, not just the first that holds
            found = _collect(held, item, used) or found
    if not found:
        del used[start:]
    return found


def remove_given_scopes(held: Iterable[str], expr: Expression) -> Expression | None:
    """What of `expr` is left unsatisfied by `held` (the 403's `unsatisfied`); None when nothing is."""
    return _simplify(_index(held), expr)


def _simplify(held: _Held, expr: Expression) -> Expression | None:
    if isinstance(expr, str):
        return None if held.satisfies(expr) else expr
    key, items = _operator(expr)
    rest = [_simplify(held, item) for item in items]
    if key == "AllOf":
        kept = [item for item in rest if item is not None]
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else {"AllOf": kept}
    if any(item is None for item in rest):
        return None
    left = [item for item in rest if item is not None]  # all of them; this narrows the type
    return left[0] if len(left) == 1 else {"AnyOf": left}


# ---------------------------------------------------------------------------------------------------
# Templates


def render(template: Template, params: Mapping[str, object]) -> Expression | None:
    """Fill a scope template from `params`; None when an `if` at the top makes the call public.

    `<name>` takes a string or integer; `for` walks an array parameter; `if` takes a real boolean.
    Substitution is one pass: a value containing `<x>` stays literal. Raises TemplateError.
    """
    if isinstance(template, str):
        return _fill(template, params)
    if not isinstance(template, Mapping):
        raise TemplateError(f"a scope template must be a string or an object, not {template!r}")
    if "if" in template:
        chosen = _choose(template, params)
        return None if chosen is None else render(chosen, params)
    key, items = _template_operator(template)
    return {key: list(_render_items(items, params))}


def _fill(text: str, params: Mapping[str, object]) -> str:
    pieces = _pieces(text)
    if len(pieces) == 1:
        return text  # no placeholder
    # Literal text at the even places, parameter names at the odd ones.
    return "".join(piece if i % 2 == 0 else _value(params, piece) for i, piece in enumerate(pieces))


@functools.lru_cache(maxsize=1024)
def _pieces(text: str) -> tuple[str, ...]:
    """`text` split around its `<name>` placeholders: literal, name, literal, ..., literal. The
    templates are the route tables' own strings, so each is split once."""
    return tuple(_PARAM_RE.split(text))


def _value(params: Mapping[str, object], name: str) -> str:
    if name not in params:
        raise TemplateError(f"scope template parameter '{name}' is missing")
    value = params[name]
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TemplateError(
            f"scope template parameter '{name}' must be a string or an integer, not {type(value).__name__}"
        )
    return str(value)


def _template_operator(template: Mapping[str, Any]) -> tuple[str, list[Any]]:
    try:
        return _operator(template)
    except ValueError as exc:
        raise TemplateError(f"not a scope template: {template!r}") from exc


def _render_items(items: list[Any], params: Mapping[str, object]) -> Iterator[Expression]:
    """The rendered members of an AllOf/AnyOf list: `for` spreads, a false `if` drops out."""
    for item in items:
        if isinstance(item, str):  # the usual item, without the Mapping check
            yield _fill(item, params)
            continue
        if isinstance(item, Mapping) and "for" in item:
            yield from _render_for(item, params)
            continue
        rendered = render(item, params)
        if rendered is not None:
            yield rendered


def _render_for(item: Mapping[str, Any], params: Mapping[str, object]) -> Iterator[str]:
    if set(item) != {"for", "in", "each"}:
        raise TemplateError(f"a 'for' template has exactly the keys 'for', 'in' and 'each': {item!r}")
    var, source, each = item["for"], item["in"], item["each"]
    if not _is_name(var) or not _is_name(source) or not isinstance(each, str):
        raise TemplateError(f"a 'for' template needs two parameter names and an 'each' string: {item!r}")
    values = params.get(source)
    if not isinstance(values, list | tuple):
        raise TemplateError(f"scope template parameter '{source}' must be an array")
    nested = dict(params)
    for value in values:
        nested[var] = value
        yield _fill(each, nested)


def _choose(item: Mapping[str, Any], params: Mapping[str, object]) -> Template | None:
    """The branch of an `if` template its boolean parameter picks; None for false without `else`."""
    if set(item) - {"else"} != {"if", "then"} or not _is_name(item["if"]):
        raise TemplateError(f"an 'if' template needs 'if' (a parameter name), 'then', maybe 'else': {item!r}")
    name: str = item["if"]
    value = params.get(name)
    if not isinstance(value, bool):
        raise TemplateError(f"scope template parameter '{name}' must be a boolean")
    return item["then"] if value else item.get("else")


def _is_name(value: object) -> bool:
    return isinstance(value, str) and _NAME_RE.fullmatch(value) is not None


# ---------------------------------------------------------------------------------------------------
# Sort, normalize, merge


def scope_sort_key(scope: str) -> tuple[str, int]:
    """Sort `p*` just before `p`, in ordinal order: `*`, ``, `**`, `aaa*`, `aaa`, `aaa**`."""
    if scope.endswith("*"):
        return scope[:-1], 0
    return scope, 1


def normalize(scopes: Iterable[str]) -> list[str]:
    """The sorted scopes, without duplicates and without those a `p*` among them already covers."""
    kept: list[str] = []
    for scope in sorted(set(scopes), key=scope_sort_key):
        if kept:
            last = kept[-1]
            # Sorting puts `p*` first among the scopes starting with `p`, so the last kept one suffices.
            if last.endswith("*") and scope.startswith(last[:-1]):
                continue
        kept.append(scope)
    return kept


def merge(a: Iterable[str], b: Iterable[str]) -> list[str]:
    """The normalized union of two scope sets."""
    return normalize([*a, *b])


# ---------------------------------------------------------------------------------------------------
# The 403 message


def _show(expr: Expression) -> str:
    return expr if isinstance(expr, str) else json.dumps(expr, indent=2)


def format_insufficient(client_id: str | None, unsatisfied: Expression, required: Expression) -> str:
    """The message of a 403 InsufficientScopes, before the common `---` footer every error gets.

    `client_id` None is an anonymous caller, whose message names only the required expression.
    """
    needs = f"```\n{_show(required)}\n```"
    if client_id is None:
        return (
            "This request requires Taskcluster credentials that satisfy the following scope expression:\n\n"
            + needs
        )
    return (
        f"Client ID {client_id} does not have sufficient scopes and is missing the following scopes:\n\n"
        f"```\n{_show(unsatisfied)}\n```\n\n"
        f"This request requires the client to satisfy the following scope expression:\n\n{needs}"
    )
