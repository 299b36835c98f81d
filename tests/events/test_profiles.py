"""How the profiles map the queue's events, through the in-process bus: no broker needed."""

from __future__ import annotations

import pytest

from taskyard.events.memory import MemoryBus
from taskyard.events.outbox import OutboxRelay
from taskyard.events.port import Envelope
from taskyard.events.profiles import (
    ROUTING_TAG,
    SEED_PREFIX,
    TC_PREFIX,
    Profiles,
    final_exception,
    parse_profiles,
)
from taskyard.model.errors import ConfigError
from taskyard.model.guard import ALLOW_ALL
from taskyard.model.messages import EXCHANGES, WORKER_MANAGER_EXCHANGES, Message
from taskyard.queue import claims, resolvers, tasks
from taskyard.queue.service import Queue
from taskyard.storage.port import Storage
from tests.conftest import FakeClock
from tests.queue.helpers import definition, new_id

TQ = "test-prov/test-worker"
ROOT = "https://tc.example.com"


class Seen:
    """Every envelope of every exchange the profiles publish to, through a relay and a memory bus."""

    def __init__(self, storage: Storage, profiles: Profiles) -> None:
        self.bus = MemoryBus(profiles)
        self.relay = OutboxRelay(storage, self.bus)
        self.envelopes: list[Envelope] = []
        for exchange in profiles.exchanges():
            self.bus.subscribe(exchange, "#", self.envelopes.append)

    async def collect(self, prefix: str = "") -> list[Envelope]:
        while await self.relay.relay_once():
            pass
        await self.bus.flush()
        seen = [e for e in self.envelopes if e.exchange.startswith(prefix)]
        self.envelopes.clear()
        return seen


@pytest.fixture
async def seen(queue: Queue, storage: Storage) -> Seen:
    return Seen(storage, Profiles(root_url=ROOT + "/"))


def short(envelopes: list[Envelope], prefix: str) -> list[str]:
    return [e.exchange.removeprefix(prefix) for e in envelopes]


async def test_both_profiles_are_published_from_one_stored_event(
    queue: Queue, clock: FakeClock, seen: Seen
) -> None:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now, routes=["index.x"]), guard=ALLOW_ALL)
    envelopes = await seen.collect()
    assert [e.exchange for e in envelopes] == [
        TC_PREFIX + "task-defined",
        TC_PREFIX + "task-pending",
        SEED_PREFIX + "task-pending",
    ]
    _, pending, seed_pending = envelopes
    assert pending.cc == ["route.index.x"] and seed_pending.cc == []
    assert pending.routing_key == f"primary.{task_id}.0._._.test-prov.test-worker.-.{task_id}._"
    assert seed_pending.routing_key == f"{task_id}._._._.test-prov.test-worker.-.{task_id}"
    assert seed_pending.body == {"version": "0.2.0", "status": pending.body["status"]}


async def test_seed_task_pending_keys_have_no_run_id_as_the_exchange_document_says(
    queue: Queue, clock: FakeClock, seen: Seen
) -> None:
    """The exchange document: "The special key `_` will be used for keys not available, for example
    `run_id` for a `task_pending_v1` message". TaskCluster's profile keeps its run id there."""
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now, retries=1), guard=ALLOW_ALL)
    await claims.claim_pending(queue, TQ, ("wg", "w1"), 1)
    await claims.report(queue, task_id, 0, "exception", "worker-shutdown")  # run 1 is pending
    keys = [
        (e.exchange, e.routing_key.split(".")[:4]) for e in await seen.collect() if "pending" in e.exchange
    ]
    assert keys == [
        (TC_PREFIX + "task-pending", ["primary", task_id, "0", "_"]),
        (SEED_PREFIX + "task-pending", [task_id, "_", "_", "_"]),
        (TC_PREFIX + "task-pending", ["primary", task_id, "1", "_"]),
        (SEED_PREFIX + "task-pending", [task_id, "_", "_", "_"]),
    ]


