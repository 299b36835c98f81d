"""A RabbitMQ consumer for the end-to-end tests: its own connection, queue and bindings, consuming in
a thread of its own, so a test can go on driving servers (and killing them) while events arrive.

It uses pika, not the server's aio-pika: what it sees is what any AMQP client bound the same way
would see. Its queue is exclusive and auto-deleted: it lives exactly as long as the listener, which
is independent of any server process.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pika
import pika.channel
import pika.spec
import pytest

from tests.conftest import RABBITMQ_URL, need_rabbitmq
from tests.e2e.conftest import Server, start_server

# `amqp://guest:guest@127.0.0.1:5672/%2F` for `taskyard serve --events`: the default vhost, spelled out.
EVENTS_URL = RABBITMQ_URL if RABBITMQ_URL.rstrip("/").count("/") > 2 else RABBITMQ_URL.rstrip("/") + "/%2F"


@dataclass(frozen=True)
class Event:
    exchange: str
    routing_key: str
    body: dict[str, Any]
    headers: dict[str, Any]

    @property
    def task_id(self) -> str:
        return str(self.body["status"]["taskId"])

    @property
    def state(self) -> str:
        return str(self.body["status"]["state"])


class Listener:
    """Binds an exclusive queue as told, then collects every message it gets in `events`."""

    def __init__(self, bindings: Iterable[tuple[str, str]], url: str = RABBITMQ_URL) -> None:
        need_rabbitmq()
        self.connection = pika.BlockingConnection(pika.URLParameters(url))
        channel = self.connection.channel()
        self.queue = channel.queue_declare("", exclusive=True, auto_delete=True).method.queue
        for exchange, pattern in bindings:
            channel.exchange_declare(exchange, "topic", durable=True)
            channel.queue_bind(self.queue, exchange, pattern)
        channel.basic_qos(prefetch_count=500)
        channel.basic_consume(self.queue, self._on_message, auto_ack=True)
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._consume, name="bus-listener", daemon=True)
        self._thread.start()

    def _on_message(
        self,
        _channel: pika.channel.Channel,
        method: pika.spec.Basic.Deliver,
        properties: pika.spec.BasicProperties,
        body: bytes,
    ) -> None:
        event = Event(method.exchange, method.routing_key, orjson.loads(body), dict(properties.headers or {}))
        with self._arrived:
            self._events.append(event)
            self._arrived.notify_all()

    def _consume(self) -> None:
        while not self._stop.is_set():
            self.connection.process_data_events(time_limit=0.1)

    @property
    def events(self) -> list[Event]:
        """Every message received so far, in the order the broker delivered them."""
        with self._lock:
            return list(self._events)

    def wait_for(
        self, condition: Callable[[list[Event]], Any], *, what: str, timeout: float = 60.0
    ) -> list[Event]:
        """Wait until `condition(events)` holds; answer the events then. Fails after `timeout` s."""
        give_up = time.monotonic() + timeout
        with self._arrived:
            while not condition(list(self._events)):
                left = give_up - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}; got {len(self._events)} events")
                self._arrived.wait(min(left, 0.5))
            return list(self._events)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        with contextlib.suppress(Exception):
            self.connection.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


# Fixtures for a module whose server publishes to the shared RabbitMQ. A module imports `server`
# (and `sqlite_only` as `module_db_url` when what the server stores does not matter).


@pytest.fixture(scope="module", name="module_db_url")
def sqlite_only(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> str:
    """The module's database, on SQLite alone: these tests are about the events, not the storage."""
    path = tmp_path_factory.mktemp("db") / "taskyard.sqlite3"
    shutil.copy(request.getfixturevalue("sqlite_template"), path)
    return f"sqlite:///{path}"


@pytest.fixture(scope="module")
def server(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The module's server, publishing its events to the shared RabbitMQ."""
    need_rabbitmq()
    running = start_server(
        module_db_url, tmp_path_factory.mktemp("server"), name="events", extra_args=["--events", EVENTS_URL]
    )
    yield running
    running.stop()
