"""`assume:` chains and cycles (model/roles.py) as properties of random role graphs (hypothesis).

`test_roles.py` checks known vectors and compares random `*` roles with a naive expansion; these
draw roles that assume each other, as a graph, and check the expansion against the graph's own
reachability, and `find_cycle` against its cycles: expansion ends on a cycle, and the role
validation that refuses cycles finds exactly the graphs that have one.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from taskyard.model import roles, scopes
from tests.model.properties import PROPERTIES

SIZE = 6
# Role i assumes role j for each (i, j) in the edges; each role also grants a scope of its own.
edges = st.sets(st.tuples(st.integers(0, SIZE - 1), st.integers(0, SIZE - 1)), max_size=12)
starts = st.sets(st.integers(0, SIZE - 1), max_size=3)


def graph(pairs: set[tuple[int, int]]) -> list[roles.Role]:
    return [
        roles.Role(f"r{i}", (f"own:{i}", *sorted(f"assume:r{j}" for a, j in pairs if a == i)))
        for i in range(SIZE)
    ]


def reachable(pairs: set[tuple[int, int]], start: set[int]) -> set[int]:
    seen, todo = set(start), list(start)
    while todo:
        i = todo.pop()
        for a, j in pairs:
            if a == i and j not in seen:
                seen.add(j)
                todo.append(j)
    return seen


def has_cycle(pairs: set[tuple[int, int]]) -> bool:
    """Whether some role reaches itself again (Kahn: a graph with a cycle never empties)."""
    indegree = {i: sum(1 for _, j in pairs if j == i) for i in range(SIZE)}
    ready = [i for i, d in indegree.items() if d == 0]
    removed = 0
    while ready:
        i = ready.pop()
        removed += 1
        for a, j in pairs:
            if a == i:
                indegree[j] -= 1
                if indegree[j] == 0:
                    ready.append(j)
    return removed < SIZE


@PROPERTIES
@given(pairs=edges, start=starts)
def test_assuming_a_role_grants_everything_it_reaches_cycles_or_not(
    pairs: set[tuple[int, int]], start: set[int]
) -> None:
    given_scopes = [f"assume:r{i}" for i in start] + ["other"]
    reached = reachable(pairs, start)
    want = scopes.normalize(
        [*given_scopes, *(f"assume:r{i}" for i in reached), *(f"own:{i}" for i in reached)]
    )
    role_set = roles.RoleSet(graph(pairs))
    assert role_set.expand(given_scopes) == want
    assert role_set.expand(want) == want  # a fixed point
    assert roles.expand(["assume:r*"], graph(pairs)) == scopes.normalize(
        ["assume:r*", *(f"own:{i}" for i in range(SIZE))]
    )  # a star assumes every role at once, reaching no further


@PROPERTIES
@given(pairs=edges)
def test_find_cycle_finds_a_real_cycle_exactly_when_there_is_one(pairs: set[tuple[int, int]]) -> None:
    cycle = roles.find_cycle(graph(pairs))
    assert (cycle is not None) is has_cycle(pairs)
    if cycle is not None:
        assert cycle[0] == cycle[-1] and len(set(cycle)) == len(cycle) - 1
        steps = [
            (int(a.removeprefix("assume:r")), int(b.removeprefix("assume:r")))
            for a, b in itertools.pairwise(cycle)
        ]
        assert set(steps) <= pairs
        assert "Roles may not contain dependency cycles, found: " in roles.cycle_message(cycle)


@PROPERTIES
@given(param=st.text(alphabet="ab:/-", max_size=6), star=st.booleans())
def test_a_parameter_passes_along_a_chain_of_star_roles(param: str, star: bool) -> None:
    # repo:<x>* assumes project:<x>, which grants secrets:<x>/*; a final `*` cuts at the `<..>`.
    chain = [
        roles.Role("repo:*", ("assume:project:<..>",)),
        roles.Role("project:*", ("secrets:<..>/*", "ping")),
    ]
    asked = param + ("*" if star else "")
    expanded = roles.expand([f"assume:repo:{asked}"], chain)
    if star:
        want = [f"assume:project:{param}*", f"assume:repo:{param}*", "ping", f"secrets:{param}*"]
    else:
        want = [f"assume:project:{param}", f"assume:repo:{param}", "ping", f"secrets:{param}/*"]
    assert expanded == scopes.normalize(want)
    assert roles.find_cycle(chain) is None
