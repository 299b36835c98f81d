"""Role expansion, role validation and dependency cycles, against known-good vectors (docs/protocol.md)."""

from __future__ import annotations

import itertools
import random
import time

import pytest

from taskyard.model import roles, scopes


def role_list(spec: dict[str, list[str]]) -> list[roles.Role]:
    return [roles.Role(role_id, tuple(granted)) for role_id, granted in spec.items()]


# roles | input | output, sorted
EXPANSION: list[tuple[dict[str, list[str]], list[str], list[str]]] = [
    (
        {"a": ["A"], "aa": ["AA"], "ab": ["AB"], "a*": ["ASTAR"]},
        ["assume:a*"],
        ["A", "AA", "AB", "ASTAR", "assume:a*"],
    ),
    ({"a": ["A"], "ab": ["AB"], "abc": ["ABC"]}, ["assume:ab*"], ["AB", "ABC", "assume:ab*"]),
    ({"a*": ["ASTAR"], "ab*": ["ABSTAR"]}, ["assume:a"], ["ASTAR", "assume:a"]),
    ({"*": ["STAR"], "a*": ["ASTAR"]}, ["assume:a"], ["ASTAR", "STAR", "assume:a"]),
    ({"a*": ["ASTAR"], "aabc": ["AABC"]}, ["assume:aa*"], ["AABC", "ASTAR", "assume:aa*"]),
    ({"a": ["A"], "b": ["B"], "c": ["C"]}, ["*"], ["*"]),
    ({"a": ["A"], "b": ["B"], "c": ["C"]}, ["a*"], ["A", "B", "C", "a*"]),
    ({"a": ["A"], "b": ["B"], "c": ["C"]}, [":*"], [":*"]),
    (
        {"a*": ["ASTAR"], "a*b": ["ASTARB"], "a*bc": ["ASTARBC"], "ab*": ["ABSTAR"]},
        ["assume:a*b*"],
        ["ASTAR", "ASTARB", "ASTARBC", "assume:a*b*"],
    ),
    ({"a*": ["A<..>"]}, ["assume:abc*"], ["Abc*", "assume:abc*"]),
    ({"a*": ["A<..>X"]}, ["assume:abc"], ["AbcX", "assume:abc"]),
    ({"a*": ["A<..>X"]}, ["assume:abc*"], ["Abc*", "assume:abc*"]),
    ({"abc*": ["ABC<..>DEF"]}, ["assume:a*"], ["ABC*", "assume:a*"]),
    (
        {"group:admins": ["s1", "s2", "assume:group:devs"], "group:devs": ["dev"]},
        ["assume:group:admins", "my"],
        ["assume:group:admins", "assume:group:devs", "dev", "my", "s1", "s2"],
    ),
    (
        {"project-admin:*": ["auth:create-role:project-<..>/*", "secrets:get:project/<..>/*"]},
        ["assume:project-admin:ops*"],
        ["assume:project-admin:ops*", "auth:create-role:project-ops*", "secrets:get:project/ops*"],
    ),
    (
        {"repo:github.com/*": ["secrets:get:github/<..>/repo-secrets"]},
        ["assume:repo:github.com/mozilla/*"],
        ["assume:repo:github.com/mozilla/*", "secrets:get:github/mozilla/*"],
    ),
    ({}, ["a*", "ab", "ac*", "a"], ["a*"]),
]


@pytest.mark.parametrize(("spec", "given", "expected"), EXPANSION)
def test_expansion_vectors(spec: dict[str, list[str]], given: list[str], expected: list[str]) -> None:
    assert roles.expand(given, role_list(spec)) == expected
    role_set = roles.RoleSet(role_list(spec))
    assert role_set.expand(given) == expected
    assert role_set.expand(given) == expected  # from the memo
    assert naive_expand(given, role_list(spec)) == expected


