"""The index with two `taskyard serve` processes on one PostgreSQL database: a task completed
through either is indexed once, by whichever process leads the indexer, and found through both;
when the leader is killed, the other takes over and indexes what completes next."""

from __future__ import annotations

import os
import signal

import pytest
import taskcluster

from tests.e2e.conftest import RUNNING, Server
from tests.e2e.helpers import _find, claim_one, create, slug, task_queue_id, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.parametrize("db_url", ["postgres"], indirect=True)]


def complete_through(server: Server, tq: str, path: str) -> str:
    queue = server.client()
    task_id = create(queue, tq, routes=[f"index.{path}"])
    claim_one(queue, tq)
    queue.reportCompleted(task_id, 0)
    return task_id


def test_tasks_completed_through_either_process_are_indexed(two_servers: tuple[Server, Server]) -> None:
    a, b = two_servers
    tq, root = task_queue_id("index-two"), f"two{slug()[:6].lower().replace('-', 'x').replace('_', 'y')}"
    index_a, index_b = taskcluster.Index(a.options()), taskcluster.Index(b.options())
    for server, name in ((a, "via-a"), (b, "via-b")):
        task_id = complete_through(server, tq, f"{root}.{name}")
        for index in (index_a, index_b):
            found = wait_for(lambda index=index, name=name: _find(index, f"{root}.{name}"), what=name)
            assert found["taskId"] == task_id
    leads = [s for s in (a, b) if "now leads indexer" in s.log_tail(500)]
    assert len(leads) == 1, [s.log_tail(50) for s in (a, b)]
    (leader,) = leads
    other = b if leader is a else a
    assert leader.process is not None
    os.killpg(leader.process.pid, signal.SIGKILL)
    leader.process.wait(timeout=30)
    RUNNING.remove(leader)
    task_id = complete_through(other, tq, f"{root}.after-kill")
    index = taskcluster.Index(other.options())
    found = wait_for(lambda: _find(index, f"{root}.after-kill"), what="indexed by the survivor", timeout=30)
    assert found["taskId"] == task_id
