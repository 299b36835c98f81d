"""The task-graph scheduler on SQLite and PostgreSQL: create, extend, reruns, blocking, finishing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from taskyard.events.memory import MemoryBus
from taskyard.events.outbox import OutboxRelay
from taskyard.events.port import Envelope
from taskyard.model import dates, task_graph
from taskyard.model.errors import InputError, InsufficientScopes, RequestConflict, ResourceNotFound
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, resolvers, tasks
from taskyard.queue.service import Queue
from taskyard.scheduler import graphs, reactions
from taskyard.scheduler.service import Scheduler
from taskyard.storage import open_storage
from taskyard.storage.port import Storage
from tests.conftest import FakeClock
from tests.queue.helpers import definition, new_id

TQ = "test-prov/test-worker"
WORKER = ("wg", "w1")
GRAPH_SCOPES = ["queue:create-task:*", "queue:scheduler-id:task-graph-scheduler"]
META = {"name": "g", "description": "a graph", "owner": "dev@example.com", "source": "https://example.com/g"}


def node(
    clock: FakeClock, task_id: str, requires: list[str] | None = None, reruns: int = 0, **task: Any
) -> dict[str, Any]:
    return {
        "taskId": task_id,
        "requires": requires or [],
        "reruns": reruns,
        "task": definition(clock(), **task),
    }


def graph(*nodes: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "scopes": GRAPH_SCOPES,
        "metadata": META,
        "tags": {"kind": "test"},
        "tasks": list(nodes),
        **fields,
    }


class Announced:
    """The scheduler's events as an outside subscriber sees them, in both profiles."""

    def __init__(self, storage: Storage) -> None:
        self.bus = MemoryBus()
        self.relay = OutboxRelay(storage, self.bus)
        self.seen: list[Envelope] = []
        for name in ("running", "extended", "blocked", "finished"):
            self.bus.subscribe(f"exchange/taskcluster-scheduler/v1/task-graph-{name}", "#", self.seen.append)
        for name in ("running", "blocked", "finished"):
            self.bus.subscribe(f"v1/scheduler:task-graph-{name}", "#", self.seen.append)
        self.bus.subscribe("v1/queue:task-completed", "#", self.seen.append)

    async def collect(self) -> list[Envelope]:
        while await self.relay.relay_once():
            pass
        await self.bus.flush()
        return self.seen


@pytest.fixture
async def announced(storage: Storage) -> AsyncIterator[Announced]:
    found = Announced(storage)
    yield found
    await found.bus.close()


async def create(s: Scheduler, graph_id: str, body: dict[str, Any]) -> str:
    return str((await graphs.create_task_graph(s, graph_id, body, guard=ALLOW_ALL))["status"]["state"])


async def state(queue: Queue, task_id: str) -> str:
    return str((await tasks.status(queue, task_id))["status"]["state"])


async def graph_state(s: Scheduler, graph_id: str) -> str:
    return str((await graphs.status(s, graph_id))["status"]["state"])


async def resolve(s: Scheduler, task_id: str, outcome: str = "completed", reason: str = "completed") -> None:
    """Claim `task_id`'s pending run, resolve it, and let the queue and the scheduler react."""
    found = await claims.claim_pending(s.queue, TQ, WORKER, 10)
    assert [c["status"]["taskId"] for c in found] == [task_id]
    await claims.report(s.queue, task_id, found[0]["runId"], outcome, reason)  # type: ignore[arg-type]
    await settle(s, task_id)


async def settle(s: Scheduler, task_id: str) -> None:
    await reactions.react(s, task_id)
    while await resolvers.resolve_dependencies(s.queue):
        pass


