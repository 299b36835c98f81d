"""Binding patterns: AMQP's topic rules, checked before anything binds or subscribes."""

from __future__ import annotations

import pytest

from taskyard.events.memory import MemoryBus
from taskyard.events.port import BadPattern, check_pattern


@pytest.mark.parametrize(
    "pattern",
    ["#", "*", "primary.#", "*.*.wg.w1.#", "primary.*.*.*.*.prov.wt.#", "a.b-c_d.*.#", "route.index.my.#"],
)
def test_patterns_that_follow_the_rules_pass_unchanged(pattern: str) -> None:
    assert check_pattern(pattern) == pattern


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("", "it is empty; `#` matches every routing key"),
        ("a..b", "word 2 is empty"),
        (".a", "word 1 is empty"),
        ("a.", "word 2 is empty"),
        ("primary.*.*.", "word 4 is empty"),
        ("a.b*", "word 2 ('b*') mixes a wildcard with other characters"),
        ("#a.b", "word 1 ('#a') mixes a wildcard with other characters"),
        ("a.**", "word 2 ('**') mixes a wildcard with other characters"),
        ("a.\tb", "word 2 holds a control character"),
        ("a." * 200 + "b", "it is longer than 255 bytes"),
    ],
)
def test_a_pattern_that_breaks_them_is_refused_naming_the_word(pattern: str, problem: str) -> None:
    with pytest.raises(BadPattern) as refused:
        check_pattern(pattern)
    assert refused.value.message == (
        f"binding pattern {pattern!r} is not valid: {problem} "
        "(words are separated by single dots; `*` stands for one word and `#` for any number)"
    )


async def test_the_in_process_bus_refuses_a_bad_pattern_and_goes_on() -> None:
    bus = MemoryBus()
    with pytest.raises(BadPattern):
        bus.subscribe("exchange/taskcluster-queue/v1/task-pending", "primary..#", print)
    assert bus._subscriptions == []
    bus.subscribe("exchange/taskcluster-queue/v1/task-pending", "primary.#", print)
    assert len(bus._subscriptions) == 1
    await bus.close()
