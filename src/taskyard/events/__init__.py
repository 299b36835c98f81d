"""Events: the bus port, its in-process adapter, and the outbox relay that feeds it after commit."""

from __future__ import annotations

from taskyard.events.port import EventBus
from taskyard.model.errors import ConfigError


def open_bus(url: str) -> EventBus:
    """`memory://` for the in-process bus, the only one so far; RabbitMQ (`amqp://`) is not built yet."""
    if url.startswith("memory://"):
        from taskyard.events.memory import MemoryBus

        return MemoryBus()
    raise ConfigError("events", url, "must be memory:// (RabbitMQ support is not built yet)")
