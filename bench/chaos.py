"""The fault campaign: task lifecycles under load while the server is killed, the database and the
event broker restarted, and a worker killed mid-task. What it checks must come out 0.

For each database (SQLite, then PostgreSQL on a private cluster this process starts on its own port
and data directory) it runs a real `taskyard serve --events amqp://...` publishing to a private
RabbitMQ node, and:

- drives N task lifecycles from concurrent clients (TaskCluster's Python client, in threads): two
  creators, three claimers. Each task follows a plan: completed, failed, exception then retried
  and completed, canceled at once, completed then reported failed (which must be refused), and a
  share depending on earlier tasks (`all-resolved`), so the dependency resolver works too;
- kills the server (SIGKILL, the whole process group) every `--kill-every` seconds, and at least
  `--kills` times spread over the run, restarting it each time on the same port and data;
- restarts PostgreSQL once (down for `--outage` seconds) and RabbitMQ once, mid-run;
- runs a real `taskyard worker` on a task that sleeps, SIGKILLs it mid-task, and checks that the run
  is resolved exception/claim-expired and that its retry is completed by a second worker;
- keeps a consumer (a durable queue, so it survives the broker's restart) on the queue's exchanges.

Every HTTP answer is recorded with when it was sent and answered. A 5xx or a connection error is
expected, and retried, while a fault is under way: from a kill until the server answers again, and
while PostgreSQL or RabbitMQ restarts. One whose request overlaps none of those windows is a failure.

At the end, once every task is resolved (or `--give-up` seconds passed), from the database, the
answers and the events:

    lost                  created (createTask answered 200) but missing or never resolved
    resolved twice        two different resolutions of one run accepted (answers), or published
    runs claimed twice    one run handed to two different workers (claimWork answers, task-running)
    events missing        a transition the database committed that no event told
    events not committed  an event for a transition the database does not hold
    5xx outside windows   5xx answers and connection errors outside every fault window
    500s (incidents)      500 answers anywhere, fault window or not: an outage is a 503
    inconsistencies       rules of the stored queue broken, checked at rest once the server
                          stopped (`taskyard.queue.consistency`)
    worker retry failed   the killed worker's run was not retried and completed by another

Each must be 0; the process exits 1 otherwise. The other figures (5xx inside the windows, 409s
as planned, claims expired, duplicate events, ERROR lines in the server's logs) say how hard
the faults hit. It uses the test suite's process helpers (tests/). docs/operations.md, Fault
campaign, says how to read the figures.

    .venv/bin/python bench/chaos.py                       # 2,000 tasks, both databases
    .venv/bin/python bench/chaos.py --tasks 300 --db sqlite --no-rabbitmq
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the test suite's helpers are imported from tests/
    sys.path.insert(0, str(ROOT))

import taskcluster  # noqa: E402
from taskcluster.exceptions import TaskclusterConnectionError, TaskclusterRestFailure  # noqa: E402
from tests.e2e import conftest  # noqa: E402
from tests.e2e.bus import Event, Listener  # noqa: E402
from tests.e2e.conftest import start_server  # noqa: E402
from tests.e2e.faults import (  # noqa: E402
    RESOLUTIONS,
    TASK_EXCHANGES,
    TC,
    Lives,
    Transition,
    outbox_size,
    recorded_transitions,
    task_runs,
    transition_of,
    unresolved,
)
from tests.e2e.helpers import definition  # noqa: E402
from tests.e2e.workers import WorkerProcess, sh, task  # noqa: E402
from tests.events.rabbit import PrivateRabbit, private_rabbit_unavailable  # noqa: E402
from tests.pgcluster import PgCluster  # noqa: E402
from tests.pgcluster import unavailable_reason as pg_unavailable  # noqa: E402

from taskyard.queue import consistency  # noqa: E402
from taskyard.storage import open_storage  # noqa: E402

T = TypeVar("T")
CREATORS = 2
CLAIMERS = 3
AHEAD = 40  # tasks created but not yet finished, at most, per creator
CALL_GIVE_UP = 120.0  # seconds one call may keep failing before the campaign gives up
MUST_BE_ZERO = (
    "lost",
    "resolved twice",
    "runs claimed twice",
    "events missing",
    "events not committed",
    "5xx outside windows",
    "500s (incidents)",
    "inconsistencies",
    "worker retry failed",
)


@dataclass
class Options:
    tasks: int = 2000
    kill_every: float = 3.0  # seconds between kills
    kills: int = 0  # at least this many, spread over the run by progress
    rabbitmq: bool = True
    seed: int = 1
    claim_timeout: int = 6  # seconds: lost claims expire soon, the killed worker's run too
    outage: float = 2.0  # seconds PostgreSQL stays down when it is restarted
    give_up: float = 300.0  # seconds to wait for every task to be resolved
    worker: bool = True  # the killed-worker scenario
    say: Callable[[str], None] = print


# Every answer, and the windows in which a failure is expected. -------------------------------------


@dataclass(frozen=True)
class Answer:
    what: str
    sent: float
    answered: float
    status: int  # 0: no answer (connection refused, reset, timed out)


class Refused(Exception):
    """The queue answered 409."""


@dataclass
class Record:
    answers: list[Answer] = field(default_factory=list)
    windows: list[tuple[str, float, float]] = field(default_factory=list)  # (why, from, to)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, answer: Answer) -> None:
        with self.lock:
            self.answers.append(answer)

    @contextlib.contextmanager
    def window(self, why: str) -> Iterator[None]:
        """A fault under way: failures of requests that overlap it are expected."""
        began = time.monotonic()
        try:
            yield
        finally:
            with self.lock:
                self.windows.append((why, began, time.monotonic()))

    def expected(self, answer: Answer, why: tuple[str, ...] = ("kill", "postgres", "rabbitmq")) -> bool:
        """Whether the request was under way during a window of one of the faults `why`."""
        return any(
            kind in why and began <= answer.answered and answer.sent <= ended
            for kind, began, ended in self.windows
        )

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """`fn()`, again while it fails with a 5xx or no answer; Refused on a 409, others raise."""
        give_up = time.monotonic() + CALL_GIVE_UP
        while True:
            sent = time.monotonic()
            try:
                result = fn()
            except TaskclusterRestFailure as exc:
                status = exc.status_code or 0
                self.add(Answer(what, sent, time.monotonic(), status))
                if status == 409:
                    raise Refused(str(exc)) from None
                if 0 < status < 500:
                    raise
            except TaskclusterConnectionError:
                self.add(Answer(what, sent, time.monotonic(), 0))
            else:
                self.add(Answer(what, sent, time.monotonic(), 200))
                return result
            if time.monotonic() > give_up:
                raise RuntimeError(f"{what} kept failing for {CALL_GIVE_UP:.0f} s")
            time.sleep(0.05)


# The load. ---------------------------------------------------------------------------------------


COMPLETE, FAIL, RETRY, CANCEL, DOUBLE_REPORT, DEPENDENT = [
    "complete",
    "fail",
    "retry",
    "cancel",
    "double",
    "dependent",
]
PLANS = [DEPENDENT, COMPLETE, FAIL, RETRY, COMPLETE, CANCEL, DEPENDENT, DOUBLE_REPORT, COMPLETE, COMPLETE]


@dataclass
class Load:
    """N tasks in one group, created by CREATORS threads and run by CLAIMERS threads."""

    client: taskcluster.Queue
    record: Record
    task_queue: str
    count: int
    rng: random.Random
    group: str = field(default_factory=lambda: str(taskcluster.slugId()))
    plans: dict[str, str] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)  # createTask answered 200
    finished: set[str] = field(default_factory=set)  # resolved as planned, as far as the clients know
    accepted: dict[tuple[str, int], set[str]] = field(default_factory=lambda: defaultdict(set))
    claimed: dict[tuple[str, int], set[str]] = field(default_factory=lambda: defaultdict(set))
    refused: Counter[str] = field(default_factory=Counter)
    errors: list[BaseException] = field(default_factory=list)
    creating: int = CREATORS
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def create_share(self, index: int) -> None:
        mine = range(index, self.count, CREATORS)
        for n in mine:
            while len(self.created) - len(self.finished) >= AHEAD * CREATORS and not self.done.is_set():
                time.sleep(0.01)
            if self.done.is_set():
                return
            self.create(PLANS[n % len(PLANS)])
        with self.lock:
            self.creating -= 1

    def create(self, plan: str) -> None:
        task_id = str(taskcluster.slugId())
        extra: dict[str, Any] = {}
        with self.lock:
            earlier = self.created[-50:]
        if plan == DEPENDENT and earlier:
            extra = {
                "dependencies": self.rng.sample(earlier, min(2, len(earlier))),
                "requires": "all-resolved",
            }
        body = definition(self.task_queue, taskGroupId=self.group, retries=5, **extra)
        with self.lock:
            self.plans[task_id] = plan
        self.record.call("createTask", lambda: self.client.createTask(task_id, body))
        with self.lock:
            self.created.append(task_id)
        if plan == CANCEL:
            self.record.call("cancelTask", lambda: self.client.cancelTask(task_id))
            self.finish(task_id)

    def finish(self, task_id: str) -> None:
        with self.lock:
            self.finished.add(task_id)

    def claim_until_done(self, worker_id: str) -> None:
        body = {"workerGroup": "chaos", "workerId": worker_id, "tasks": 4}
        while not self.done.is_set():
            claims = self.record.call("claimWork", lambda: self.client.claimWork(self.task_queue, body))
            for claim in claims["tasks"]:
                run = (claim["status"]["taskId"], int(claim["runId"]))
                with self.lock:
                    self.claimed[run].add(worker_id)
                self.work(*run)

    def report(self, task_id: str, run_id: int, how: str) -> None:
        """Report the run resolved `how`; note it if accepted (and not if refused: 409)."""
        calls = {
            "completed": lambda: self.client.reportCompleted(task_id, str(run_id)),
            "failed": lambda: self.client.reportFailed(task_id, str(run_id)),
            "exception": lambda: self.client.reportException(
                task_id, str(run_id), {"reason": "worker-shutdown"}
            ),
        }
        try:
            self.record.call(f"report{how.title()}", calls[how])
        except Refused:
            with self.lock:
                self.refused[f"report{how.title()}"] += 1
            return
        with self.lock:
            self.accepted[(task_id, run_id)].add(how)

    def work(self, task_id: str, run_id: int) -> None:
        plan = self.plans.get(task_id)
        if plan == RETRY and run_id == 0:
            self.report(task_id, run_id, "exception")  # its retry is pending: a claimer takes it
            return
        self.report(task_id, run_id, "failed" if plan == FAIL else "completed")
        if plan == DOUBLE_REPORT:
            self.report(task_id, run_id, "failed")  # a second, different resolution: must be refused
        self.finish(task_id)

    def threads(self) -> list[threading.Thread]:
        def guarded(target: Callable[..., None], *args: Any) -> Callable[[], None]:
            def run() -> None:
                try:
                    target(*args)
                except BaseException as exc:  # the campaign reports it
                    self.errors.append(exc)
                    self.done.set()

            return run

        made = [
            threading.Thread(target=guarded(self.create_share, n), name=f"creator{n}", daemon=True)
            for n in range(CREATORS)
        ]
        made += [
            threading.Thread(target=guarded(self.claim_until_done, f"c{n}"), name=f"c{n}", daemon=True)
            for n in range(CLAIMERS)
        ]
        return made


# A worker killed mid-task. -------------------------------------------------------------------------


@dataclass
class KilledWorker:
    """A real `taskyard worker` claims a task that sleeps until a marker file exists, and is
    SIGKILLed while it runs; once the run's claim expired, a second worker must complete the retry."""

    lives: Lives
    record: Record
    task_queue: str
    group: str
    work_root: Path
    verdict: str = ""  # "" while running; "ok" or what went wrong
    task_id: str = ""

    def run(self) -> None:
        self.work_root.mkdir(parents=True, exist_ok=True)
        try:
            self.verdict = self.scenario()
        except BaseException as exc:  # the campaign reports it
            self.verdict = f"{type(exc).__name__}: {exc}"
        if self.verdict != "ok" and self.task_id:  # resolve it, so the campaign need not wait for it
            client = self.lives.current.client()
            with contextlib.suppress(Exception):
                self.record.call("cancelTask", lambda: client.cancelTask(self.task_id))

    def status(self) -> dict[str, Any]:
        client = self.lives.current.client()
        answer: dict[str, Any] = self.record.call("status", lambda: client.status(self.task_id))
        return dict(answer["status"])

    def wait(self, condition: Callable[[dict[str, Any]], bool], what: str, timeout: float) -> dict[str, Any]:
        give_up = time.monotonic() + timeout
        while True:
            status = self.status()
            if condition(status):
                return status
            if time.monotonic() > give_up:
                raise AssertionError(f"{what} did not happen within {timeout:.0f} s: {status}")
            time.sleep(0.2)

    def worker(self, name: str) -> WorkerProcess:
        work_dir = self.work_root / name
        return WorkerProcess(
            self.lives.current, self.task_queue, work_dir, args=["--worker-id", name], name=name
        ).start()

    def scenario(self) -> str:
        marker = self.work_root / "second-worker"
        self.task_id = str(taskcluster.slugId())
        body = task(
            self.task_queue,
            # Runs until the marker appears (10 min at most): the killed worker's command, in a
            # session of its own out of reach of the kill, then ends too instead of lingering.
            {
                "command": sh(
                    f"i=0; until test -e {marker} || [ $i -ge 3000 ]; do i=$((i+1)); sleep 0.2; done"
                )
            },
            retries=3,
            taskGroupId=self.group,
        )
        client = self.lives.current.client()
        self.record.call("createTask", lambda: client.createTask(self.task_id, body))
        first = self.worker("killed")
        try:
            status = self.wait(lambda s: s["state"] == "running", "the first worker's claim", 120)
            time.sleep(1.0)  # its command is under way
            held = len(status["runs"]) - 1
        finally:
            first.stop()  # SIGKILL, the whole process group
        status = self.wait(
            lambda s: s["runs"][held]["state"] != "running", "the killed worker's claim to expire", 120
        )
        run = status["runs"][held]
        if (run["state"], run.get("reasonResolved")) != ("exception", "claim-expired"):
            return f"the killed worker's run ended {run['state']}/{run.get('reasonResolved')}"
        marker.touch()
        second = self.worker("second")
        try:
            status = self.wait(lambda s: s["state"] in RESOLUTIONS, "the retry's resolution", 120)
        finally:
            second.stop()
        last = status["runs"][-1]
        if (last["state"], last["reasonCreated"], last.get("workerId")) != ("completed", "retry", "second"):
            return f"the retry ended {last}"
        return "ok"


