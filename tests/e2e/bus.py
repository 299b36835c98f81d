"""A RabbitMQ consumer for the end-to-end tests: its own connection, queue and bindings, consuming in
a thread of its own, so a test can go on driving servers (and killing them) while events arrive.

It uses pika, not the server's aio-pika: what it sees is what any AMQP client bound the same way
would see. Its queue is exclusive and auto-deleted: it lives exactly as long as the listener, which
is independent of any server process. A listener on a broker that is restarted (a private node)
uses a durable queue instead, and connects again by itself.
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
import pika.exceptions
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
    """Binds a queue as told, then collects every message it gets in `events`.

    The queue is exclusive and auto-deleted, unless `durable_queue` names it: then it is durable,
    messages are acknowledged only once collected, and when the connection is lost (the broker
    restarted) the listener connects again and goes on where it left off. That is for a private
    broker a test restarts; the shared one is checked first (`need_rabbitmq`).
    """

    def __init__(
        self, bindings: Iterable[tuple[str, str]], url: str = RABBITMQ_URL, *, durable_queue: str = ""
    ) -> None:
        if url == RABBITMQ_URL:
            need_rabbitmq()
        self.url = url
        self.bindings = list(bindings)
        self.durable_queue = durable_queue
        self.reconnections = 0
        self.connection = self._connect()
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._consume, name="bus-listener", daemon=True)
        self._thread.start()

    def _connect(self) -> pika.BlockingConnection:
        connection = pika.BlockingConnection(pika.URLParameters(self.url))
        channel = connection.channel()
        if self.durable_queue:
            self.queue = channel.queue_declare(self.durable_queue, durable=True).method.queue
        else:
            self.queue = channel.queue_declare("", exclusive=True, auto_delete=True).method.queue
        for exchange, pattern in self.bindings:
            channel.exchange_declare(exchange, "topic", durable=True)
            channel.queue_bind(self.queue, exchange, pattern)
        channel.basic_qos(prefetch_count=500)
        channel.basic_consume(self.queue, self._on_message, auto_ack=not self.durable_queue)
        return connection

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
        if self.durable_queue:  # collected: the broker may forget it (a lost ack means a duplicate)
            _channel.basic_ack(method.delivery_tag)

    def _consume(self) -> None:
        while not self._stop.is_set():
            try:
                self.connection.process_data_events(time_limit=0.1)
            except pika.exceptions.AMQPError:
                if not self.durable_queue:
                    raise
                self._reconnect()

    def _reconnect(self) -> None:
        """Connect again until the broker answers (or the listener is closed)."""
        with contextlib.suppress(Exception):
            self.connection.close()
        while not self._stop.is_set():
            try:
                self.connection = self._connect()
            except pika.exceptions.AMQPError:
                time.sleep(0.2)
                continue
            self.reconnections += 1
            return

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
            if self.durable_queue:  # it outlives the connection: remove it
                self.connection.channel().queue_delete(self.durable_queue)
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
