"""The original exchange design's five consumers, each an AMQP consumer of its own bound as that
design tells it to, against a real `taskyard serve --events amqp://...` driven by TaskCluster's
Python client: the observant provisioner, the long-pulling worker, the worker with cancellation
support, the dependent task scheduler and the statistics monitor.

The four exchanges are `v1/queue:task-pending`, `-running`, `-completed` and `-failed`; routing keys
are `<taskId>.<runId>.<workerGroup>.<workerId>.<provisionerId>.<workerType>.<schedulerId>.<taskGroupId>`,
with `_` for what a message lacks (task-pending's run id and worker).
The broker is shared with other tests, so every test uses provisioners, workers and schedulers of
its own.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

import requests
import taskcluster

from tests.e2e.bus import Event, Listener, server
from tests.e2e.conftest import Server
from tests.e2e.helpers import create, definition, iso, now, signed, slug

__all__ = ["server"]  # the module's server: the events fixture, for pytest

SEED = "v1/queue:"
KEY = ("task_id", "run_id", "worker_group", "worker_id", "provisioner_id", "worker_type", "scheduler_id")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def key(event: Event) -> dict[str, str]:
    """The routing key's words, by name."""
    return dict(zip(KEY, event.routing_key.split("."), strict=False))


def claim(queue: taskcluster.Queue, task_queue: str, group: str, worker: str, count: int = 1) -> list[Any]:
    claims: list[Any] = queue.claimWork(
        task_queue, {"workerGroup": group, "workerId": worker, "tasks": count}
    )["tasks"]
    assert len(claims) == count, claims
    return claims


# The observant provisioner ------------------------------------------------------------------------------


class Provisioner:
    """Counts pending runs per worker type from task-pending and task-running alone."""

    def __init__(self, provisioner_id: str) -> None:
        pattern = f"*.*.*.*.{provisioner_id}.#"
        self.listener = Listener([(SEED + "task-pending", pattern), (SEED + "task-running", pattern)])

    def pending(self) -> Counter[str]:
        """Each worker type's tasks announced pending and not yet announced running (a task has one
        pending run at most; task-pending's key has `_` for its run id)."""
        waiting: dict[str, str] = {}
        for event in self.listener.events:
            words = key(event)
            if event.exchange == SEED + "task-pending":
                waiting[words["task_id"]] = words["worker_type"]
            else:
                waiting.pop(words["task_id"], None)
        return Counter(waiting.values())

    def heard(self, pending: int, running: int) -> None:
        def enough(events: list[Event]) -> bool:
            kinds = Counter(e.exchange.removeprefix(SEED) for e in events)
            return kinds["task-pending"] >= pending and kinds["task-running"] >= running

        self.listener.wait_for(enough, what=f"{pending} pending and {running} running")


def test_an_observant_provisioner_counts_as_many_pending_tasks_as_the_queue(
    server: Server, queue: taskcluster.Queue
) -> None:
    provisioner_id = unique("prov")
    builders, testers = f"{provisioner_id}/builder", f"{provisioner_id}/tester"
    other = create(queue, f"{unique('prov')}/builder")  # another provisioner's: never counted
    provisioner = Provisioner(provisioner_id)
    with provisioner.listener:

        def agrees() -> None:
            counted = provisioner.pending()
            for task_queue in (builders, testers):
                expected = queue.pendingTasks(task_queue)["pendingTasks"]
                assert counted[task_queue.split("/")[1]] == expected, (task_queue, counted)

        for _ in range(3):
            create(queue, builders)
        for _ in range(2):
            create(queue, testers)
        provisioner.heard(pending=5, running=0)
        agrees()
        first, _ = claim(queue, builders, "wg", "w1", 2)
        provisioner.heard(pending=5, running=2)
        agrees()  # 1 builder, 2 testers
        # A run the worker gives up on is retried: a new pending run, which the provisioner counts.
        queue.reportException(first["status"]["taskId"], first["runId"], {"reason": "worker-shutdown"})
        provisioner.heard(pending=6, running=2)
        agrees()  # 2 builders, 2 testers
        claim(queue, testers, "wg", "w2", 2)
        provisioner.heard(pending=6, running=4)
        agrees()  # 2 builders, 0 testers
        assert other not in {key(e)["task_id"] for e in provisioner.listener.events}


# The long-pulling worker --------------------------------------------------------------------------------


def test_a_long_pulling_worker_is_woken_by_a_new_task_of_its_worker_type(
    server: Server, queue: taskcluster.Queue
) -> None:
    provisioner_id = unique("prov")
    mine = f"{provisioner_id}/linux"
    with Listener([(SEED + "task-pending", f"*.*.*.*.{provisioner_id}.linux.#")]) as wake_ups:
        # Tasks of another worker type, and of another provisioner's same worker type: no wake-up.
        create(queue, f"{provisioner_id}/windows")
        create(queue, f"{unique('prov')}/linux")
        task_id = create(queue, mine)
        (woken,) = wake_ups.wait_for(lambda events: len(events) >= 1, what="a wake-up")
        # Everything committed before it was announced before it: had the others matched, they
        # would be here first.
        assert key(woken)["task_id"] == task_id and key(woken)["run_id"] == "_"
        assert woken.body["status"]["state"] == "pending"
        (claimed,) = claim(queue, mine, "wg", "w1")
        assert claimed["status"]["taskId"] == task_id


# The worker with cancellation support -------------------------------------------------------------------