# The faults. -----------------------------------------------------------------------------------------


@dataclass
class Faults:
    """Kills the server every `kill_every` seconds (and at least `kills` times, spread over the run),
    restarts PostgreSQL at 40% of the run and RabbitMQ at 60%, until `load` is done."""

    lives: Lives
    load: Load
    record: Record
    options: Options
    cluster: PgCluster | None
    rabbit: PrivateRabbit | None
    started: float = field(default_factory=time.monotonic)
    pg_restarts: int = 0
    rabbit_restarts: int = 0

    def say(self, text: str) -> None:
        done = len(self.load.finished)
        self.options.say(f"  [{time.monotonic() - self.started:6.1f} s] {done}/{self.load.count} {text}")

    def kill(self) -> None:
        with self.record.window("kill"):
            began = time.monotonic()
            self.lives.kill()
            self.lives.restart()
        self.say(
            f"killed the server ({self.lives.kills}); answering again after {time.monotonic() - began:.1f} s"
        )

    def restart_postgres(self) -> None:
        assert self.cluster is not None
        with self.record.window("postgres"):
            began = time.monotonic()
            self.cluster.stop("fast")  # every connection dropped, transactions in flight lost
            time.sleep(self.options.outage)  # down for a while: calls fail, then wait for it
            self.cluster.start()
        self.pg_restarts += 1
        self.say(f"restarted PostgreSQL in {time.monotonic() - began:.1f} s")

    def restart_rabbit(self) -> None:
        assert self.rabbit is not None
        with self.record.window("rabbitmq"):
            began = time.monotonic()
            self.rabbit.stop()
            self.rabbit.start()
        self.rabbit_restarts += 1
        self.say(f"restarted RabbitMQ in {time.monotonic() - began:.1f} s")

    def run(self, until: Callable[[], bool]) -> None:
        """Until `until()`: PostgreSQL's restart holds the kills back (a server can't start without
        its database); RabbitMQ's runs beside them, in a thread of its own."""
        count, options = self.load.count, self.options
        next_kill = time.monotonic() + options.kill_every
        broker: threading.Thread | None = None
        broker_failed: list[BaseException] = []

        def restart_rabbit() -> None:
            try:
                self.restart_rabbit()
            except BaseException as exc:  # the campaign can't finish as planned: say so, don't wait
                broker_failed.append(exc)

        while not until() or (broker is not None and broker.is_alive()):
            if broker_failed:
                raise RuntimeError(f"restarting RabbitMQ failed: {broker_failed[0]}") from broker_failed[0]
            finished = len(self.load.finished)
            if self.cluster is not None and not self.pg_restarts and finished >= 0.4 * count:
                self.say("restarting PostgreSQL")
                self.restart_postgres()
            elif self.rabbit is not None and broker is None and finished >= 0.6 * count:
                self.say("restarting RabbitMQ")
                broker = threading.Thread(target=restart_rabbit, name="rabbit-restart", daemon=True)
                broker.start()
            elif time.monotonic() >= next_kill or (
                self.lives.kills < options.kills
                and finished >= (self.lives.kills + 1) * count / (options.kills + 1)
            ):
                self.kill()
                next_kill = time.monotonic() + options.kill_every
            else:
                time.sleep(0.05)

    def planned_done(self) -> bool:
        """Every fault planned happened: the kills asked for, PostgreSQL's and RabbitMQ's restarts."""
        return (
            self.lives.kills >= self.options.kills
            and (self.cluster is None or self.pg_restarts > 0)
            and (self.rabbit is None or self.rabbit_restarts > 0)
        )