async def test_a_dependent_runs_after_what_it_requires_and_the_graph_finishes(
    scheduler: Scheduler, queue: Queue, clock: FakeClock, announced: Announced
) -> None:
    gid, a, b = new_id(), new_id(), new_id()
    assert await create(scheduler, gid, graph(node(clock, a), node(clock, b, [a]))) == "running"
    assert [await state(queue, a), await state(queue, b)] == ["pending", "unscheduled"]
    inspected = await graphs.inspect(scheduler, gid)
    assert [t["state"] for t in inspected["tasks"]] == ["scheduled", "unscheduled"]
    assert inspected["tags"] == {"kind": "test"} and inspected["scopes"] == GRAPH_SCOPES
    assert inspected["tasks"][0]["dependents"] == [b] and inspected["tasks"][1]["requiresLeft"] == [a]

    await resolve(scheduler, a)
    assert await state(queue, b) == "pending"
    assert await graph_state(scheduler, gid) == "running"
    entries = (await graphs.inspect(scheduler, gid))["tasks"]
    assert [t["state"] for t in entries] == ["completed", "scheduled"]
    assert entries[1]["requiresLeft"] == []

    await resolve(scheduler, b)
    assert await graph_state(scheduler, gid) == "finished"
    seen = [(e.exchange, e.routing_key) for e in await announced.collect() if "scheduler" in e.exchange]
    tc = f"primary._._._._._._.task-graph-scheduler.{gid}._"
    seed = f"_._._._._._.task-graph-scheduler.{gid}._"
    assert seen == [
        ("exchange/taskcluster-scheduler/v1/task-graph-running", tc),
        ("v1/scheduler:task-graph-running", seed),
        ("exchange/taskcluster-scheduler/v1/task-graph-finished", tc),
        ("v1/scheduler:task-graph-finished", seed),
    ]


async def test_every_problem_of_a_graph_is_named_in_one_400_and_nothing_is_created(
    scheduler: Scheduler, queue: Queue, clock: FakeClock
) -> None:
    gid, a, b, c = new_id(), new_id(), new_id(), new_id()
    body = graph(
        node(clock, a, schedulerId="other"),
        node(clock, b, [a, a], taskGroupId=new_id()),
        node(clock, c, [new_id()]),
    )
    with pytest.raises(InputError) as caught:
        await create(scheduler, gid, body)
    message = caught.value.message
    assert f"task {a}: schedulerId must be 'task-graph-scheduler'" in message
    assert f"task {b}: taskGroupId must be the graph id" in message
    assert f"task {b}: requires lists a task more than once" in message
    assert f"task {c}: requires" in message and "not a task of the graph" in message
    for task_id in (a, b, c):
        with pytest.raises(ResourceNotFound):
            await tasks.status(queue, task_id)
    with pytest.raises(ResourceNotFound):
        await graphs.status(scheduler, gid)


async def test_a_cycle_is_refused_naming_its_tasks(scheduler: Scheduler, clock: FakeClock) -> None:
    gid, a, b, c = new_id(), new_id(), new_id(), new_id()
    body = graph(node(clock, a), node(clock, b, [a, c]), node(clock, c, [b]))
    with pytest.raises(InputError, match="cycle") as caught:
        await create(scheduler, gid, body)
    assert b in caught.value.message and c in caught.value.message and f"{a} ->" not in caught.value.message
    with pytest.raises(InputError, match="requires itself"):
        await create(scheduler, gid, graph(node(clock, a, [a])))


async def test_task_scopes_must_be_covered_by_the_graph_scopes(
    scheduler: Scheduler, queue: Queue, clock: FakeClock
) -> None:
    gid, a, b = new_id(), new_id(), new_id()
    body = graph(node(clock, a), node(clock, b, [a], scopes=["secret:thing"]))
    with pytest.raises(InputError, match=f"task {b}: its scopes are not covered.*secret:thing"):
        await create(scheduler, gid, body)
    narrow = graph(node(clock, a), scopes=["queue:scheduler-id:task-graph-scheduler"])
    with pytest.raises(InputError, match=f"task {a}: the graph's scopes do not allow creating it"):
        await create(scheduler, gid, narrow)
    with pytest.raises(ResourceNotFound):
        await tasks.status(queue, a)


async def test_the_caller_needs_the_graph_scopes(scheduler: Scheduler, clock: FakeClock) -> None:
    seen: dict[str, object] = {}

    def guard(**values: object) -> None:
        seen.update(values)
        raise InsufficientScopes("no")

    body = graph(node(clock, new_id()), routes=["a.b"])
    with pytest.raises(InsufficientScopes):
        await graphs.create_task_graph(scheduler, new_id(), body, guard=guard)
    assert seen == {"scopes": GRAPH_SCOPES, "routes": ["a.b"]}


async def test_create_is_create_or_compare(scheduler: Scheduler, clock: FakeClock) -> None:
    gid, a = new_id(), new_id()
    body = graph(node(clock, a))
    assert await create(scheduler, gid, body) == "running"
    assert await create(scheduler, gid, body) == "running"
    with pytest.raises(RequestConflict, match="Different TaskGraph"):
        await create(scheduler, gid, {**body, "tags": {"other": "tag"}})