def test_expansion_is_transitive_and_literal_outside_star_roles() -> None:
    spec = {"a": ["assume:b", "x:<..>"], "b*": ["assume:c<..>"], "c": ["C"]}
    assert roles.expand(["assume:a"], role_list(spec)) == ["C", "assume:a", "assume:b", "assume:c", "x:<..>"]


def test_memo_returns_fresh_lists() -> None:
    role_set = roles.RoleSet(role_list({"a": ["A"]}))
    first = role_set.expand(["assume:a"])
    first.append("mutated")
    assert role_set.expand(["assume:a"]) == ["A", "assume:a"]


def test_with_param() -> None:
    assert roles.with_param("A<..>X", "bc") == "AbcX"
    assert roles.with_param("A<..>X", "bc*") == "Abc*"
    assert roles.with_param("A<..>X", "") == "AX"
    assert roles.with_param("AX", "b") == "AX"


def test_matching_reports_roles_and_parameters() -> None:
    role_set = roles.RoleSet(role_list({"a": [], "ab*": [], "abc": [], "a**": []}))
    assert sorted(role_set.matching("assume:abcd"), key=str) == [("assume:ab*", "cd")]
    assert sorted(role_set.matching("assume:a*"), key=str) == [
        ("assume:a", None),
        ("assume:a**", "*"),
        ("assume:ab*", "*"),
        ("assume:abc", None),
    ]
    assert list(role_set.matching("assume:")) == []


def test_many_roles_expand_quickly() -> None:
    count = 3000
    spec = {f"r{i}": [f"assume:r{i + 1}", f"s{i}"] for i in range(count)}
    spec.update({f"p{i}:*": [f"assume:r{i}", f"q{i}:<..>"] for i in range(count)})
    role_set = roles.RoleSet(role_list(spec))
    started = time.perf_counter()
    everything = role_set.expand(["assume:p0:x"])
    assert len(everything) == 2 * count + 3  # assume:p0:x, assume:r0..r3000, s*, q0:x
    assert "q0:x" in everything
    assert role_set.expand(["*"]) == ["*"]
    assert len(role_set.expand(["assume:*"])) == 2 * count + 1  # assume:*, q*:*, s*
    assert time.perf_counter() - started < 5


# ---------------------------------------------------------------------------------------------------
# Validation and cycles


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"a*": ["assume:b*<..>"]},
            "parameterized scope 'assume:b*<..>' ends with '*<..>' which implies an ambiguous kleene",
        ),
        ({"a*": ["assume:b<..>c<..>"]}, "parameterized scope 'assume:b<..>c<..>' contains multiple '<..>'"),
    ],
)
def test_invalid_roles(spec: dict[str, list[str]], message: str) -> None:
    (role,) = role_list(spec)
    with pytest.raises(roles.InvalidRole) as caught:
        roles.validate_role(role)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "spec",
    [{"a": ["assume:b*<..>", "x<..>y<..>"]}, {"a*": ["assume:b<..>*", "A<..>X", "plain"]}, {"a*": []}],
)
def test_valid_roles(spec: dict[str, list[str]]) -> None:
    for role in role_list(spec):
        roles.validate_role(role)


@pytest.mark.parametrize(
    ("spec", "cycle"),
    [
        ({"abc": ["assume:abc"]}, ["assume:abc", "assume:abc"]),
        ({"abc": ["assume:ab*"]}, ["assume:abc", "assume:abc"]),
        ({"ab*": ["assume:abc"]}, ["assume:ab*", "assume:ab*"]),
        ({"a*": ["assume:ab<..>"]}, ["assume:a*", "assume:a*"]),
        ({"b*": ["as<..>"]}, ["assume:b*", "assume:b*"]),
        (
            {"a*": ["assume:bstuff<..>x"], "b*": ["assume:a<..>"]},
            ["assume:a*", "assume:b*", "assume:a*"],
        ),
        (
            {"b*": ["assume:cd<..>"], "cde*": ["assume:de<..>x"], "d*": ["assume:bx"]},
            ["assume:b*", "assume:cde*", "assume:d*", "assume:b*"],
        ),
        (
            {"x": ["assume:a"], "a": ["assume:b"], "b": ["assume:c"], "c": ["assume:a"]},
            ["assume:a", "assume:b", "assume:c", "assume:a"],
        ),
    ],
)
def test_cycles(spec: dict[str, list[str]], cycle: list[str]) -> None:
    assert roles.find_cycle(role_list(spec)) == cycle
    assert roles.find_cycle(roles.RoleSet(role_list(spec))) == cycle