# The figures. -----------------------------------------------------------------------------------------


def events_figures(
    recorded: dict[str, list[Transition]], events: list[Event], task_ids: set[str]
) -> dict[str, int]:
    received = [(e.task_id, transition_of(e)) for e in events if e.task_id in task_ids]
    expected = {(task_id, step) for task_id, steps in recorded.items() for step in steps}
    resolutions: dict[tuple[str, int], set[str]] = defaultdict(set)
    runners: dict[tuple[str, int], set[str]] = defaultdict(set)
    for event in events:
        exchange = event.exchange.removeprefix(TC)
        if event.task_id in task_ids and exchange in RESOLUTIONS.values():
            resolutions[(event.task_id, int(event.body["runId"]))].add(exchange)
        if event.task_id in task_ids and exchange == "task-running":
            runners[(event.task_id, int(event.body["runId"]))].add(str(event.body["workerId"]))
    return {
        "events missing": len(expected - set(received)),
        "events not committed": len(set(received) - expected),
        "events received": len(received),
        "duplicates": len(received) - len(set(received)),
        "resolved twice (events)": sum(len(s) > 1 for s in resolutions.values()),
        "claimed twice (events)": sum(len(s) > 1 for s in runners.values()),
    }


def figures(
    load: Load, record: Record, db_url: str, listener: Listener | None, worker: KilledWorker | None
) -> dict[str, Any]:
    runs = task_runs(db_url, load.group)
    created = set(load.created)
    left = set(unresolved(db_url, load.group))
    lost = sorted(t for t in created if t not in runs or t in left)
    result: dict[str, Any] = {
        "tasks created": len(created),
        "lost": len(lost),
        "resolved twice": sum(len(hows) > 1 for hows in load.accepted.values()),
        "runs claimed twice": sum(len(workers) > 1 for workers in load.claimed.values()),
    }
    if listener is not None:
        ids = created | ({worker.task_id} if worker else set())
        ev = events_figures(recorded_transitions(db_url, load.group), listener.events, ids)
        result["events missing"] = ev["events missing"]
        result["events not committed"] = ev["events not committed"]
        result["resolved twice"] += ev["resolved twice (events)"]
        result["runs claimed twice"] += ev["claimed twice (events)"]
        result["events received (duplicates)"] = f"{ev['events received']} ({ev['duplicates']})"
    result["500s (incidents)"] = sum(a.status == 500 for a in record.answers)
    failures = [a for a in record.answers if a.status == 0 or a.status >= 500]
    outside = [a for a in failures if not record.expected(a)]
    result["5xx outside windows"] = len(outside)
    result["5xx inside windows"] = len(failures) - len(outside)
    if listener is not None:  # the API does not need the broker: expect none
        result["5xx in RabbitMQ's window alone"] = sum(
            not record.expected(a, ("kill", "postgres")) for a in failures if record.expected(a)
        )
    result["answers"] = len(record.answers)
    result["refused (409), as planned"] = sum(load.refused.values())
    result["claims expired"] = sum(
        r.get("reasonResolved") == "claim-expired" for task in runs.values() for r in task
    )
    if worker is not None:
        result["worker retry failed"] = int(worker.verdict != "ok")
    result["_lost"] = lost[:5]
    result["_outside"] = outside[:5]
    result["_worker"] = worker.verdict if worker else ""
    return result


