"""Hearing from RabbitMQ that one of this worker's runs was resolved elsewhere (cancelled, past its
deadline), so the worker stops it at once instead of at its next status check.

The listener binds an exclusive, auto-deleted queue of its own to the queue's exchanges for this
worker's runs: `primary.*.*.<workerGroup>.<workerId>.#` on TaskCluster's
`exchange/taskcluster-queue/v1/task-exception`, and `*.*.<workerGroup>.<workerId>.#` on the original
design's `v1/queue:task-failed` (a server may publish either profile or both; a run heard of twice
is stopped once). Every message names the task and run and carries the task's status, which it
hands to `heard(task_id, status)`: the worker decides from the status whether one of its runs is
over.

A queue bound this way misses what is published while it is not bound, so the worker's status
check stays: slowed to a safety net while the listener is bound, at its usual pace while it is
not, and once at once each time it binds again (`bound` says whether it is; `on_bound` is called
each time it binds). One background task keeps the connection, backing off from `min_backoff` to
`max_backoff` seconds, and logs one line per outage and one when the broker is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

import aio_pika
import orjson
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from taskyard.model.outages import Outage

log = logging.getLogger(__name__)

SCHEMES = ("amqp", "amqps")
TC_EXCEPTION = "exchange/taskcluster-queue/v1/task-exception"
SEED_FAILED = "v1/queue:task-failed"
Heard = Callable[[str, Any], None]


def bindings(worker_group: str, worker_id: str) -> list[tuple[str, str]]:
    """The exchanges and patterns that carry the end of a run this worker holds."""
    return [
        (TC_EXCEPTION, f"primary.*.*.{worker_group}.{worker_id}.#"),
        (SEED_FAILED, f"*.*.{worker_group}.{worker_id}.#"),
    ]


def where(url: str) -> str:
    """`host:port/vhost` of an AMQP URL: what a log line names, never the credentials."""
    parts = urlsplit(url)
    vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
    return f"{parts.hostname}:{parts.port or (5671 if parts.scheme == 'amqps' else 5672)} (vhost {vhost})"


class CancellationListener:
    """Calls `heard(task_id, status)` for each message about one of this worker's runs."""

    def __init__(
        self,
        url: str,
        worker_group: str,
        worker_id: str,
        heard: Heard,
        *,
        on_bound: Callable[[], None] = lambda: None,
        connect_timeout: float = 5.0,
        min_backoff: float = 0.25,
        max_backoff: float = 5.0,
    ) -> None:
        self._url = url
        self._password = urlsplit(url).password or ""
        self.where = where(url)
        self.bindings = bindings(worker_group, worker_id)
        self._heard = heard
        self._on_bound = on_bound
        self.connect_timeout = connect_timeout
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self._bound = False
        self._outage = Outage()
        self.failed_attempts = 0

    @property
    def bound(self) -> bool:
        """Whether messages reach this worker now."""
        return self._bound

    async def run(self) -> None:
        """Listen until cancelled, connecting again whenever the connection is lost."""
        _quiet_driver_logs()
        backoff = self.min_backoff
        while True:
            connection: AbstractConnection | None = None
            try:
                connection = await asyncio.wait_for(aio_pika.connect(self._url), self.connect_timeout)
                channel = await asyncio.wait_for(connection.channel(), self.connect_timeout)
                lost = await asyncio.wait_for(self._bind(connection, channel), self.connect_timeout)
            except Exception as exc:  # whatever it is, this loop must go on trying
                if connection is not None:
                    await _close_quietly(connection)
                self.failed_attempts += 1
                self._went_down(_reason(exc))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff)
                continue
            backoff = self.min_backoff
            self._came_up()
            try:
                reason = await lost
            finally:
                self._bound = False
                await _close_quietly(connection)
            self._went_down(reason)

    async def _bind(self, connection: AbstractConnection, channel: AbstractChannel) -> asyncio.Future[str]:
        """Bind a queue of our own and consume it; answer a future set (to why) once it is lost."""
        lost: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def closed(_: object, exc: BaseException | None = None) -> None:
            if not lost.done():
                lost.set_result(_reason(exc) if exc is not None else "the connection closed")

        connection.close_callbacks.add(closed)
        channel.close_callbacks.add(closed)
        queue = await channel.declare_queue("", exclusive=True, auto_delete=True)
        for exchange, pattern in self.bindings:
            declared = await channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC, durable=True)
            await queue.bind(declared, pattern)
        await queue.consume(self._on_message, no_ack=True)
        return lost

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        try:
            body = orjson.loads(message.body)
            status = body["status"]
            task_id = str(status["taskId"])
            if not isinstance(status.get("runs"), list):
                raise TypeError("status.runs is not a list")
        except (ValueError, TypeError, KeyError) as exc:
            log.warning(
                "skipped a message on %s (%s) that does not name a task's status: %s",
                message.exchange,
                message.routing_key,
                _reason(exc),
            )
            return
        try:
            self._heard(task_id, status)
        except Exception:
            log.exception("failed acting on a message about task %s", task_id)

    def _went_down(self, reason: str) -> None:
        self._bound = False
        if not self._outage.begins(time.monotonic()):
            return  # one line per outage, however many attempts it takes
        if self._password:
            reason = reason.replace(self._password, "***")
        log.warning(
            "RabbitMQ at %s is unavailable (%s); checking running tasks' status instead until it is back",
            self.where,
            reason,
        )

    def _came_up(self) -> None:
        first, lasted = self._outage.ends(time.monotonic())
        if lasted is not None:
            log.info(
                "RabbitMQ at %s is back after %.1f s; hearing of cancelled tasks from it again",
                self.where,
                lasted,
            )
        elif first:
            log.info("hearing of cancelled tasks from RabbitMQ at %s", self.where)
        self._bound = True
        self._on_bound()


def _quiet_driver_logs() -> None:
    """Keep the AMQP libraries' own lines (a traceback per failed attempt) out of the worker's log:
    the listener says what matters, once per outage. A level set on purpose is left alone."""
    for name in ("aiormq", "aio_pika"):
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.CRITICAL)


async def _close_quietly(connection: AbstractConnection) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(connection.close(), 2.0)


def _reason(exc: BaseException) -> str:
    """A short, one-line cause for a log line."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