@pytest.mark.parametrize(
    "spec",
    [
        {"a*": ["assume:b<..>*"]},
        {"bb*": ["assume:cd<..>"], "cde*": ["assume:de<..>x"], "d*": ["assume:b"]},
        {"a": ["assume:b"], "b": ["assume:c"], "c": []},
        {"a": ["assume:a<..>"]},  # literal outside `*` roles: `assume:a<..>` is not `assume:a`
        {},
    ],
)
def test_valid_non_cycles(spec: dict[str, list[str]]) -> None:
    assert roles.find_cycle(role_list(spec)) is None


def test_long_chains_do_not_recurse() -> None:
    count = 5000
    spec = {f"r{i}": [f"assume:r{i + 1}"] for i in range(count)}
    assert roles.find_cycle(role_list(spec)) is None
    spec[f"r{count}"] = ["assume:r0"]
    cycle = roles.find_cycle(role_list(spec))
    assert cycle is not None
    assert len(cycle) == count + 2
    assert cycle[0] == cycle[-1] == "assume:r0"


def test_cycle_message() -> None:
    message = roles.cycle_message(["assume:a", "assume:b", "assume:a"])
    assert message == "Roles may not contain dependency cycles, found: 'assume:a' -> 'assume:b' -> 'assume:a'"


def test_runaway_expansion_stops() -> None:
    spec = {"a*": ["assume:aa<..>"]}  # a cycle find_cycle reports, which would grow forever
    assert roles.find_cycle(role_list(spec)) == ["assume:a*", "assume:a*"]
    with pytest.raises(roles.InvalidRole):
        roles.expand(["assume:ab"], role_list(spec))


# ---------------------------------------------------------------------------------------------------
# A naive transcription of the expansion rule, and random role sets


def naive_grants(scope: str, role: roles.Role) -> list[str]:
    pattern = "assume:" + role.role_id
    if not pattern.endswith("*"):
        return list(role.scopes) if scopes.satisfies([scope], pattern) else []
    stem = pattern[:-1]
    if scope.endswith("*") and stem.startswith(scope[:-1]):
        param = "*"
    elif scope.startswith(stem):
        param = scope[len(stem) :]
    else:
        return []
    return [roles.with_param(s, param) for s in role.scopes]


def naive_expand(given: list[str], role_set: list[roles.Role]) -> list[str]:
    have = set(given)
    while True:
        more = {g for s in have for role in role_set for g in naive_grants(s, role)} - have
        if not more:
            return scopes.normalize(have)
        have |= more


def naive_depends(a: roles.Role, b: roles.Role) -> bool:
    star = a.role_id.endswith("*")
    probes = [roles.with_param(s, "*") if star else s for s in a.scopes]
    return any(naive_grants(probe, roles.Role(b.role_id, ("x",))) for probe in probes)


def naive_has_cycle(role_set: list[roles.Role]) -> bool:
    edges = {a.pattern: {b.pattern for b in role_set if naive_depends(a, b)} for a in role_set}
    reach = {p: set(targets) for p, targets in edges.items()}
    for _ in range(len(reach)):
        for p in reach:
            reach[p] |= {t for q in list(reach[p]) for t in reach[q]}
    return any(p in targets for p, targets in reach.items())


