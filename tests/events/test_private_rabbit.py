"""The private RabbitMQ node's fixture: a node left down by a failed restart is replaced."""

from __future__ import annotations

from tests.events.rabbit import PrivateRabbit, PrivateRabbits


def test_a_node_left_down_is_replaced_by_a_fresh_one(
    private_rabbit: PrivateRabbit, _private_rabbits: PrivateRabbits
) -> None:
    assert private_rabbit.answers()
    private_rabbit.discard()  # as a restart that failed leaves it
    assert not private_rabbit.answers()
    fresh = _private_rabbits.running()
    assert fresh is not private_rabbit and fresh.answers()
    assert _private_rabbits.running() is fresh  # a node that answers is kept