async def test_the_tc_profile_declares_every_exchange_and_seed_four() -> None:
    scheduler = ["running", "extended", "blocked", "finished"]
    hooks = ["created", "updated", "deleted"]
    assert Profiles(["tc"]).exchanges() == [TC_PREFIX + e for e in EXCHANGES] + [
        f"exchange/taskcluster-scheduler/v1/task-graph-{name}" for name in scheduler
    ] + [f"exchange/taskcluster-hooks/v1/hook-{name}" for name in hooks] + [
        f"exchange/taskcluster-worker-manager/v1/{name}" for name in WORKER_MANAGER_EXCHANGES
    ] + ["exchange/taskcluster-notify/v1/notification"]
    assert Profiles(["seed"]).exchanges() == [
        "v1/queue:task-pending",
        "v1/queue:task-running",
        "v1/queue:task-completed",
        "v1/queue:task-failed",
        "v1/scheduler:task-graph-running",
        "v1/scheduler:task-graph-blocked",
        "v1/scheduler:task-graph-finished",
    ]


async def test_one_profile_alone(queue: Queue, storage: Storage, clock: FakeClock) -> None:
    only_seed = Seen(storage, Profiles(["seed"], root_url=ROOT))
    await tasks.create_task(queue, new_id(), definition(clock.now), guard=ALLOW_ALL)
    assert short(await only_seed.collect(), SEED_PREFIX) == ["task-pending"]


async def test_seed_routing_words_follow_the_scheduler_and_group(
    queue: Queue, clock: FakeClock, seen: Seen
) -> None:
    task_id, group = new_id(), new_id()
    body = definition(clock.now, schedulerId="sched", taskGroupId=group, tags={ROUTING_TAG: "g7.build"})
    await tasks.create_task(queue, task_id, body, guard=ALLOW_ALL)
    (pending,) = await seen.collect(SEED_PREFIX)
    assert pending.routing_key == f"{task_id}._._._.test-prov.test-worker.sched.{group}.g7.build"


async def test_routing_words_that_would_overflow_the_key_are_left_out(
    queue: Queue, clock: FakeClock, seen: Seen, caplog: pytest.LogCaptureFixture
) -> None:
    task_id = new_id()
    long_queue = f"{'p' * 38}/{'w' * 38}"
    tags = {ROUTING_TAG: "x" * 200}
    await tasks.create_task(
        queue, task_id, definition(clock.now, taskQueueId=long_queue, tags=tags), guard=ALLOW_ALL
    )
    (pending,) = await seen.collect(SEED_PREFIX)
    assert pending.routing_key == f"{task_id}._._._.{'p' * 38}.{'w' * 38}.-.{task_id}"
    assert "too long" in caplog.text


async def test_seed_bodies_and_keys_for_running_completed_and_failed(
    queue: Queue, clock: FakeClock, seen: Seen
) -> None:
    done, failed = new_id(), new_id()
    await tasks.create_task(queue, done, definition(clock.now), guard=ALLOW_ALL)
    await tasks.create_task(queue, failed, definition(clock.now), guard=ALLOW_ALL)
    await claims.claim_pending(queue, TQ, ("wg", "w1"), 2)
    await claims.report(queue, done, 0, "completed", "completed")
    await claims.report(queue, failed, 0, "failed", "failed")
    envelopes = [e for e in await seen.collect(SEED_PREFIX) if "pending" not in e.exchange]
    assert short(envelopes, SEED_PREFIX) == ["task-running", "task-running", "task-completed", "task-failed"]
    completed, failure = envelopes[2:]
    assert completed.routing_key == f"{done}.0.wg.w1.test-prov.test-worker.-.{done}"
    artifacts = f"{ROOT}/api/queue/v1/task/{done}/runs/0/artifacts"
    assert completed.body == {
        "version": "0.2.0",
        "status": completed.body["status"],
        "run_id": 0,
        "worker_group": "wg",
        "worker_id": "w1",
        "logs": f"{artifacts}/public/logs/live.log",
        "result": artifacts,
    }
    assert set(failure.body) == {"version", "status", "run_id", "worker_group", "worker_id"}
    assert failure.body["status"]["state"] == "failed"