def random_word(rng: random.Random, alphabet: str = "ab*", longest: int = 3) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest)))


def random_scope(rng: random.Random, star_role: bool) -> str:
    head = rng.choice(["assume:", "assume:", "as", "X", ""]) + random_word(rng)
    if star_role and rng.random() < 0.5:
        return head + "<..>" + random_word(rng, "ab", 1) + rng.choice(["", "*"])
    return head + rng.choice(["", "*"])


def random_roles(rng: random.Random) -> list[roles.Role]:
    chosen: dict[str, roles.Role] = {}
    for _ in range(rng.randint(0, 5)):
        role_id = random_word(rng, "ab", 2) + rng.choice(["", "*"])
        granted = tuple(random_scope(rng, role_id.endswith("*")) for _ in range(rng.randint(0, 3)))
        chosen[role_id] = roles.Role(role_id, granted)
    return list(chosen.values())


def random_input(rng: random.Random) -> list[str]:
    pool = ["*", "a*", "assume*", "as*", ":*", "X"]
    return [
        rng.choice(pool) if rng.random() < 0.2 else "assume:" + random_word(rng) + rng.choice(["", "*"])
        for _ in range(rng.randint(0, 3))
    ]


def usable_roles(rng: random.Random) -> list[roles.Role]:
    """Random roles that pass validation, checking find_cycle against the naive definition on the way."""
    while True:
        role_set = random_roles(rng)
        try:
            for role in role_set:
                roles.validate_role(role)
        except roles.InvalidRole:
            continue
        cycle = roles.find_cycle(role_set)
        assert (cycle is not None) == naive_has_cycle(role_set), role_set
        if cycle is None:
            return role_set
        assert cycle[0] == cycle[-1]
        by_pattern = {role.pattern: role for role in role_set}
        for a, b in itertools.pairwise(cycle):
            assert naive_depends(by_pattern[a], by_pattern[b]), (role_set, cycle)


@pytest.mark.parametrize("seed", range(8))
def test_random_role_sets(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        role_set = usable_roles(rng)
        indexed = roles.RoleSet(role_set)
        given, extra = random_input(rng), random_input(rng)
        expanded = indexed.expand(given)
        assert expanded == naive_expand(given, role_set), (role_set, given)
        assert indexed.expand(expanded) == expanded  # idempotent
        assert scopes.satisfies_all(expanded, given)  # includes its input
        assert scopes.satisfies_all(indexed.expand(given + extra), expanded)  # monotone
        assert expanded == scopes.normalize(expanded)


def test_scopes_no_role_applies_to_join_the_memoized_expansion() -> None:
    indexed = roles.RoleSet([roles.Role("anonymous", ("queue:ping",)), roles.Role("worker*", ("w:<..>",))])
    given = ["assume:anonymous", "queue:resolve-task:abc/0", "queue:*"]
    assert indexed.expand(given) == ["assume:anonymous", "queue:*"]
    assert indexed.expand(["assume:anonymous", "x:1"]) == ["assume:anonymous", "queue:ping", "x:1"]
    assert indexed.expand(["x:2"]) == ["x:2"]
    assert indexed.expand(["assume:worker-a", "x:3"]) == ["assume:worker-a", "w:-a", "x:3"]


def test_a_scope_inert_in_one_role_set_expands_in_the_next() -> None:
    # What counts as inert is the role set's own: new roles are a new RoleSet, with its own memo.
    before = roles.RoleSet([roles.Role("anonymous", ())])
    assert before.expand(["assume:new", "assume:anonymous"]) == ["assume:anonymous", "assume:new"]
    after = roles.RoleSet([roles.Role("anonymous", ()), roles.Role("new", ("granted",))])
    assert after.expand(["assume:new", "assume:anonymous"]) == ["assume:anonymous", "assume:new", "granted"]
    assert before.expand(["assume:new", "assume:anonymous"]) == ["assume:anonymous", "assume:new"]
