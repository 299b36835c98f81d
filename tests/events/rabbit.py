"""RabbitMQ for tests: a consumer (pika, independent of the publisher's library), a TCP proxy that
can stop answering, and a private broker node a test may stop, start and add users to.

The private node runs from the installed RabbitMQ's scripts with its own name, ports, data and
Erlang cookie under a temporary directory, so nothing a test does to it reaches the shared broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pika

from tests.ports import free_port

RABBITMQ_BIN = Path(os.environ.get("TASKYARD_TEST_RABBITMQ_BIN", "/usr/lib/rabbitmq/bin"))


@dataclass
class Received:
    exchange: str
    routing_key: str
    body: dict[str, Any]
    headers: dict[str, Any]
    delivery_mode: int | None
    content_type: str | None


class Consumer:
    """An exclusive, auto-delete, server-named queue with bindings; `take()` drains it."""

    def __init__(self, url: str, *, durable_name: str | None = None) -> None:
        self.connection = pika.BlockingConnection(pika.URLParameters(url))
        self.channel = self.connection.channel()
        if durable_name is None:
            self.queue = self.channel.queue_declare("", exclusive=True, auto_delete=True).method.queue
        else:  # survives a broker restart (and this consumer's connection)
            self.queue = self.channel.queue_declare(durable_name, durable=True).method.queue
        self.received: list[Received] = []

    def bind(self, exchange: str, pattern: str) -> Consumer:
        self.channel.exchange_declare(exchange, "topic", durable=True)
        self.channel.queue_bind(self.queue, exchange, pattern)
        return self

    def take(self) -> list[Received]:
        """Everything the queue holds now, added to `received`; answer `received`."""
        while True:
            method, properties, body = self.channel.basic_get(self.queue, auto_ack=True)
            if method is None:
                return self.received
            self.received.append(
                Received(
                    method.exchange,
                    method.routing_key,
                    orjson.loads(body),
                    dict(properties.headers or {}),
                    properties.delivery_mode,
                    properties.content_type,
                )
            )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.connection.close()


async def eventually(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    """Wait for `condition()` to hold, polling; fail the test if it never does."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout
    while not condition():
        if loop.time() > give_up:
            raise AssertionError("condition never held")
        await asyncio.sleep(0.05)


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `target`; `hold_replies()` stops passing the broker's bytes on."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self.replies = asyncio.Event()
        self.replies.set()
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        return self

    def hold_replies(self) -> None:
        self.replies.clear()

    def pass_replies(self) -> None:
        self.replies.set()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            broker_r, broker_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        for pipe in (self._pipe(client_r, broker_w, None), self._pipe(broker_r, client_w, self.replies)):
            task = asyncio.create_task(pipe)
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    async def _pipe(
        self, r: asyncio.StreamReader, w: asyncio.StreamWriter, gate: asyncio.Event | None
    ) -> None:
        try:
            while data := await r.read(65536):
                if gate is not None:
                    await gate.wait()
                w.write(data)
                await w.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            w.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)


@dataclass
class PrivateRabbit:
    """A RabbitMQ node of our own: `stop()`, `start()`, `add_user()` touch only this one."""

    base: Path
    name: str = field(default_factory=lambda: f"ty-test-{uuid.uuid4().hex[:8]}@localhost")
    port: int = field(default_factory=free_port)
    dist_port: int = field(default_factory=free_port)

    def url(self, user: str = "guest", password: str = "guest") -> str:
        return f"amqp://{user}:{password}@127.0.0.1:{self.port}/"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            HOME=str(self.base / "home"),  # its own Erlang cookie
            RABBITMQ_NODENAME=self.name,
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_MNESIA_BASE=str(self.base / "mnesia"),
            RABBITMQ_LOG_BASE=str(self.base / "log"),
            RABBITMQ_CONFIG_FILE=str(self.base / "rabbitmq.conf"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.base / "enabled_plugins"),
            RABBITMQ_PID_FILE=str(self.base / "pid"),
        )
        return env

    def _ctl(self, *args: str, timeout: float = 90) -> None:
        command = [str(RABBITMQ_BIN / "rabbitmqctl"), "-n", self.name, *args]
        done = subprocess.run(command, env=self._env(), capture_output=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)}: {done.stdout!r} {done.stderr!r}")

    def prepare(self) -> None:
        for sub in ("home", "mnesia", "log"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        cookie = self.base / "home" / ".erlang.cookie"
        cookie.write_text(uuid.uuid4().hex)
        cookie.chmod(0o400)
        (self.base / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nloopback_users = none\n"
        )
        (self.base / "enabled_plugins").write_text("[].\n")

    def start(self) -> None:
        subprocess.run(
            [str(RABBITMQ_BIN / "rabbitmq-server"), "-detached"], env=self._env(), check=True, timeout=30
        )
        self._ctl("wait", str(self.base / "pid"), "--timeout", "90", timeout=120)

    def stop(self) -> None:
        self._ctl("stop", str(self.base / "pid"), timeout=120)

    def answers(self) -> bool:
        """Whether the node takes an AMQP connection now."""
        params = pika.URLParameters(self.url() + "?connection_attempts=1&socket_timeout=5")
        try:
            pika.BlockingConnection(params).close()
        except Exception:  # any failure to connect means: it does not
            return False
        return True

    def discard(self) -> None:
        """Stop the node however it is: by rabbitmqctl, else by killing its Erlang VM."""
        with contextlib.suppress(Exception):
            self._ctl("stop", str(self.base / "pid"), timeout=30)
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((self.base / "pid").read_text().strip()), signal.SIGKILL)

    def add_user(self, user: str, password: str) -> None:
        self._ctl("add_user", user, password)
        self._ctl("set_permissions", "-p", "/", user, ".*", ".*", ".*")


class PrivateRabbits:
    """The session's private node, checked before each test gets it: a node that does not answer
    (a test's restart of it failed) is discarded and a fresh one started, with its own name, ports
    and data, so that one failed restart does not fail every later test that uses the node."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.node: PrivateRabbit | None = None

    def running(self) -> PrivateRabbit:
        node = self.node
        if node is not None and node.answers():
            return node
        if node is not None:
            node.discard()
        self.node = node = PrivateRabbit(self.base / uuid.uuid4().hex[:8])
        node.prepare()
        node.start()
        return node

    def close(self) -> None:
        if self.node is not None:
            self.node.discard()


def private_rabbit_unavailable() -> str | None:
    for tool in ("rabbitmq-server", "rabbitmqctl"):
        if not (RABBITMQ_BIN / tool).exists():
            return f"no {RABBITMQ_BIN / tool} to run a private RabbitMQ node"
    return None
