"""`consume` on a real RabbitMQ: a durable queue keeps what arrives while nobody consumes it, and a
message whose handler failed comes again."""

from __future__ import annotations

import asyncio
import uuid

import pika
import pika.exceptions
import pytest

from taskyard.events.amqp import AmqpBus
from taskyard.events.memory import MemoryBus
from taskyard.events.port import Envelope
from taskyard.events.profiles import Profiles
from taskyard.model.messages import Message
from tests.conftest import RABBITMQ_URL, need_rabbitmq, until

EXCHANGE = "exchange/taskcluster-queue/v1/task-completed"


def completed(key: str) -> Message:
    return Message("task-completed", key, {"status": {"taskId": key}})


def consumers(name: str) -> int:
    """How many consume `name` (0 while it does not exist yet)."""
    connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
    try:
        return int(connection.channel().queue_declare(name, passive=True).method.consumer_count)
    except pika.exceptions.ChannelClosedByBroker:
        return 0
    finally:
        if connection.is_open:
            connection.close()


async def until_consumed(name: str, count: int) -> None:
    for _ in range(100):
        if await asyncio.to_thread(consumers, name) == count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never had {count} consumers")


def delete_queue(name: str) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
    connection.channel().queue_delete(name)
    connection.close()


async def test_a_durable_queue_keeps_what_arrives_while_nobody_consumes() -> None:
    need_rabbitmq()
    name = f"taskyard-test/{uuid.uuid4().hex[:10]}"
    word = uuid.uuid4().hex[:8]
    bus = AmqpBus(RABBITMQ_URL, Profiles(["tc"]), min_backoff=0.05, max_backoff=0.2)
    await bus.start()
    try:
        await asyncio.wait_for(bus.wait_ready(), 10)
        got: list[str] = []
        stop = bus.consume(name, [(EXCHANGE, f"{word}.#")], lambda e: got.append(e.routing_key))
        await until_consumed(name, 1)
        await bus.publish([completed(f"{word}.first")])
        await until(lambda: got == [f"{word}.first"])
        stop()
        await until_consumed(name, 0)
        await bus.publish([completed(f"{word}.while-away"), completed(f"other.{word}")])

        failures = [1]

        async def failing_once(envelope: Envelope) -> None:
            if failures:
                failures.pop()
                raise RuntimeError("the database is away")
            got.append(envelope.routing_key)

        bus.max_backoff = 0.05  # the pause before a failed message is handed back
        bus.consume(name, [(EXCHANGE, f"{word}.#")], failing_once)
        await until(lambda: got == [f"{word}.first", f"{word}.while-away"])
    finally:
        await bus.close()
        delete_queue(name)


async def test_in_process_consume_is_subscribe() -> None:
    bus = MemoryBus(Profiles(["tc"]))
    got: list[str] = []
    stop = bus.consume("any", [(EXCHANGE, "a.#"), (EXCHANGE, "b.#")], lambda e: got.append(e.routing_key))
    await bus.publish([completed("a.1"), completed("b.2"), completed("c.3")])
    await bus.flush()
    stop()
    await bus.publish([completed("a.4")])
    await bus.flush()
    assert got == ["a.1", "b.2"]
    await bus.close()


@pytest.mark.parametrize("pattern", ["", "a..b", "a*"])
def test_a_bad_pattern_is_refused(pattern: str) -> None:
    from taskyard.events.port import BadPattern

    with pytest.raises(BadPattern):
        MemoryBus().consume("q", [(EXCHANGE, pattern)], lambda e: None)
