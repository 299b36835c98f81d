"""Claims that are not reclaimed expire: the claim resolver of a server started with `--claim-timeout 2`
(docs/protocol.md, The run state machine)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import taskcluster

from tests.e2e.conftest import Server, start_server
from tests.e2e.helpers import WORKER, claim_one, create, refused, wait_for_status

CLAIM_TIMEOUT = 2

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """This module's own server: claims last two seconds."""
    running = start_server(
        module_db_url,
        tmp_path_factory.mktemp("short-claims"),
        name="short-claims",
        claim_timeout=CLAIM_TIMEOUT,
        resolver_interval=0.1,
    )
    yield running
    running.stop()


def run_states(status: dict[str, object]) -> list[tuple[object, ...]]:
    runs = status["runs"]
    assert isinstance(runs, list)
    return [(r["runId"], r["state"], r["reasonCreated"], r.get("reasonResolved")) for r in runs]


def test_claims_expire_unless_reclaimed(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    retrying = create(queue, tq, retries=1)
    final = create(queue, tq, retries=0)
    kept = create(queue, tq, retries=0)
    claims = queue.claimWork(tq, {**WORKER, "tasks": 3})["tasks"]
    assert [c["status"]["taskId"] for c in claims] == [retrying, final, kept]
    claimed_at = time.monotonic()
    credentials = {c["status"]["taskId"]: c["credentials"] for c in claims}

    # Keep reclaiming one claim while the other two run out.
    give_up = claimed_at + CLAIM_TIMEOUT + 10
    while True:
        reclaim = server.client(credentials[kept]).reclaimTask(kept, "0")
        credentials[kept] = reclaim["credentials"]
        statuses = {t: queue.status(t)["status"] for t in (retrying, final)}
        if len(statuses[retrying]["runs"]) == 2 and statuses[final]["state"] == "exception":
            break
        assert time.monotonic() < give_up, f"the claims did not expire: {statuses}"
        time.sleep(CLAIM_TIMEOUT / 5)
    assert time.monotonic() - claimed_at > CLAIM_TIMEOUT

    status = statuses[retrying]
    assert run_states(status) == [
        (0, "exception", "scheduled", "claim-expired"),
        (1, "pending", "retry", None),
    ]
    assert status["state"] == "pending"
    assert status["retriesLeft"] == 0
    assert run_states(statuses[final]) == [(0, "exception", "scheduled", "claim-expired")]
    # The reclaimed run is still running, and its worker can finish it.
    assert run_states(queue.status(kept)["status"]) == [(0, "running", "scheduled", None)]
    done = server.client(credentials[kept]).reportCompleted(kept, "0")["status"]
    assert run_states(done) == [(0, "completed", "scheduled", "completed")]

    # The workers that lost their claims must stop: reclaim and reports on run 0 conflict.
    with refused(409, "RequestConflict"):
        server.client(credentials[retrying]).reclaimTask(retrying, "0")
    with refused(409, "RequestConflict"):
        queue.reportCompleted(retrying, "0")
    with refused(409, "RequestConflict"):
        queue.reclaimTask(final, "0")

    # The retry run can be claimed; when its claim expires too, no retries are left.
    retry = claim_one(queue, tq)
    assert (retry["status"]["taskId"], retry["runId"]) == (retrying, 1)
    assert retry["status"]["retriesLeft"] == 0
    status = wait_for_status(
        queue,
        retrying,
        lambda s: s["state"] == "exception",
        what="the second claim to expire",
        timeout=CLAIM_TIMEOUT + 10,
    )
    assert run_states(status) == [
        (0, "exception", "scheduled", "claim-expired"),
        (1, "exception", "retry", "claim-expired"),
    ]
    assert queue.pendingTasks(tq)["pendingTasks"] == 0