async def test_a_retried_exception_is_announced_by_the_new_runs_pending_only(
    queue: Queue, clock: FakeClock, seen: Seen
) -> None:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now, retries=1), guard=ALLOW_ALL)
    await claims.claim_pending(queue, TQ, ("wg", "w1"), 1)
    await seen.collect()
    await claims.report(queue, task_id, 0, "exception", "worker-shutdown")
    envelopes = await seen.collect()
    assert short(envelopes, "") == [
        TC_PREFIX + "task-exception",
        TC_PREFIX + "task-pending",
        SEED_PREFIX + "task-pending",
    ]
    assert envelopes[2].routing_key.startswith(f"{task_id}._._._.")
    assert [r["state"] for r in envelopes[2].body["status"]["runs"]] == ["exception", "pending"]
    # The last retry used up: the exception is final, and task-failed carries it.
    await claims.claim_pending(queue, TQ, ("wg", "w2"), 1)
    await seen.collect()
    await claims.report(queue, task_id, 1, "exception", "worker-shutdown")
    (final,) = await seen.collect(SEED_PREFIX)
    assert final.exchange == SEED_PREFIX + "task-failed"
    assert final.routing_key.startswith(f"{task_id}.1.wg.w2.")
    assert final.body["run_id"] == 1 and final.body["status"]["state"] == "exception"


@pytest.mark.parametrize("how", ["cancel", "deadline", "malformed-payload"])
async def test_final_exceptions_go_to_task_failed(
    queue: Queue, clock: FakeClock, seen: Seen, how: str
) -> None:
    task_id = new_id()
    await tasks.create_task(queue, task_id, definition(clock.now), guard=ALLOW_ALL)
    if how == "cancel":
        await tasks.cancel_task(queue, task_id, guard=ALLOW_ALL)
    elif how == "deadline":
        clock.advance(3601)
        await resolvers.resolve_deadlines(queue)
    else:
        await claims.claim_pending(queue, TQ, ("wg", "w1"), 1)
        await claims.report(queue, task_id, 0, "exception", how)
    (failure,) = [e for e in await seen.collect(SEED_PREFIX) if e.exchange.endswith("task-failed")]
    reason = failure.body["status"]["runs"][0]["reasonResolved"]
    assert reason == {"cancel": "canceled", "deadline": "deadline-exceeded"}.get(how, how)
    if how == "malformed-payload":
        assert failure.routing_key.startswith(f"{task_id}.0.wg.w1.")
        assert (failure.body["worker_group"], failure.body["worker_id"]) == ("wg", "w1")
    else:  # no worker ever had it: `_` in the key, no worker in the body
        assert failure.routing_key.startswith(f"{task_id}.0._._.")
        assert failure.body == {"version": "0.2.0", "status": failure.body["status"], "run_id": 0}


def _exception(runs: list[dict[str, str]], retries_left: int, run_id: int) -> dict[str, object]:
    return {"status": {"runs": runs, "retriesLeft": retries_left}, "runId": run_id}


def test_final_exception_reads_the_status_after_the_change_or_before_it() -> None:
    shutdown = {"state": "exception", "reasonResolved": "worker-shutdown"}
    # The status as of the resolution, without the retry run yet
    assert not final_exception(_exception([shutdown], 3, 0))
    assert final_exception(_exception([shutdown], 0, 0))
    # ... or with it: a later run means the queue retried this one.
    assert not final_exception(_exception([shutdown, {"state": "pending"}], 2, 0))
    assert final_exception(_exception([{"state": "exception", "reasonResolved": "canceled"}], 3, 0))


def test_a_profile_that_cannot_map_an_event_skips_it_without_stopping_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    odd = Message("task-pending", "primary.x", {"no": "status"}, [])
    assert [e.exchange for e in Profiles().map(odd)] == [TC_PREFIX + "task-pending"]
    assert "profile seed cannot map task-pending" in caplog.text


@pytest.mark.parametrize("text", ["", "tc,bogus", " , ", "TC"])
def test_unknown_profiles_are_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="event-profiles"):
        parse_profiles(text)


def test_profiles_parse_in_order_without_repeats() -> None:
    assert parse_profiles(" seed , tc,seed") == ("seed", "tc")