# One database's campaign. -------------------------------------------------------------------------


def campaign(
    kind: str,
    options: Options,
    work_root: Path,
    *,
    cluster: PgCluster | None = None,
    rabbit: PrivateRabbit | None = None,
) -> dict[str, Any]:
    """The campaign on `kind` ("sqlite", or "postgres" on `cluster`): its figures."""
    say = options.say
    provisioner = f"chaos-{uuid.uuid4().hex[:8]}"
    db_url = cluster.url() if cluster is not None else f"sqlite:///{work_root / 'taskyard.sqlite3'}"
    extra = ["--events", rabbit.url() + "%2F"] if rabbit is not None else []
    record = Record()
    with contextlib.ExitStack() as stack:
        listener = None
        if rabbit is not None:
            bindings = [(TC + exchange, f"primary.*.*.*.*.{provisioner}.#") for exchange in TASK_EXCHANGES]
            listener = Listener(bindings, rabbit.url(), durable_queue=f"{provisioner}-events")
            stack.enter_context(listener)
        server = start_server(
            db_url,
            work_root / "server",
            name=f"chaos-{kind}",
            claim_timeout=options.claim_timeout,
            extra_args=extra,
        )
        lives = stack.enter_context(Lives(server).running())
        events = extra[1] if extra else "in memory"
        say(f"  taskyard serve on {server.root_url}, {db_url.split(':')[0]}, events: {events}")
        load = Load(
            server.client(), record, f"{provisioner}/load", options.tasks, random.Random(options.seed)
        )
        worker = None
        threads = load.threads()
        if options.worker:
            worker = KilledWorker(lives, record, f"{provisioner}/worker", load.group, work_root / "workers")
            threads.append(threading.Thread(target=worker.run, name="killed-worker", daemon=True))
        for thread in threads:
            thread.start()
        started = time.monotonic()
        faults = Faults(lives, load, record, options, cluster, rabbit, started=started)

        def through() -> bool:
            if load.done.is_set():
                return True
            if not faults.planned_done() or (worker is not None and not worker.verdict):
                return False
            return load.creating == 0 and len(load.finished) >= len(load.created)

        faults.run(through)
        faults.say(f"the load is through: {len(load.created)} created; waiting for every task to resolve")
        left = wait_resolved(db_url, load.group, options.give_up)
        load.done.set()
        for thread in threads:
            thread.join(CALL_GIVE_UP)
        faults.say(f"{'every task resolved' if not left else f'{len(left)} tasks unresolved'}")
        if load.errors:
            raise RuntimeError(f"the load failed: {load.errors[0]!r}") from load.errors[0]
        if listener is not None:
            wait_events(db_url, load.group, listener, options.give_up)
            faults.say(
                f"events: {len(listener.events)} received, consumer reconnected {listener.reconnections}x"
            )
        result = figures(load, record, db_url, listener, worker)
        lives.current.stop()  # the database at rest, for the consistency check
        found = asyncio.run(inconsistencies(db_url))
        result["inconsistencies"] = len(found)
        result["_inconsistencies"] = found[:5]
        errors = log_errors(work_root / "server")
        result["server log errors"] = len(errors)
        result["_errors"] = errors[:3]
        result["server kills"] = lives.kills
        result["PostgreSQL restarts"] = faults.pg_restarts if cluster is not None else "-"
        result["RabbitMQ restarts"] = faults.rabbit_restarts if rabbit is not None else "-"
        result["seconds"] = round(time.monotonic() - started)
        return result


