"""The worker's cancellation listener against a real RabbitMQ: what it binds, what it hands on, what it
skips, and one log line when the broker cannot be reached. Messages are published by hand with pika,
as the server would publish them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pika
import pytest

from taskyard.config import WorkerConfig
from taskyard.worker.cancellations import SEED_FAILED, TC_EXCEPTION, CancellationListener, where
from taskyard.worker.client import QueueClient
from taskyard.worker.task import TaskRun
from taskyard.worker.worker import Worker
from tests.conftest import RABBITMQ_URL, need_rabbitmq
from tests.events.rabbit import eventually, free_port
from tests.worker.helpers import claim_of

LOGGER = "taskyard.worker.cancellations"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def status(task_id: str, state: str = "exception", reason: str = "canceled") -> dict[str, Any]:
    return {"taskId": task_id, "runs": [{"runId": 0, "state": state, "reasonResolved": reason}]}


def publish(exchange: str, key: str, body: bytes) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
    try:
        channel = connection.channel()
        channel.exchange_declare(exchange, "topic", durable=True)
        channel.basic_publish(exchange, key, body)
    finally:
        connection.close()


@contextlib.asynccontextmanager
async def listening(
    url: str, group: str, worker: str, heard: list[tuple[str, Any]], **options: Any
) -> AsyncIterator[CancellationListener]:
    listener = CancellationListener(url, group, worker, lambda t, s: heard.append((t, s)), **options)
    task = asyncio.create_task(listener.run())
    try:
        yield listener
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_it_hears_its_own_runs_on_either_profile_and_nothing_else(
    caplog: pytest.LogCaptureFixture,
) -> None:
    need_rabbitmq()
    caplog.set_level(logging.INFO, logger=LOGGER)
    group, worker = unique("wg"), "w1"
    heard: list[tuple[str, Any]] = []
    async with listening(RABBITMQ_URL, group, worker, heard) as listener:
        await eventually(lambda: listener.bound, timeout=30)
        tc, seed, other = unique("tc"), unique("seed"), unique("other")
        # Another worker's run, on both exchanges: not for this one.
        publish(
            TC_EXCEPTION, f"primary.{other}.0.{group}.w2.p.wt.s.g._", orjson.dumps({"status": status(other)})
        )
        publish(SEED_FAILED, f"{other}.0.{group}.w2.p.wt.s.g", orjson.dumps({"status": status(other)}))
        # Something that is not a task's status: skipped with a warning, and the listener goes on.
        publish(TC_EXCEPTION, f"primary.x.0.{group}.{worker}.p.wt.s.g._", b"not json")
        publish(SEED_FAILED, f"x.0.{group}.{worker}.p.wt.s.g", orjson.dumps({"status": "canceled"}))
        publish(
            TC_EXCEPTION, f"primary.{tc}.0.{group}.{worker}.p.wt.s.g._", orjson.dumps({"status": status(tc)})
        )
        body = {"version": "0.2.0", "status": status(seed), "run_id": 0}
        publish(SEED_FAILED, f"{seed}.0.{group}.{worker}.p.wt.s.g", orjson.dumps(body))
        await eventually(lambda: len(heard) >= 2, timeout=30)
    assert heard == [(tc, status(tc)), (seed, status(seed))]
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert lines[0].startswith("hearing of cancelled tasks from RabbitMQ at 127.0.0.1:5672")
    skipped = [line for line in lines if line.startswith("skipped a message")]
    assert len(skipped) == 2 and all("does not name a task's status" in line for line in skipped)


def shared(user: str, password: str, vhost: str) -> str:
    """The test broker's host and port with other credentials or vhost."""
    host = RABBITMQ_URL.split("@")[-1].split("/")[0]
    return f"amqp://{user}:{password}@{host}/{vhost}"


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("nothing-listening", "Connect call failed"),
        ("refused-credentials", "ACCESS_REFUSED"),
        ("unknown-vhost", "no-such-vhost"),
    ],
)
async def test_a_broker_it_cannot_use_is_one_log_line_however_many_attempts(
    caplog: pytest.LogCaptureFixture, case: str, why: str
) -> None:
    if case == "nothing-listening":
        url = f"amqp://someone:hunter2@127.0.0.1:{free_port()}/%2F"
    else:
        need_rabbitmq()
        url = (
            shared("nobody", "hunter2", "%2F")
            if case == "refused-credentials"
            else shared("guest", "guest", "no-such-vhost")
        )
    caplog.set_level(logging.DEBUG)
    heard: list[tuple[str, Any]] = []
    async with listening(url, "wg", "w1", heard, min_backoff=0.01, max_backoff=0.05) as listener:
        await eventually(lambda: listener.failed_attempts >= 5, timeout=30)
        assert not listener.bound
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(lines) == 1, lines
    assert "is unavailable" in lines[0] and "checking running tasks' status instead" in lines[0]
    assert why in lines[0], lines[0]
    assert "hunter2" not in caplog.text
    assert [r for r in caplog.records if r.name.startswith(("aiormq", "aio_pika"))] == []


def test_log_lines_name_the_broker_without_its_credentials() -> None:
    assert where("amqp://u:hunter2@rabbit.example:5673/prod") == "rabbit.example:5673 (vhost prod)"
    assert where("amqps://u:p@rabbit/") == "rabbit:5671 (vhost /)"
    assert where("amqp://rabbit/%2F") == "rabbit:5672 (vhost /)"


# What the worker does with what it hears. -----------------------------------------------------------


def claimed(worker: Worker, task_id: str, run_id: int) -> TaskRun:
    """A run registered as running (its commands are not started)."""
    run = TaskRun(claim_of(task_id, run_id), worker.config, worker.client)
    worker.running[(task_id, run_id)] = run
    return run


def runs(*states: tuple[str, str], task_id: str = "T") -> dict[str, Any]:
    """A task's status whose runs are in `states`: (state, reasonResolved) each."""
    return {
        "taskId": task_id,
        "runs": [{"runId": i, "state": s, "reasonResolved": r} for i, (s, r) in enumerate(states)],
    }


async def test_the_worker_stops_only_a_run_the_message_shows_resolved(tmp_path: Path) -> None:
    config = WorkerConfig("http://127.0.0.1:1", "c", "t", work_dir=str(tmp_path), events="amqp://rabbit/")
    worker = Worker(config, client=QueueClient(config.root_url))
    try:
        retried = claimed(worker, "T", 1)
        # Run 0's retry, heard late: run 1 (this worker's now) was pending then, not over.
        worker._heard("T", runs(("exception", "worker-shutdown"), ("pending", "")))
        assert not retried.abort.event.is_set()
        worker._heard("T", runs(("exception", "worker-shutdown"), ("running", "")))
        assert not retried.abort.event.is_set()
        worker._heard("T", runs(("exception", "worker-shutdown"), ("exception", "canceled")))
        assert retried.abort.reason == "canceled"
        # A cancellation heard before claimWork's answer arrived stops the run as soon as it is started.
        worker._heard("U", runs(("exception", "deadline-exceeded"), task_id="U"))
        worker._start(claim_of("U", 0))
        late = worker.running[("U", 0)]
        assert late.abort.reason == "run exception/deadline-exceeded"
        for task in list(worker._tasks):
            task.cancel()
    finally:
        await worker.client.close()
