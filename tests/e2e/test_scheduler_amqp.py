"""The task-graph scheduler with `--events amqp://...`: its own durable queue on RabbitMQ, and its
exchanges seen by an AMQP consumer of another process, in both profiles."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from tests.conftest import RABBITMQ_URL, need_rabbitmq
from tests.e2e.bus import EVENTS_URL, Event, Listener, sqlite_only
from tests.e2e.conftest import Server, start_server
from tests.e2e.helpers import GRAPH_SCOPES, META, signed, slug, wait_until_not_running
from tests.e2e.workers import WorkerProcess, sh, task

__all__ = ["sqlite_only"]

SCHEDULER_ID = f"e2e-{uuid.uuid4().hex[:8]}"
QUEUE = f"taskyard/scheduler/{SCHEDULER_ID}"


@pytest.fixture(scope="module")
def server(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server on the shared RabbitMQ with a schedulerId of this module alone."""
    need_rabbitmq()
    args = ["--events", EVENTS_URL, "--scheduler-id", SCHEDULER_ID]
    running = start_server(module_db_url, tmp_path_factory.mktemp("server"), name="sched", extra_args=args)
    yield running
    running.stop()
    connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
    connection.channel().queue_delete(QUEUE)
    connection.close()


@pytest.fixture
def worker(server: Server, tq: str, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = WorkerProcess(server, tq, tmp_path / "work", args=["--capacity", "2"]).start()
    yield process
    process.stop()


def put_graph(server: Server, graph_id: str, body: dict[str, Any]) -> dict[str, Any]:
    url = f"{server.root_url}/api/scheduler/v1/task-graph/{graph_id}"
    answer = signed("PUT", url, body, server.credentials)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def node(tq: str, script: str, **more: Any) -> dict[str, Any]:
    return {"task": task(tq, {"command": sh(script)}), **more}


def test_an_amqp_consumer_follows_a_graph_in_both_profiles(
    server: Server, tq: str, worker: WorkerProcess
) -> None:
    graph_id = slug()
    seed_key = f"*.*.*.*.*.*.{SCHEDULER_ID}.{graph_id}.#"
    tc_key = f"primary.*.*.*.*.*.*.{SCHEDULER_ID}.{graph_id}.#"
    bindings = [(f"v1/scheduler:task-graph-{n}", seed_key) for n in ("running", "blocked", "finished")]
    bindings += [
        (f"exchange/taskcluster-scheduler/v1/task-graph-{n}", tc_key) for n in ("running", "finished")
    ]
    bindings += [("v1/queue:task-completed", seed_key)]
    scopes = [*GRAPH_SCOPES, f"queue:scheduler-id:{SCHEDULER_ID}"]
    body = {
        "routing": "nightly",
        "scopes": scopes,
        "routes": ["e2e.graphs"],
        "metadata": META,
        "tasks": {"build": node(tq, "true"), "test": node(tq, "true", requires=["build"])},
    }
    by_route = Listener([("exchange/taskcluster-scheduler/v1/task-graph-running", "route.e2e.graphs")])
    with by_route, Listener(bindings) as listener:
        put_graph(server, graph_id, body)
        assert wait_until_not_running(server, graph_id) == "finished"

        def done(events: list[Event]) -> bool:
            return len(events) >= 6

        events = listener.wait_for(done, what="the graph's events")
        routed = by_route.wait_for(lambda events: len(events) >= 1, what="the running event by its route")
    seen = sorted((e.exchange, e.routing_key) for e in events if "scheduler" in e.exchange)
    tc = f"primary._._._._._._.{SCHEDULER_ID}.{graph_id}._"
    seed = f"_._._._._._.{SCHEDULER_ID}.{graph_id}.nightly"
    assert seen == [
        ("exchange/taskcluster-scheduler/v1/task-graph-finished", tc),
        ("exchange/taskcluster-scheduler/v1/task-graph-running", tc),
        ("v1/scheduler:task-graph-finished", seed),
        ("v1/scheduler:task-graph-running", seed),
    ]
    assert routed[0].headers["CC"] == ["route.e2e.graphs"]
    assert routed[0].body["status"]["taskGraphId"] == graph_id
    finished = next(e for e in events if e.exchange == "v1/scheduler:task-graph-finished")
    assert finished.body == {
        "schedulerId": SCHEDULER_ID,
        "taskGraphId": graph_id,
        "state": "finished",
        "routing": "nightly",
    }
    completed = [e.routing_key for e in events if e.exchange == "v1/queue:task-completed"]
    assert len(completed) == 2 and all(k.endswith(f".{SCHEDULER_ID}.{graph_id}.nightly._") for k in completed)


def test_the_scheduler_consumes_a_durable_queue_of_its_own(server: Server) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
    try:
        declared = connection.channel().queue_declare(QUEUE, passive=True)
        assert declared.method.consumer_count >= 1
    finally:
        connection.close()
