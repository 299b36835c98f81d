"""Authorization at the edge: who is calling, with which expanded scopes, and the route's check.

Every caller holds `assume:anonymous` and what it expands to, on top of its own scopes. A
route's scope template is rendered with the call's values and checked by `require()`, which
only `Call.authorize()` calls: before the handler when the path and the route's `scope_body`
give every value, otherwise by the service the handler passes it to (as a `Guard`), with the
fields of the record it loads (a task's schedulerId, a group's). The call pipeline
(`api/calls.py`) refuses to answer for a route, or a page's operation, whose scopes were never
checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from taskyard.model import scopes
from taskyard.model.errors import InsufficientScopes

ANONYMOUS = "assume:anonymous"
_NAME = re.compile(r"<([a-zA-Z][a-zA-Z0-9_]*)>")

Expand = Callable[[Iterable[str]], list[str]]


@dataclass(frozen=True)
class Caller:
    """The authenticated client (None: anonymous) and its scopes, expanded and normalised."""

    client_id: str | None
    scopes: tuple[str, ...]


def caller(client_id: str | None, own_scopes: Iterable[str], expand: Expand) -> Caller:
    return Caller(client_id, tuple(expand([*own_scopes, ANONYMOUS])))


def template_names(template: object) -> set[str]:
    """Every parameter a scope template needs: `<name>`s, and the arrays and flags it iterates."""
    if isinstance(template, str):
        return set(_NAME.findall(template))
    if isinstance(template, Mapping):
        names: set[str] = set()
        for key in ("in", "if"):
            if isinstance(template.get(key), str):
                names.add(template[key])
        for key, value in template.items():
            if key in ("AllOf", "AnyOf"):
                names |= set().union(*(template_names(item) for item in value)) if value else set()
            elif key in ("each", "then", "else"):
                loop_var = template.get("for")
                names |= template_names(value) - ({loop_var} if isinstance(loop_var, str) else set())
        return names
    return set()


def require(who: Caller, template: scopes.Template, params: Mapping[str, object]) -> None:
    """Raise InsufficientScopes unless `who` satisfies `template` rendered with `params`."""
    expression = scopes.render(template, params)
    if expression is None or scopes.satisfies_expression(who.scopes, expression):
        return
    unsatisfied = scopes.remove_given_scopes(who.scopes, expression)
    assert unsatisfied is not None
    raise InsufficientScopes(scopes.format_insufficient(who.client_id, unsatisfied, expression))
