"""Scope satisfaction, expressions and normalization (model/scopes.py) as properties (hypothesis).

The rule (docs/protocol.md, Scopes): a held scope `p` satisfies a required `r` when they are
equal, or `p` ends with `*` and `r` starts with `p[:-1]`; a `*` anywhere else is literal.
`test_scopes.py` checks known vectors; these check the rule itself on random scopes drawn from a
small alphabet, so that prefixes, stars and near misses are common.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from taskyard.model import scopes
from taskyard.model.scopes import Expression
from tests.model.properties import PROPERTIES

scope = st.text(alphabet="ab*", max_size=3)
held_scopes = st.lists(scope, max_size=6)
expressions: st.SearchStrategy[Any] = st.recursive(
    scope,
    lambda inner: st.builds(
        lambda key, items: {key: items}, st.sampled_from(["AllOf", "AnyOf"]), st.lists(inner, max_size=4)
    ),
    max_leaves=12,
)


def grants(p: str, r: str) -> bool:
    """The rule, spelled out for one held scope."""
    return p == r or (p.endswith("*") and r.startswith(p[:-1]))


def satisfied(held: list[str], expr: Any) -> bool:
    """An expression, evaluated by its definition: AllOf needs all, AnyOf one."""
    if isinstance(expr, str):
        return any(grants(p, expr) for p in held)
    ((key, items),) = expr.items()
    results = [satisfied(held, item) for item in items]
    return all(results) if key == "AllOf" else any(results)


def leaves(expr: Any) -> list[str]:
    if isinstance(expr, str):
        return [expr]
    return [leaf for items in expr.values() for item in items for leaf in leaves(item)]


@PROPERTIES
@given(held=held_scopes, required=scope)
def test_every_way_of_asking_agrees_with_the_rule(held: list[str], required: str) -> None:
    expected = any(grants(p, required) for p in held)
    assert scopes.satisfies(held, required) is expected
    assert scopes.satisfies_all(held, [required]) is expected
    assert scopes.satisfies_all(tuple(held), [required]) is expected  # the memoized index
    assert scopes.satisfies_expression(held, required) is expected


@PROPERTIES
@given(held=held_scopes, expr=expressions)
def test_expressions_are_evaluated_by_their_definition(held: list[str], expr: Expression) -> None:
    scopes.validate_expression(expr)
    assert scopes.satisfies_expression(held, expr) is satisfied(held, expr)


@PROPERTIES
@given(held=held_scopes, expr=expressions)
def test_the_scopes_satisfying_an_expression_are_enough_alone(held: list[str], expr: Expression) -> None:
    used = scopes.scopes_satisfying(held, expr)
    assert (used is not None) is satisfied(held, expr)
    if used is not None:
        assert used == scopes.normalize(used)
        assert scopes.satisfies_all(held, used)  # all of them held ...
        assert satisfied(used, expr)  # ... and holding just those would do


@PROPERTIES
@given(held=held_scopes, expr=expressions)
def test_what_is_left_unsatisfied_is_what_is_missing(held: list[str], expr: Expression) -> None:
    left = scopes.remove_given_scopes(held, expr)
    assert (left is None) is satisfied(held, expr)
    if left is not None:
        assert not satisfied(held, left)  # nothing in it is satisfied already ...
        if satisfied(leaves(expr), expr):  # an expression that can be satisfied at all (no `AnyOf: []`)
            assert satisfied(held + leaves(left), expr)  # ... and adding all of it satisfies it
        assert set(leaves(left)) <= set(leaves(expr))


@PROPERTIES
@given(held=held_scopes, more=held_scopes, expr=expressions)
def test_holding_more_never_loses_satisfaction(held: list[str], more: list[str], expr: Expression) -> None:
    if scopes.satisfies_expression(held, expr):
        assert scopes.satisfies_expression(held + more, expr)


@PROPERTIES
@given(held=held_scopes)
def test_normalize_keeps_the_same_power_in_the_fewest_scopes(held: list[str]) -> None:
    normal = scopes.normalize(held)
    assert normal == sorted(set(normal), key=scopes.scope_sort_key)  # sorted, no duplicates
    assert set(normal) <= set(held)
    assert scopes.normalize(normal) == normal
    assert scopes.satisfies_all(normal, held) and scopes.satisfies_all(held, normal)
    for i, a in enumerate(normal):  # none covers another
        assert not any(grants(b, a) for b in normal[:i] + normal[i + 1 :]), (a, normal)


@PROPERTIES
@given(a=held_scopes, b=held_scopes, required=scope)
def test_merge_is_the_normalized_union(a: list[str], b: list[str], required: str) -> None:
    merged = scopes.merge(a, b)
    assert merged == scopes.normalize(a + b) == scopes.merge(b, a)
    assert scopes.satisfies(merged, required) is (
        scopes.satisfies(a, required) or scopes.satisfies(b, required)
    )


def test_sort_puts_a_star_scope_before_the_scopes_it_covers() -> None:
    every = ["".join(letters) for n in range(4) for letters in itertools.product("ab*", repeat=n)]
    for a, b in itertools.product(every, every):
        key_a, key_b = scopes.scope_sort_key(a), scopes.scope_sort_key(b)
        if grants(a, b) and not grants(b, a):  # (`*` and `**` cover each other)
            assert key_a < key_b, (a, b)
        assert (key_a == key_b) is (a == b)