async def test_a_failed_task_is_rerun_then_the_graph_finishes(
    scheduler: Scheduler, queue: Queue, clock: FakeClock
) -> None:
    gid, a, b = new_id(), new_id(), new_id()
    await create(scheduler, gid, graph(node(clock, a, reruns=1), node(clock, b, [a])))
    await resolve(scheduler, a, "failed", "failed")
    assert await state(queue, a) == "pending"
    await reactions.react(scheduler, a)  # heard again: no second rerun
    entry = await graphs.inspect_task(scheduler, gid, a)
    assert (entry["reruns"], entry["rerunsLeft"], entry["state"]) == (1, 0, "scheduled")
    assert await state(queue, b) == "unscheduled"
    await resolve(scheduler, a)
    assert await state(queue, b) == "pending"
    await resolve(scheduler, b)
    assert await graph_state(scheduler, gid) == "finished"


async def test_a_task_failing_past_its_reruns_blocks_the_graph(
    scheduler: Scheduler, queue: Queue, clock: FakeClock, announced: Announced
) -> None:
    gid, a, b = new_id(), new_id(), new_id()
    await create(scheduler, gid, graph(node(clock, a, reruns=1), node(clock, b, [a])))
    await resolve(scheduler, a, "failed", "failed")
    await resolve(scheduler, a, "failed", "failed")
    assert await graph_state(scheduler, gid) == "blocked"
    assert await state(queue, b) == "unscheduled"
    blocked = [e for e in await announced.collect() if e.exchange.endswith("task-graph-blocked")]
    assert [e.body["taskId"] for e in blocked] == [a, a]  # type: ignore[index]
    assert blocked[1].body["state"] == "blocked"  # type: ignore[index]
    with pytest.raises(RequestConflict, match="only a running graph can be extended"):
        await graphs.extend_task_graph(scheduler, gid, {"tasks": [node(clock, new_id(), [a])]})


async def test_a_final_exception_blocks_and_a_retried_one_does_not(
    scheduler: Scheduler, queue: Queue, clock: FakeClock
) -> None:
    gid, a = new_id(), new_id()
    await create(scheduler, gid, graph(node(clock, a, reruns=3)))
    await resolve(scheduler, a, "exception", "worker-shutdown")
    assert await state(queue, a) == "pending"
    assert await graph_state(scheduler, gid) == "running"
    await resolve(scheduler, a, "exception", "malformed-payload")
    assert await graph_state(scheduler, gid) == "blocked"
    assert (await graphs.inspect_task(scheduler, gid, a))["rerunsLeft"] == 3


async def test_extend_adds_tasks_and_is_idempotent(
    scheduler: Scheduler, queue: Queue, clock: FakeClock
) -> None:
    gid, a, b, c = new_id(), new_id(), new_id(), new_id()
    await create(scheduler, gid, graph(node(clock, a)))
    extension = {"tasks": [node(clock, b, [a])]}
    await graphs.extend_task_graph(scheduler, gid, extension)
    await graphs.extend_task_graph(scheduler, gid, extension)
    assert len((await graphs.inspect(scheduler, gid))["tasks"]) == 2
    assert await state(queue, b) == "unscheduled"
    await resolve(scheduler, a)
    # A dependent of a task that already completed is scheduled at once.
    await graphs.extend_task_graph(scheduler, gid, {"tasks": [node(clock, c, [a])]})
    assert await state(queue, c) == "pending"
    with pytest.raises(RequestConflict, match="other requires"):
        await graphs.extend_task_graph(scheduler, gid, {"tasks": [node(clock, b)]})
    found = await claims.claim_pending(queue, TQ, WORKER, 10)
    assert sorted(c["status"]["taskId"] for c in found) == sorted([b, c])
    for claim in found:
        await claims.report(queue, claim["status"]["taskId"], 0, "completed", "completed")
        await settle(scheduler, claim["status"]["taskId"])
    assert await graph_state(scheduler, gid) == "finished"
    with pytest.raises(RequestConflict, match="is finished"):
        await graphs.extend_task_graph(scheduler, gid, {"tasks": [node(clock, new_id(), [a])]})


