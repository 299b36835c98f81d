"""A Hawk-signed request is done once (docs/protocol.md, Replayed requests): sent again as it was
captured, it is refused with 401 by the process that accepted it, by that server killed with
SIGKILL and started again on the same database, and by another process sharing its PostgreSQL
database. A replayed rerunTask used to be accepted after a restart, and made one more run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import mohawk
import pytest
import requests
import taskcluster

from tests.e2e.conftest import ROOT_CLIENT_ID, Server, start_server
from tests.e2e.faults import Lives
from tests.e2e.helpers import create, definition

REPLAYED = "Replayed request"


@dataclass(frozen=True)
class Captured:
    """A signed request, byte for byte as it was first sent: it can be sent again."""

    method: str
    path: str  # below the server's root URL
    headers: dict[str, str]
    body: str

    @classmethod
    def sign(cls, server: Server, method: str, path: str, body: str = "") -> Captured:
        sender = mohawk.Sender(
            credentials={
                "id": ROOT_CLIENT_ID,
                "key": server.access_token,
                "algorithm": "sha256",
            },
            url=server.root_url + path,
            method=method,
            content=body,
            content_type="application/json" if body else "",
        )
        # The Host it was signed for, wherever it is sent: as a load balancer passes it on.
        headers = {"Authorization": sender.request_header, "Host": server.root_url.removeprefix("http://")}
        if body:
            headers["Content-Type"] = "application/json"
        return cls(method, path, headers, body)

    def send(self, server: Server) -> requests.Response:
        """Send it to `server`: the one it was signed for, or another process of the deployment."""
        url = server.root_url + self.path
        return requests.request(self.method, url, data=self.body or None, headers=self.headers, timeout=30)


def runs(queue: taskcluster.Queue, task_id: str) -> list[str]:
    return [run["state"] for run in queue.status(task_id)["status"]["runs"]]


def resolved_task(queue: taskcluster.Queue, tq: str) -> str:
    """A task whose only run was resolved (cancelled): a rerun gives it one more run."""
    task_id = create(queue, tq)
    queue.cancelTask(task_id)
    assert runs(queue, task_id) == ["exception"]
    return task_id


def assert_replay_refused(response: requests.Response) -> None:
    assert response.status_code == 401, response.text
    assert REPLAYED in response.json()["message"], response.text


@pytest.fixture
def lives(db_url: str, tmp_path: Path) -> Iterator[Lives]:
    """One server on a fresh database, to kill and start again."""
    with Lives(start_server(db_url, tmp_path / "server", name="replays")).running() as lives:
        yield lives


def test_a_rerun_replayed_after_the_server_was_killed_is_refused(lives: Lives, tq: str) -> None:
    queue = lives.current.client()
    task_id = resolved_task(queue, tq)
    rerun = Captured.sign(lives.current, "POST", f"/api/queue/v1/task/{task_id}/rerun")
    first = rerun.send(lives.current)
    assert first.status_code == 200, first.text
    assert runs(queue, task_id) == ["exception", "pending"]
    assert_replay_refused(rerun.send(lives.current))  # the same process remembers it
    queue.cancelTask(task_id)  # run 1 resolved: a rerun accepted now would add run 2

    lives.kill_and_restart()  # SIGKILL: nothing of the process's memory survives
    assert_replay_refused(rerun.send(lives.current))
    queue = lives.current.client()
    assert runs(queue, task_id) == ["exception", "exception"], "the replayed rerun made a run"
    # The refusal is the replay's alone: the same call signed anew is accepted.
    queue.rerunTask(task_id)
    assert runs(queue, task_id) == ["exception", "exception", "pending"]


def test_a_created_task_replayed_after_a_restart_is_refused(lives: Lives, tq: str) -> None:
    """A replayed createTask would only answer the task's status (createTask is idempotent), but it
    is refused all the same: it wrote when it was first accepted."""
    task_id = taskcluster.slugId()
    body = json.dumps(definition(tq))
    put = Captured.sign(lives.current, "PUT", f"/api/queue/v1/task/{task_id}", body)
    first = put.send(lives.current)
    assert first.status_code == 200, first.text
    lives.kill()
    lives.restart()
    assert_replay_refused(put.send(lives.current))


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_rerun_replayed_to_another_process_of_the_deployment_is_refused(
    two_servers: tuple[Server, Server], tq: str
) -> None:
    first, second = two_servers
    queue = first.client()
    task_id = resolved_task(queue, tq)
    # Signed for B (its Host), accepted there, then sent to A: as a load balancer in front of both
    # would pass it on.
    rerun = Captured.sign(second, "POST", f"/api/queue/v1/task/{task_id}/rerun")
    accepted = rerun.send(second)
    assert accepted.status_code == 200, accepted.text
    queue.cancelTask(task_id)
    replayed = rerun.send(first)
    assert replayed.status_code == 401, replayed.text
    assert runs(queue, task_id) == ["exception", "exception"], "the replayed rerun made a run"