async def inconsistencies(db_url: str) -> list[str]:
    """The queue's rules the database breaks (`taskyard.queue.consistency`), one line each."""
    storage = await open_storage(db_url)
    try:
        return await consistency.problems(storage)
    finally:
        await storage.close()


def log_errors(server_dir: Path) -> list[str]:
    """The ERROR lines in the server processes' logs (every life's), each after its file's name."""
    return [
        f"{log.name}: {line}"
        for log in sorted(server_dir.glob("server*.log"))
        for line in log.read_text(errors="replace").splitlines()
        if line.split(" ", 3)[2:3] == ["ERROR"]
    ]


def wait_resolved(db_url: str, group: str, give_up: float) -> list[str]:
    """Wait until no task of `group` is unresolved (claims a kill lost expire, then are retried)."""
    deadline = time.monotonic() + give_up
    while True:
        try:
            left = unresolved(db_url, group)
        except Exception:  # the database restarting: ask again
            left = ["?"]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def wait_events(db_url: str, group: str, listener: Listener, give_up: float) -> None:
    """Wait until the outbox is empty and an event arrived for every committed transition."""
    expected = {(t, step) for t, steps in recorded_transitions(db_url, group).items() for step in steps}
    deadline = time.monotonic() + give_up
    while outbox_size(db_url) > 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(AssertionError):  # what is missing then is counted
        listener.wait_for(
            lambda events: expected <= {(e.task_id, transition_of(e)) for e in events},
            what="every committed transition",
            timeout=max(1.0, deadline - time.monotonic()),
        )