async def test_a_graph_is_swept_with_the_last_of_its_tasks_to_expire(
    scheduler: Scheduler, queue: Queue, clock: FakeClock, storage: Storage
) -> None:
    gid, a, b, other, c = new_id(), new_id(), new_id(), new_id(), new_id()
    day = dates.DAY

    def expiring(task_id: str, days: int, requires: list[str] | None = None) -> dict[str, Any]:
        return node(clock, task_id, requires, expires=dates.to_iso(clock() + days * day))

    await create(scheduler, gid, graph(expiring(a, 2), expiring(b, 3, [a])))
    # Extended with a task that outlives the others, the graph is kept for it.
    await graphs.extend_task_graph(scheduler, gid, {"tasks": [expiring(new_id(), 10, [b])]})
    await resolve(scheduler, a)
    await resolve(scheduler, b)
    await create(scheduler, other, graph(expiring(c, 2)))

    async def graph_rows(graph_id: str) -> int:
        async with storage.reader() as session:
            return len(await session.fetch("task_graph_task_ids", graph_id))

    clock.advance(5 * day / 1000)
    await resolvers.sweep_expired(queue)
    assert await graph_state(scheduler, gid) == "running"
    assert await graph_rows(gid) == 3
    with pytest.raises(ResourceNotFound):
        await graphs.status(scheduler, other)
    assert await graph_rows(other) == 0

    clock.advance(11 * day / 1000)
    await resolvers.sweep_expired(queue)
    with pytest.raises(ResourceNotFound):
        await graphs.inspect(scheduler, gid)
    assert await graph_rows(gid) == 0


async def test_the_label_form_substitutes_task_ids_and_carries_routing(
    scheduler: Scheduler, queue: Queue, clock: FakeClock, announced: Announced
) -> None:
    gid = new_id()
    body = {
        "routing": "nightly",
        "scopes": GRAPH_SCOPES,
        "tasks": {
            "build": {"task": {**definition(clock()), "routing": "b"}},
            "test": {
                "requires": ["build"],
                "reruns": 2,
                "task": definition(clock(), payload={"from": {"$subs": "taskId:build"}, "n": [1]}),
            },
        },
    }
    assert (await graphs.create_task_graph(scheduler, gid, body, guard=ALLOW_ALL))["status"][
        "routing"
    ] == "nightly"
    entries = (await graphs.inspect(scheduler, gid))["tasks"]
    assert [e["label"] for e in entries] == ["build", "test"]
    build, test = entries[0]["taskId"], entries[1]["taskId"]
    assert entries[1]["requires"] == [build] and entries[1]["rerunsLeft"] == 2
    assert (await tasks.task(queue, test))["payload"] == {"from": build, "n": [1]}
    # The same body again: the same taskIds, the same answer.
    await graphs.create_task_graph(scheduler, gid, body, guard=ALLOW_ALL)
    await resolve(scheduler, build)
    keys = [e.routing_key for e in await announced.collect() if e.exchange == "v1/queue:task-completed"]
    assert keys == [f"{build}.0.wg.w1.test-prov.test-worker.task-graph-scheduler.{gid}.nightly.b"]
    running = [e for e in announced.seen if e.exchange == "v1/scheduler:task-graph-running"]
    assert running[0].routing_key == f"_._._._._._.task-graph-scheduler.{gid}.nightly"
    assert running[0].body == {
        "taskGraphId": gid,
        "schedulerId": "task-graph-scheduler",
        "state": "running",
        "routing": "nightly",
    }


