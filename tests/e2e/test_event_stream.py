"""The HTTP event stream of a real `taskyard serve` on its in-process bus (no RabbitMQ): `taskyard
events tail` without `--events` following a task's life, reconnecting across a server restart, and
Last-Event-ID resumption with no gap."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import mohawk
import pytest
import requests
import taskcluster

from tests.e2e.conftest import TASKYARD, Server, start_server
from tests.e2e.helpers import claim_one, create
from tests.e2e.tails import Tail

TC = "exchange/taskcluster-queue/v1/"


def stream_env(server: Server) -> dict[str, str]:
    return {
        "TASKCLUSTER_ROOT_URL": server.root_url,
        "TASKCLUSTER_CLIENT_ID": server.credentials["clientId"],
        "TASKCLUSTER_ACCESS_TOKEN": server.credentials["accessToken"],
    }


def test_tail_shows_a_task_s_life_live_from_the_server(
    server: Server, queue: taskcluster.Queue, tq: str, tails: list[Tail]
) -> None:
    provisioner, worker_type = tq.split("/")
    exchanges = ["--exchange", "task-pending", "--exchange", "task-running", "--exchange", "task-completed"]
    tail = Tail(*exchanges, f"primary.*.*.*.*.{provisioner}.#", env=stream_env(server))
    as_json = Tail(
        "--json", "--exchange", "v1/queue:task-completed", f"*.*.*.*.{provisioner}.#", env=stream_env(server)
    )
    tails += [tail, as_json]
    names = "task-pending task-running task-completed"
    assert tail.err == [f"following {names} (primary.*.*.*.*.{provisioner}.#) on {server.root_url}"]
    task_id = create(queue, tq)
    claim = claim_one(queue, tq)
    queue.reportCompleted(task_id, claim["runId"])
    lines = [line.split() for line in tail.lines(3)]
    assert [line[1:2] + line[3:] for line in lines] == [
        ["task-pending", "pending"],
        ["task-running", "running"],
        ["task-completed", "completed"],
    ]
    assert all(
        line[2].startswith(f"primary.{task_id}.0.") and f".{provisioner}.{worker_type}." in line[2]
        for line in lines
    )
    (completed,) = as_json.lines(1)
    event = json.loads(completed)
    assert (event["exchange"], event["body"]["status"]["state"]) == ("v1/queue:task-completed", "completed")
    assert tail.process.poll() is None  # it follows on until stopped


def test_a_refusal_is_one_line_and_exit_1(server: Server) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TASKYARD_", "TASKCLUSTER_"))}
    env |= stream_env(server) | {"TASKCLUSTER_ACCESS_TOKEN": "wrong"}
    done = subprocess.run(
        [str(TASKYARD), "events", "tail"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert done.stdout == ""
    # The server's message, with the footer naming the call, as the other commands print it.
    assert done.stderr.startswith("taskyard: Unauthorized: Bad mac\n"), done.stderr
    assert "errorCode:  AuthenticationFailed" in done.stderr


@pytest.fixture
def own_server(sqlite_template: Path, tmp_path: Path) -> Iterator[Server]:
    """A server of this test alone, which it restarts."""
    db = tmp_path / "taskyard.sqlite3"
    db.write_bytes(sqlite_template.read_bytes())
    running = start_server(f"sqlite:///{db}", tmp_path / "server", name="restarted")
    yield running
    running.stop()


def test_tail_reconnects_across_a_restart_and_misses_nothing(
    own_server: Server, tq: str, tails: list[Tail]
) -> None:
    queue = own_server.client()
    tail = Tail(
        "--exchange", "task-defined", f"primary.*.*.*.*.{tq.split('/')[0]}.#", env=stream_env(own_server)
    )
    tails.append(tail)
    before = create(queue, tq)
    tail.lines(1)
    own_server.stop()
    own_server.start()
    after = [create(queue, tq) for _ in range(3)]  # whether the tail is back yet or not
    seen = [line.split()[2].split(".")[1] for line in tail.lines(4)]
    assert seen == [before, *after]
    assert any("reconnecting" in line for line in tail.err), tail.err


def test_last_event_id_resumes_with_no_gap(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    provisioner = tq.split("/")[0]
    url = f"{server.root_url}/api/events/v1/stream?" + urlencode(
        {"binding": f"{TC}task-defined:primary.*.*.*.*.{provisioner}.#"}
    )
    with follow(server, url) as events:
        opening = next(events)
        assert set(opening) == {"id", "retry"}  # an id alone: where to resume from
        created = [create(queue, tq) for _ in range(2)]
        first = next(events)
        assert json.loads(first["data"])["body"]["status"]["taskId"] == created[0]
    created += [create(queue, tq) for _ in range(3)]  # while nobody follows
    with follow(server, url, last_event_id=first["id"]) as events:
        assert set(next(events)) == {"retry"}  # a resumed stream's opening carries no id
        seen = [json.loads(next(events)["data"])["body"]["status"]["taskId"] for _ in range(4)]
    assert seen == created[1:]


@contextlib.contextmanager
def follow(
    server: Server, url: str, *, last_event_id: str | None = None
) -> Iterator[Iterator[dict[str, str]]]:
    """The stream's SSE blocks as dicts of their fields, the opening included."""
    sender = mohawk.Sender(
        credentials={
            "id": server.credentials["clientId"],
            "key": server.credentials["accessToken"],
            "algorithm": "sha256",
        },
        url=url,
        method="GET",
        content="",
        content_type="",
    )
    headers = {"Authorization": sender.request_header}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    with requests.get(url, headers=headers, stream=True, timeout=30) as response:
        assert response.status_code == 200, response.text

        def blocks() -> Iterator[dict[str, str]]:
            fields: dict[str, str] = {}
            for line in response.iter_lines(decode_unicode=True):
                if line == "":
                    if fields:
                        yield fields
                    fields = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(":")
                    fields[name] = value.removeprefix(" ")

        yield blocks()
