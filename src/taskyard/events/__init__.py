"""Events: the bus port, its two adapters, the profiles they publish, and the outbox relay.

A state change writes its events to the outbox in its own transaction, each as the queue made
it (`Message`: TaskCluster's short exchange name, routing key, CCs and body), whatever the
deployment publishes. The relay (outbox.py) takes them after commit and hands them to the bus;
the bus maps each through the deployment's profiles (profiles.py: `tc`, TaskCluster's own
exchanges, and `seed`, the four `v1/queue:*` exchanges) into `Envelope`s with full exchange
names, and sends those: in process (memory.py, the default, `memory://`) or to RabbitMQ
(amqp.py, `amqp://user:password@host:port/vhost`) with publisher confirms.

Mapping at publish time keeps one stored form for every profile, and one mapping for both buses:
an in-process subscriber sees the exchanges, keys and bodies a RabbitMQ consumer would, and
subscribes by full exchange name (`exchange/taskcluster-queue/v1/task-pending`). Nothing in the
queue itself subscribes (claimWork is woken by storage notifications, not by events).
"""

from __future__ import annotations

from collections.abc import Sequence

from taskyard.events.port import EventBus
from taskyard.events.profiles import PROFILES, Profiles


def check_url(url: str) -> str:
    """`url` if a bus can be opened on it, else a ConfigError naming the `events` option."""
    if url.startswith("memory://"):
        return url
    from taskyard.events.amqp import check_url as check_amqp_url

    return check_amqp_url(url)


async def open_bus(url: str, *, profiles: Sequence[str] = PROFILES, root_url: str = "") -> EventBus:
    """`memory://` for the in-process bus, `amqp://...` for RabbitMQ (connecting in the background).

    `root_url` is the deployment's, for the URLs in `seed` bodies.
    """
    check_url(url)
    mapping = Profiles(profiles, root_url=root_url)
    if url.startswith("memory://"):
        from taskyard.events.memory import MemoryBus

        return MemoryBus(mapping)
    from taskyard.events.amqp import AmqpBus

    bus = AmqpBus(url, mapping)
    await bus.start()
    return bus