async def test_every_graph_task_key_has_the_documents_ten_words(
    scheduler: Scheduler, clock: FakeClock, announced: Announced
) -> None:
    """The scheduler document: a graph task's messages have the routing key `task-id`, `run-id`,
    `worker-group`, `worker-id`, `provisioner-id`, `worker-type`, `schedulerId`, `taskGraphId`,
    `taskGraph.routing`, `task.routing`; the exchange document: `_` for keys not available."""
    final, labelled, bare = new_id(), new_id(), new_id()
    a = new_id()
    await create(scheduler, final, graph(node(clock, a)))
    body = {
        "routing": "nightly",
        "scopes": GRAPH_SCOPES,
        "tasks": {
            "build": {"task": {**definition(clock()), "routing": "b"}},
            "test": {"task": definition(clock())},
        },
    }
    await graphs.create_task_graph(scheduler, labelled, body, guard=ALLOW_ALL)
    body = {"scopes": GRAPH_SCOPES, "tasks": {"only": {"task": {**definition(clock()), "routing": "b"}}}}
    await graphs.create_task_graph(scheduler, bare, body, guard=ALLOW_ALL)
    ids = {task_graph.task_id_of(labelled, "build"): (labelled, "nightly.b")}
    ids[task_graph.task_id_of(labelled, "test")] = (labelled, "nightly._")
    ids[task_graph.task_id_of(bare, "only")] = (bare, "_.b")
    ids[a] = (final, "_._")
    for _ in ids:
        (claim,) = await claims.claim_pending(scheduler.queue, TQ, WORKER, 1)
        await claims.report(scheduler.queue, claim["status"]["taskId"], 0, "completed", "completed")
    keys = {
        e.body["status"]["taskId"]: e.routing_key for e in await announced.collect() if "queue:" in e.exchange
    }
    assert keys == {
        task_id: f"{task_id}.0.wg.w1.test-prov.test-worker.task-graph-scheduler.{gid}.{words}"
        for task_id, (gid, words) in ids.items()
    }
    assert {len(key.split(".")) for key in keys.values()} == {10}


async def test_a_label_form_extend_names_the_labels_of_the_graphs_earlier_tasks(
    scheduler: Scheduler, queue: Queue, clock: FakeClock
) -> None:
    """The scheduler document's "Add tasks during execution": the tasks added require tasks of the
    graph ("Scan through required tasks and update dependents accordingly"), which the label form
    names by label; `$subs` names them too."""
    gid = new_id()
    body = {"scopes": GRAPH_SCOPES, "tasks": {"build": {"task": definition(clock())}}}
    await graphs.create_task_graph(scheduler, gid, body, guard=ALLOW_ALL)
    build = task_graph.task_id_of(gid, "build")
    extension = {
        "tasks": {
            "build": {"task": definition(clock())},  # given again, the same: accepted
            "test": {
                "requires": ["build"],
                "task": definition(clock(), payload={"from": {"$subs": "taskId:build"}}),
            },
        }
    }
    await graphs.extend_task_graph(scheduler, gid, extension)
    test = task_graph.task_id_of(gid, "test")
    entries = (await graphs.inspect(scheduler, gid))["tasks"]
    assert [(e["label"], e["requires"]) for e in entries] == [("build", []), ("test", [build])]
    assert (await tasks.task(queue, test))["payload"] == {"from": build}
    assert await state(queue, test) == "unscheduled"
    # A later extend names both earlier labels.
    later = {"tasks": {"upload": {"requires": ["build", "test"], "task": definition(clock())}}}
    await graphs.extend_task_graph(scheduler, gid, later)
    assert (await graphs.inspect_task(scheduler, gid, task_graph.task_id_of(gid, "upload")))["requires"] == [
        build,
        test,
    ]
    await resolve(scheduler, build)
    await resolve(scheduler, test)
    assert await state(queue, task_graph.task_id_of(gid, "upload")) == "pending"
    with pytest.raises(InputError, match="task x: requires label 'ghost'"):
        await graphs.extend_task_graph(
            scheduler, gid, {"tasks": {"x": {"requires": ["ghost"], "task": definition(clock())}}}
        )


async def test_an_empty_extend_changes_nothing_and_answers_the_status(
    scheduler: Scheduler, clock: FakeClock, announced: Announced
) -> None:
    gid, a = new_id(), new_id()
    await create(scheduler, gid, graph(node(clock, a)))
    before = await graphs.inspect(scheduler, gid)
    for empty in ({"tasks": []}, {"tasks": {}}):
        assert await graphs.extend_task_graph(scheduler, gid, empty) == await graphs.status(scheduler, gid)
    assert await graphs.inspect(scheduler, gid) == before
    assert not [e for e in await announced.collect() if e.exchange.endswith("task-graph-extended")]
    await resolve(scheduler, a)
    assert await graph_state(scheduler, gid) == "finished"
    with pytest.raises(RequestConflict, match="is finished"):  # as any extend of a graph not running
        await graphs.extend_task_graph(scheduler, gid, {"tasks": []})
    with pytest.raises(ResourceNotFound):
        await graphs.extend_task_graph(scheduler, new_id(), {"tasks": []})


