"""`taskyard events tail` as a real process, following a real server's events through RabbitMQ."""

from __future__ import annotations

import json
import os
import select
import signal
import time
from typing import Any

import taskcluster

from tests.e2e.bus import server, sqlite_only
from tests.e2e.conftest import Server
from tests.e2e.helpers import claim_one, create, parse, slug
from tests.e2e.tails import Tail

__all__ = ["server", "sqlite_only"]  # the events fixtures, for pytest

TC = "exchange/taskcluster-queue/v1/"


def test_each_event_is_one_readable_line(
    server: Server, queue: taskcluster.Queue, tq: str, tails: list[Tail]
) -> None:
    provisioner, worker_type = tq.split("/")
    tail = Tail(
        "--exchange", "task-pending", "--exchange", "task-completed", f"primary.*.*.*.*.{provisioner}.#"
    )
    tails.append(tail)
    create(queue, f"{provisioner}/other-type")  # matches: another worker type of the same provisioner
    create(queue, f"x{provisioner}/{worker_type}")  # does not: another provisioner
    task_id = create(queue, tq, schedulerId="tail-test", taskGroupId=(group := slug()))
    claim = claim_one(queue, tq)
    queue.reportCompleted(task_id, claim["runId"])
    first, pending, completed = tail.lines(3)
    assert first.split()[1] == "task-pending" and f".{provisioner}.other-type." in first
    assert pending.split()[1:] == [
        "task-pending",
        f"primary.{task_id}.0._._.{provisioner}.{worker_type}.tail-test.{group}._",
        "pending",
    ]
    assert completed.split()[1:] == [
        "task-completed",
        f"primary.{task_id}.0.e2e-wg.e2e-worker-1.{provisioner}.{worker_type}.tail-test.{group}._",
        "completed",
    ]
    parse(completed.split()[0])  # an ISO 8601 time
    assert tail.process.poll() is None  # it follows on until stopped


def test_json_lines_on_the_original_exchanges(
    server: Server, queue: taskcluster.Queue, tq: str, tails: list[Tail]
) -> None:
    provisioner = tq.split("/")[0]
    tail = Tail("--json", "--exchange", "v1/queue:task-failed", f"*.*.*.*.{provisioner}.#")
    text = Tail("--exchange", "v1/queue:task-failed", f"*.*.*.*.{provisioner}.#")
    tails += [tail, text]
    task_id = create(queue, tq)
    queue.cancelTask(task_id)
    (line,) = tail.lines(1)
    event: dict[str, Any] = json.loads(line)
    assert set(event) == {"time", "exchange", "routingKey", "cc", "body"}
    assert event["exchange"] == "v1/queue:task-failed"
    assert event["routingKey"].startswith(f"{task_id}.0._._.{provisioner}.")
    assert event["body"]["status"]["runs"][0]["reasonResolved"] == "canceled"
    assert text.lines(1)[0].split()[1:] == ["v1/queue:task-failed", event["routingKey"], "exception/canceled"]


def test_ctrl_c_exits_130_quietly(server: Server, tails: list[Tail]) -> None:
    tail = Tail()
    tails.append(tail)
    tail.process.send_signal(signal.SIGINT)
    assert tail.finish() == 130
    assert [line for line in tail.err if not line.startswith("following ")] == []


def test_a_closed_pipe_ends_it_quietly(
    server: Server, queue: taskcluster.Queue, tq: str, tails: list[Tail]
) -> None:
    provisioner = tq.split("/")[0]
    reader, writer = os.pipe()
    tail = Tail("--exchange", "task-defined", f"primary.*.*.*.*.{provisioner}.#", stdout=writer)
    tails.append(tail)
    os.close(writer)
    create(queue, tq)
    read = b""
    while b"\n" not in read:  # one line, as `| head -1` reads it
        assert select.select([reader], [], [], 60)[0], "no line came"
        read += os.read(reader, 4096)
    assert b" task-defined primary." in read
    os.close(reader)  # then goes away
    give_up = time.monotonic() + 60
    while tail.process.poll() is None:  # the next event it writes finds the pipe closed
        assert time.monotonic() < give_up, tail.err
        create(queue, tq)
        time.sleep(0.2)
    assert tail.finish() == 141  # as a shell reports a process SIGPIPE ended
    assert [line for line in tail.err if not line.startswith("following ")] == []


def test_the_server_s_stream_carries_what_the_relay_publishes_to_rabbitmq(
    server: Server, queue: taskcluster.Queue, tq: str, tails: list[Tail]
) -> None:
    """The same server publishes to RabbitMQ; `tail` without --events reads the HTTP stream, and
    sees what a RabbitMQ consumer sees."""
    provisioner = tq.split("/")[0]
    http_env = {
        "TASKCLUSTER_ROOT_URL": server.root_url,
        "TASKCLUSTER_CLIENT_ID": server.credentials["clientId"],
        "TASKCLUSTER_ACCESS_TOKEN": server.credentials["accessToken"],
    }
    pattern = f"primary.*.*.*.*.{provisioner}.#"
    from_http = Tail("--exchange", "task-defined", "--exchange", "task-pending", pattern, env=http_env)
    from_broker = Tail("--exchange", "task-defined", "--exchange", "task-pending", pattern)
    tails += [from_http, from_broker]
    task_id = create(queue, tq)
    by_http, by_broker = ([line.split()[1:] for line in t.lines(2)] for t in (from_http, from_broker))
    assert by_http == by_broker
    assert [words[0] for words in by_http] == ["task-defined", "task-pending"]
    assert all(words[1].startswith(f"primary.{task_id}.") for words in by_http)