# The command. -----------------------------------------------------------------------------------------


def table(results: dict[str, dict[str, Any]]) -> str:
    rows = [key for key in next(iter(results.values())) if not key.startswith("_")]
    width = max(len(r) for r in rows) + 2
    lines = [f"{'':{width}}" + "".join(f"{kind:>12}" for kind in results)]
    for row in rows:
        mark = " (must be 0)" if row in MUST_BE_ZERO else ""
        cells = "".join(f"{results[kind].get(row, '-')!s:>12}" for kind in results)
        lines.append(f"{row:{width}}{cells}{mark}")
    return "\n".join(lines)


def failures(result: dict[str, Any]) -> dict[str, Any]:
    """The must-be-0 figures that are not 0."""
    return {key: result[key] for key in MUST_BE_ZERO if result.get(key, 0) != 0}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--tasks", type=int, default=2000, help="task lifecycles per database (2000)")
    p.add_argument("--kill-every", type=float, default=3.0, help="seconds between server kills (3)")
    p.add_argument("--kills", type=int, default=0, help="at least this many kills, spread over the run")
    p.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    p.add_argument("--no-rabbitmq", action="store_true", help="events in memory: no broker, no event check")
    p.add_argument("--seed", type=int, default=1, help="the load's random choices (dependencies)")
    p.add_argument("--claim-timeout", type=int, default=6, help="the server's --claim-timeout, seconds (6)")
    p.add_argument("--outage", type=float, default=2.0, help="seconds PostgreSQL stays down (2)")
    p.add_argument("--give-up", type=float, default=300.0, help="seconds to wait for every task to resolve")
    p.add_argument(
        "--keep", action="store_true", help="keep the data directories (servers' and workers' logs)"
    )
    return p.parse_args(argv)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    import signal

    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # clean up as on Ctrl-C: servers, cluster, broker
    options = Options(
        tasks=args.tasks,
        kill_every=args.kill_every,
        kills=args.kills,
        rabbitmq=not args.no_rabbitmq,
        seed=args.seed,
        claim_timeout=args.claim_timeout,
        outage=args.outage,
        give_up=args.give_up,
    )
    kinds = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    results: dict[str, dict[str, Any]] = {}
    try:
        with contextlib.ExitStack() as stack:
            rabbit = stack.enter_context(private_rabbit()) if options.rabbitmq else None
            for kind in kinds:
                print(
                    f"== {kind}: {options.tasks} tasks, a kill every {options.kill_every:g} s ==", flush=True
                )
                root = Path(tempfile.mkdtemp(prefix=f"taskyard-chaos-{kind}-"))
                try:
                    with private_cluster() if kind == "postgres" else contextlib.nullcontext() as cluster:
                        results[kind] = campaign(kind, options, root, cluster=cluster, rabbit=rabbit)
                finally:
                    result = results.get(kind)
                    if args.keep or result is None or failures(result) or result["server log errors"]:
                        print(f"  kept {root} (the servers' and workers' logs)")
                    else:
                        shutil.rmtree(root, ignore_errors=True)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        for running in list(conftest.RUNNING):
            running.stop()
    print("\n" + table(results))
    bad = {kind: failures(result) for kind, result in results.items() if failures(result)}
    for kind, result in results.items():
        for key, what in (
            ("_lost", "lost"),
            ("_outside", "outside windows"),
            ("_worker", "worker"),
            ("_inconsistencies", "inconsistent"),
            ("_errors", "server log"),
        ):
            if result[key] and result[key] != "ok":
                print(f"  {kind} {what}: {result[key]}")
    print("\nFAILED: " + str(bad) if bad else "\nevery must-be-0 figure is 0")
    return 1 if bad else 0


@contextlib.contextmanager
def private_rabbit() -> Iterator[PrivateRabbit]:
    reason = private_rabbit_unavailable()
    if reason is not None:
        raise SystemExit(f"{reason} (or run with --no-rabbitmq)")
    base = Path(tempfile.mkdtemp(prefix="taskyard-chaos-rabbit-"))
    node = PrivateRabbit(base)
    node.prepare()
    node.start()
    try:
        yield node
    finally:
        with contextlib.suppress(Exception):
            node.stop()
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def private_cluster() -> Iterator[PgCluster]:
    reason = pg_unavailable()
    if reason is not None:
        raise SystemExit(f"{reason} (or run with --db sqlite)")
    with PgCluster.create() as cluster:
        yield cluster


if __name__ == "__main__":
    sys.exit(main())