async def test_inspect_gives_each_tasks_deadline_and_resolution(
    scheduler: Scheduler, queue: Queue, clock: FakeClock
) -> None:
    """The scheduler document's task entity: `deadline: Datetime` and
    `resolution: {resultUrl?, logsUrl?, success, completed} | null`."""
    scheduler.root_url = "https://tc.example.com"
    gid, a, b, c, d = new_id(), new_id(), new_id(), new_id(), new_id()
    await create(scheduler, gid, graph(node(clock, a), node(clock, b), node(clock, c, [a]), node(clock, d)))
    due = (await tasks.task(queue, a))["deadline"]
    before = {t["taskId"]: t for t in (await graphs.inspect(scheduler, gid))["tasks"]}
    assert {t["deadline"] for t in before.values()} == {due}
    assert {t["resolution"] is None for t in before.values()} == {True}
    found = {x["status"]["taskId"]: x["runId"] for x in await claims.claim_pending(queue, TQ, WORKER, 3)}
    assert set(found) == {a, b, d}
    await claims.report(queue, a, 0, "completed", "completed")
    await claims.report(queue, b, 0, "failed", "failed")
    await claims.report(queue, d, 0, "exception", "malformed-payload")
    runs = "https://tc.example.com/api/queue/v1/task/{}/runs/0/artifacts"
    entries = {t["taskId"]: t for t in (await graphs.inspect(scheduler, gid))["tasks"]}
    assert entries[a]["resolution"] == {
        "success": True,
        "completed": True,
        "resultUrl": runs.format(a),
        "logsUrl": runs.format(a) + "/public/logs/live.log",
    }
    assert entries[b]["resolution"] == {
        "success": False,
        "completed": True,
        "resultUrl": runs.format(b),
        "logsUrl": runs.format(b) + "/public/logs/live.log",
    }
    assert entries[d]["resolution"] == {"success": False, "completed": False}
    assert entries[c]["resolution"] is None and entries[c]["deadline"] == due
    for task_id, entry in entries.items():
        assert await graphs.inspect_task(scheduler, gid, task_id) == entry


async def test_the_graph_is_announced_running_before_its_first_task_is_pending(
    scheduler: Scheduler, storage: Storage, clock: FakeClock
) -> None:
    """The scheduler document: task-graph-running "occurs when" a task-graph is submitted; a
    listener hears of the graph before any of its tasks, in either profile."""
    bus = MemoryBus()
    relay = OutboxRelay(storage, bus)
    seen: list[str] = []
    for exchange in (
        "exchange/taskcluster-scheduler/v1/task-graph-running",
        "v1/scheduler:task-graph-running",
        "exchange/taskcluster-queue/v1/task-pending",
        "v1/queue:task-pending",
    ):
        bus.subscribe(exchange, "#", lambda e: seen.append(e.exchange))
    await create(scheduler, new_id(), graph(node(clock, new_id()), node(clock, new_id())))
    while await relay.relay_once():
        pass
    await bus.flush()
    await bus.close()
    assert seen == [
        "exchange/taskcluster-scheduler/v1/task-graph-running",
        "v1/scheduler:task-graph-running",
        *["exchange/taskcluster-queue/v1/task-pending", "v1/queue:task-pending"] * 2,
    ]


async def test_a_subs_naming_no_label_is_refused(scheduler: Scheduler, clock: FakeClock) -> None:
    body = {"tasks": {"a": {"task": definition(clock(), payload={"x": {"$subs": "taskId:nope"}})}}}
    with pytest.raises(InputError, match="task a: \\$subs 'taskId:nope' names no label"):
        await graphs.create_task_graph(scheduler, new_id(), body, guard=ALLOW_ALL)
    body = {"tasks": {"a": {"requires": ["ghost"], "task": definition(clock())}}}
    with pytest.raises(InputError, match="task a: requires label 'ghost'"):
        await graphs.create_task_graph(scheduler, new_id(), body, guard=ALLOW_ALL)


async def test_a_definition_the_queue_refuses_is_a_400_naming_the_task(
    scheduler: Scheduler, queue: Queue, clock: FakeClock
) -> None:
    gid, a, b = new_id(), new_id(), new_id()
    body = graph(node(clock, a), node(clock, b, [a], priority="urgent"))
    with pytest.raises(InputError, match=f"task {b}: .*priority"):
        await create(scheduler, gid, body)
    with pytest.raises(ResourceNotFound):
        await tasks.status(queue, a)