def test_a_worker_hears_of_the_cancellation_of_its_own_runs(server: Server, queue: taskcluster.Queue) -> None:
    task_queue = f"{unique('prov')}/linux"
    group, worker = unique("wg"), "w1"
    for _ in range(3):
        create(queue, task_queue)
    mine = claim(queue, task_queue, group, worker, 2)
    (theirs,) = claim(queue, task_queue, group, "w2")
    with Listener([(SEED + "task-failed", f"*.*.{group}.{worker}.#")]) as cancellations:
        queue.cancelTask(theirs["status"]["taskId"])  # another worker's: not ours to hear
        canceled = mine[1]["status"]["taskId"]
        queue.cancelTask(canceled)
        (heard,) = cancellations.wait_for(lambda events: len(events) >= 1, what="the cancellation")
        words = key(heard)
        assert (words["task_id"], words["run_id"]) == (canceled, str(mine[1]["runId"]))
        assert (words["worker_group"], words["worker_id"]) == (group, worker)
        assert heard.body["run_id"] == mine[1]["runId"]
        assert (heard.body["worker_group"], heard.body["worker_id"]) == (group, worker)
        run = heard.body["status"]["runs"][mine[1]["runId"]]
        assert (run["state"], run["reasonResolved"]) == ("exception", "canceled")
        # Its own failure reaches it the same way; its completion does not (another exchange).
        failed = mine[0]["status"]["taskId"]
        queue.reportFailed(failed, mine[0]["runId"])
        events = cancellations.wait_for(lambda events: len(events) >= 2, what="the failure")
        assert [key(e)["task_id"] for e in events] == [canceled, failed]


# The dependent task scheduler ----------------------------------------------------------------------------


def test_a_dependent_task_scheduler_follows_its_own_tasks_resolutions(
    server: Server, queue: taskcluster.Queue
) -> None:
    scheduler, task_queue = unique("sched"), f"{unique('prov')}/linux"
    pattern = f"*.*.*.*.*.*.{scheduler}.#"
    bindings = [(SEED + "task-completed", pattern), (SEED + "task-failed", pattern)]
    second = slug()

    def resolutions(events: list[Event]) -> list[tuple[str, str, str]]:
        return [(e.exchange.removeprefix(SEED), key(e)["task_id"], key(e)["run_id"]) for e in events]

    def work(state: str) -> None:
        (run,) = claim(queue, task_queue, "wg", "w1")
        report = queue.reportCompleted if state == "completed" else queue.reportFailed
        report(run["status"]["taskId"], run["runId"])

    with Listener(bindings) as scheduler_bus:
        # Its graph: `second` waits for the scheduler (it lists itself) until `first` completes.
        create(queue, task_queue, schedulerId=unique("sched"))  # another scheduler's task
        first = create(queue, task_queue, schedulerId=scheduler)
        queue.createTask(second, definition(task_queue, schedulerId=scheduler, dependencies=[second]))
        work("completed")  # the other scheduler's: not heard
        work("completed")  # first
        events = scheduler_bus.wait_for(lambda events: len(events) >= 1, what="first's completion")
        assert resolutions(events) == [("task-completed", first, "0")]
        assert queue.status(second)["status"]["state"] == "unscheduled"
        queue.scheduleTask(second)
        work("failed")
        events = scheduler_bus.wait_for(lambda events: len(events) >= 2, what="second's failure")
        assert resolutions(events)[1] == ("task-failed", second, "0")
        queue.rerunTask(second)  # the scheduler's reaction to a failure: one rerun
        work("completed")
        events = scheduler_bus.wait_for(lambda events: len(events) >= 3, what="second's completion")
        assert resolutions(events) == [
            ("task-completed", first, "0"),
            ("task-failed", second, "0"),
            ("task-completed", second, "1"),
        ]
        assert {key(e)["scheduler_id"] for e in events} == {scheduler}


# The statistics monitor -------------------------------------------------------------------------------


def test_a_statistics_monitor_reads_a_completed_tasks_artifacts_from_its_result_url(
    server: Server, queue: taskcluster.Queue
) -> None:
    task_queue = f"{unique('prov')}/linux"
    with Listener([(SEED + "task-completed", "#")]) as monitor:
        task_id = create(queue, task_queue)
        (run,) = claim(queue, task_queue, "wg", "w1")
        worker = server.client(run["credentials"])
        stats = {"tests": 412, "failures": 0, "seconds": 93.5}
        upload(worker, task_id, "public/stats.json", json.dumps(stats).encode(), "application/json")
        upload(worker, task_id, "public/summary.txt", b"all green\n", "text/plain")
        worker.reportCompleted(task_id, 0)

        def ours(events: list[Event]) -> list[Event]:
            return [e for e in events if e.task_id == task_id]

        (completed,) = ours(monitor.wait_for(lambda e: ours(e), what="the completion"))
        result = completed.body["result"]
        assert result == f"{server.api}/task/{task_id}/runs/0/artifacts"
        listing = signed("GET", result, None, server.credentials)  # the monitor's own credentials
        assert listing.status_code == 200, listing.text
        names = sorted(a["name"] for a in listing.json()["artifacts"])
        assert {"public/stats.json", "public/summary.txt"} <= set(names)
        read = {
            name: requests.get(f"{result}/{name}", timeout=30) for name in names if name.startswith("public/")
        }
        assert json.loads(read["public/stats.json"].content) == stats
        assert read["public/summary.txt"].content == b"all green\n"
        assert completed.body["status"]["state"] == "completed"


def upload(worker: taskcluster.Queue, task_id: str, name: str, data: bytes, content_type: str) -> None:
    body = {"storageType": "s3", "contentType": content_type, "expires": iso(now() + timedelta(hours=1))}
    answer = worker.createArtifact(task_id, 0, name, body)
    reply = requests.put(answer["putUrl"], data=data, headers={"Content-Type": content_type}, timeout=30)
    assert reply.status_code == 200, reply.text
