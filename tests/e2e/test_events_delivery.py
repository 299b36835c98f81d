"""Events reach RabbitMQ at least once, in commit order per task, and never for a change that rolled
back, even when the server is killed (`kill -9`) again and again while it works.

A real `taskyard serve --events amqp://...` runs task lifecycles for threads acting as workers and
schedulers, and is killed several times mid-run, each time restarted on the same database. A
consumer of its own (pika, an exclusive queue bound to TaskCluster's exchanges) counts what arrives.
At the end every transition the database recorded (each task's definition, and each run's pending,
running and resolution) is compared with what the consumer received: none missing, each task's in
the order they were committed, and nothing else: neither a change the queue refused (a conflicting
createTask, a report on a run already resolved), nor one a kill interrupted before it committed.

N lifecycles: TASKYARD_TEST_KILL_LIFECYCLES (default 1000).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import taskcluster
from taskcluster.exceptions import TaskclusterConnectionError, TaskclusterRestFailure

from tests.e2e.bus import EVENTS_URL, Event, Listener
from tests.e2e.conftest import start_server
from tests.e2e.faults import (
    TASK_EXCHANGES,
    TC,
    Lives,
    outbox_size,
    recorded_transitions,
    runs_of,
    transition_of,
    unresolved,
)
from tests.e2e.helpers import definition, slug

pytestmark = pytest.mark.slow

T = TypeVar("T")
LIFECYCLES = int(os.environ.get("TASKYARD_TEST_KILL_LIFECYCLES", "1000"))
KILLS = 4
CLAIMERS = 3
AHEAD = 48  # tasks created but not yet finished, at most: creation and claims interleave
GIVE_UP = 300.0  # seconds any one call may keep failing while the server is down


# The plan: what the workload does with task number i. ---------------------------------------------

CANCEL, FAIL, RETRY, CONFLICT_CREATE, CONFLICT_REPORT = range(5)


def plan(index: int) -> int:
    """0: canceled at once; 1: failed; 2: exception worker-shutdown (retried), then completed;
    3: created, then created again differently (409); 4: completed, then reported failed (409);
    the rest: completed."""
    return index % 10


# Calls that outlive the server's deaths. -----------------------------------------------------------


class Refused(Exception):
    """The queue answered 409: the change was refused (and must publish nothing)."""


INTERRUPTED = Counter[str]()  # calls that failed at least once because the server was down


def call(what: Callable[[], T]) -> T:
    """`what()`, again and again while the server is down or restarting; Refused on a 409."""
    give_up = time.monotonic() + GIVE_UP
    interrupted = False
    while True:
        try:
            return what()
        except TaskclusterRestFailure as exc:
            if exc.status_code == 409:
                raise Refused(str(exc)) from None
            if exc.status_code is None or exc.status_code < 500:
                raise
        except TaskclusterConnectionError:
            pass
        if not interrupted:
            interrupted = True
            INTERRUPTED["calls"] += 1
        if time.monotonic() > give_up:
            raise AssertionError(f"the server did not come back within {GIVE_UP} s")
        time.sleep(0.05)


# The workload. ---------------------------------------------------------------------------------------


@dataclass
class Workload:
    """Creates `count` tasks in one group and runs them through `CLAIMERS` workers, in threads."""

    client: taskcluster.Queue
    task_queue: str
    count: int
    group: str = field(default_factory=slug)
    scheduler: str = "kill-test"
    task_ids: list[str] = field(default_factory=list)
    plans: dict[str, int] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    refused: Counter[str] = field(default_factory=Counter)
    errors: list[BaseException] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def conflict_queue(self) -> str:
        return self.task_queue.split("/")[0] + "/conflict"

    def definition(self, task_queue: str, **extra: Any) -> dict[str, Any]:
        return definition(task_queue, taskGroupId=self.group, schedulerId=self.scheduler, **extra)

    def finish(self, task_id: str) -> None:
        with self.lock:
            self.finished.add(task_id)

    def refuse(self, what: str) -> None:
        with self.lock:
            self.refused[what] += 1

    def create_all(self) -> None:
        for index in range(self.count):
            while len(self.task_ids) - len(self.finished) >= AHEAD and not self.done.is_set():
                time.sleep(0.01)
            task_id = slug()
            self.plans[task_id] = plan(index)
            self.task_ids.append(task_id)
            body = self.definition(self.task_queue, retries=2)
            call(lambda: self.client.createTask(task_id, body))  # noqa: B023
            if plan(index) == CONFLICT_CREATE:
                # Another definition under the same taskId: refused, so nothing of it may be published.
                other = self.definition(self.conflict_queue, tags={"attempt": "conflict"})
                with contextlib.suppress(Refused):
                    call(lambda: self.client.createTask(task_id, other))  # noqa: B023
                    raise AssertionError("a conflicting createTask was accepted")
                self.refuse("createTask")
            if plan(index) == CANCEL:
                call(lambda: self.client.cancelTask(task_id))  # noqa: B023
                self.finish(task_id)

    def claim_until_done(self, worker_id: str) -> None:
        body = {"workerGroup": "kill", "workerId": worker_id, "tasks": 4}
        while not self.done.is_set():
            for claim in call(lambda: self.client.claimWork(self.task_queue, body))["tasks"]:
                self.work(claim["status"]["taskId"], claim["runId"])

    def work(self, task_id: str, run_id: int) -> None:
        how = self.plans.get(task_id)
        run = (task_id, str(run_id))
        try:
            if how == FAIL:
                call(lambda: self.client.reportFailed(*run))
            elif how == RETRY and run_id == 0:
                call(lambda: self.client.reportException(*run, {"reason": "worker-shutdown"}))
                return  # its next run is pending: a worker claims it
            else:
                call(lambda: self.client.reportCompleted(*run))
            if how == CONFLICT_REPORT:
                with contextlib.suppress(Refused):
                    call(lambda: self.client.reportFailed(*run))
                    raise AssertionError("a second, different resolution was accepted")
                self.refuse("reportFailed")
        except Refused:
            self.refuse("report")  # canceled meanwhile, or its claim expired while the server was down
        self.finish(task_id)

    def threads(self) -> list[threading.Thread]:
        def guarded(target: Callable[..., None], *args: Any) -> Callable[[], None]:
            def run() -> None:
                try:
                    target(*args)
                except BaseException as exc:  # reported by the test
                    self.errors.append(exc)
                    self.done.set()

            return run

        made = [threading.Thread(target=guarded(self.create_all), name="creator", daemon=True)]
        made += [
            threading.Thread(target=guarded(self.claim_until_done, f"w{n}"), name=f"w{n}", daemon=True)
            for n in range(CLAIMERS)
        ]
        return made


# Helpers. ---------------------------------------------------------------------------------------------


def first_occurrences(items: list[T]) -> list[T]:
    return list(dict.fromkeys(items))


# The test. ---------------------------------------------------------------------------------------------


def test_every_committed_transition_reaches_a_consumer_across_kill_9(
    db_url: str, tmp_path: Path, tq: str
) -> None:
    provisioner = tq.split("/")[0]
    bindings = [(TC + exchange, f"primary.*.*.*.*.{provisioner}.#") for exchange in TASK_EXCHANGES]
    listener = Listener(bindings)
    server = start_server(
        db_url,
        tmp_path / "server",
        extra_args=["--events", EVENTS_URL],
        claim_timeout=10,
    )
    INTERRUPTED.clear()
    started = time.monotonic()
    with listener, Lives(server).running() as lives:
        work = Workload(server.client(), tq, LIFECYCLES)
        threads = work.threads()
        for thread in threads:
            thread.start()
        # Kill the server whenever another fifth of the lifecycles is through: mid-run, with calls
        # in flight, transactions open and the relay publishing.
        for kill in range(1, KILLS + 1):
            while len(work.finished) < kill * LIFECYCLES // (KILLS + 1) and not work.done.is_set():
                time.sleep(0.01)
            if work.done.is_set():
                break
            lives.kill_and_restart()
        threads[0].join(GIVE_UP)
        # Done once every task is resolved: a claim whose answer a kill lost expires, and its
        # retry is claimed again.
        give_up = time.monotonic() + GIVE_UP
        while not work.errors and (len(work.finished) < LIFECYCLES or unresolved(db_url, work.group)):
            assert time.monotonic() < give_up, f"tasks left unresolved: {unresolved(db_url, work.group)}"
            time.sleep(0.2)
        work.done.set()
        for thread in threads:
            thread.join(GIVE_UP)
        assert not work.errors, work.errors
        assert lives.kills == KILLS
        driven = time.monotonic() - started

        recorded = recorded_transitions(db_url, work.group)
        assert sorted(recorded) == sorted(work.task_ids)
        expected = {(task_id, step) for task_id, steps in recorded.items() for step in steps}

        def all_there(events: list[Event]) -> bool:
            return expected <= {(e.task_id, transition_of(e)) for e in events}

        listener.wait_for(all_there, what="every committed transition", timeout=GIVE_UP)
        give_up = time.monotonic() + GIVE_UP
        while outbox_size(db_url) > 0:  # nothing held back either
            assert time.monotonic() < give_up, "the outbox never emptied"
            time.sleep(0.1)
        events = listener.wait_for(all_there, what="every committed transition")
        # Whatever the server still relays after this is checked no further.

    # None missing, nothing that was not committed (a refused change, a change a kill undid).
    received = [(e.task_id, transition_of(e)) for e in events]
    assert set(received) == expected
    conflicts = [e for e in events if e.routing_key.split(".")[6] == "conflict" or e.body["task"]["tags"]]
    assert conflicts == []
    # In commit order, per task: duplicates (at least once) come after their first delivery.
    by_task: dict[str, list[tuple[str, int | None, str]]] = {}
    for task_id, step in received:
        by_task.setdefault(task_id, []).append(step)
    for task_id, steps in recorded.items():
        assert first_occurrences(by_task[task_id]) == steps, task_id

    duplicates = len(received) - len(set(received))
    expired = sum(r["reasonResolved"] == "claim-expired" for r in runs_of(db_url, work.group))
    print(
        f"\n{LIFECYCLES} lifecycles on {db_url.split(':')[0]}, {KILLS} kills: driven in {driven:.1f} s; "
        f"{len(expected)} committed transitions, {len(received)} events received "
        f"({duplicates} duplicates); calls interrupted by a kill: {INTERRUPTED['calls']}; "
        f"refused: {dict(work.refused)}; claims whose answer a kill lost (expired): {expired}"
    )