async def test_the_sweep_acts_on_resolutions_no_event_told_of(
    scheduler: Scheduler, queue: Queue, clock: FakeClock
) -> None:
    gid, a = new_id(), new_id()
    await create(scheduler, gid, graph(node(clock, a)))
    found = await claims.claim_pending(queue, TQ, WORKER, 1)
    await claims.report(queue, found[0]["status"]["taskId"], 0, "completed", "completed")
    assert await graph_state(scheduler, gid) == "running"
    assert await reactions.sweep(scheduler) == 1
    assert await graph_state(scheduler, gid) == "finished"
    assert await reactions.sweep(scheduler) == 0


async def test_the_sweep_runs_in_the_process_that_leads_it(
    scheduler: Scheduler, queue: Queue, clock: FakeClock, db_url: str
) -> None:
    if not db_url.startswith("postgres"):
        pytest.skip("a SQLite database has one process, which always leads")
    gid, a = new_id(), new_id()
    await create(scheduler, gid, graph(node(clock, a)))
    found = await claims.claim_pending(queue, TQ, WORKER, 1)
    await claims.report(queue, found[0]["status"]["taskId"], 0, "completed", "completed")
    leader = await open_storage(db_url)  # another process, which leads the sweep
    assert await leader.lead(reactions.SWEEPER)
    scheduler.sweep_interval = 0.05
    sweeping = asyncio.create_task(reactions.run_forever(scheduler))
    try:
        await asyncio.sleep(0.3)  # six rounds, none of them this process's
        assert await graph_state(scheduler, gid) == "running"
        await leader.close()  # this process takes over on its next round
        for _ in range(200):
            if await graph_state(scheduler, gid) == "finished":
                break
            await asyncio.sleep(0.05)
        assert await graph_state(scheduler, gid) == "finished"
    finally:
        sweeping.cancel()
        await leader.close()


async def test_a_task_may_also_depend_on_tasks_outside_the_graph(
    scheduler: Scheduler, queue: Queue, clock: FakeClock
) -> None:
    outside, gid, a = new_id(), new_id(), new_id()
    await tasks.create_task(queue, outside, definition(clock(), taskQueueId="other/queue"), guard=ALLOW_ALL)
    missing = new_id()
    with pytest.raises(InputError, match=f"task {a}: dependencies: task.s. {missing} do not exist"):
        await create(scheduler, gid, graph(node(clock, a, dependencies=[missing])))
    await create(scheduler, gid, graph(node(clock, a, dependencies=[outside])))
    assert await state(queue, a) == "unscheduled"
    found = await claims.claim_pending(queue, "other/queue", WORKER, 1)
    await claims.report(queue, found[0]["status"]["taskId"], 0, "completed", "completed")
    await settle(scheduler, outside)
    assert await state(queue, a) == "pending"


async def test_a_task_id_the_queue_already_has_is_a_409(
    scheduler: Scheduler, queue: Queue, clock: FakeClock
) -> None:
    a = new_id()
    await tasks.create_task(queue, a, definition(clock()), guard=ALLOW_ALL)
    with pytest.raises(RequestConflict, match="already used by a task of the queue"):
        await create(scheduler, new_id(), graph(node(clock, a)))


@pytest.mark.parametrize("profile", ["tc", "seed"])
async def test_the_scheduler_acts_on_the_events_of_either_profile(
    scheduler: Scheduler, queue: Queue, storage: Storage, clock: FakeClock, profile: str
) -> None:
    from taskyard.events.profiles import Profiles

    bus = MemoryBus(Profiles([profile]))
    relay = OutboxRelay(storage, bus)
    stop = reactions.subscribe(scheduler, bus, (profile,))
    try:
        gid, a = new_id(), new_id()
        await create(scheduler, gid, graph(node(clock, a, reruns=1)))
        found = await claims.claim_pending(queue, TQ, WORKER, 1)
        await claims.report(queue, a, found[0]["runId"], "failed", "failed")
        while await relay.relay_once():
            pass
        await bus.flush()
        assert await state(queue, a) == "pending"  # rerun on hearing task-failed
        found = await claims.claim_pending(queue, TQ, WORKER, 1)
        await claims.report(queue, a, found[0]["runId"], "completed", "completed")
        while await relay.relay_once():
            pass
        await bus.flush()
        assert await graph_state(scheduler, gid) == "finished"
    finally:
        stop()
        await bus.close()
