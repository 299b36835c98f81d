"""The run state machine (model/runs.py) against docs/protocol.md's rules, The run state machine.

Two kinds of test. A table: each task state, each operation, the documented outcome. And
properties: random sequences of operations on a task (hypothesis), with the rules that must hold
after every step checked against every record the machine produces.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskyard.model import dates, runs
from taskyard.model.errors import RequestConflict
from taskyard.model.runs import MAX_RUNS, RESOLVED, Change, TaskRecord
from taskyard.model.status import ReasonResolved, ResolvedState, RunStatus
from tests.model.properties import PROPERTIES

WORKER = ("group", "worker")
OTHER_WORKER = ("group", "other")
START = 1_000_000
# The exception reasons that retry, and the reasonCreated of the retry run (docs/protocol.md, Retries).
RETRIES = {"worker-shutdown": "retry", "claim-expired": "retry", "intermittent-task": "task-retry"}
CLAIM_FOR = 60_000


def record(retries: int = 1) -> TaskRecord:
    """A task with no runs, as createTask makes it (retriesLeft = the definition's retries)."""
    definition = {
        "provisionerId": "p",
        "workerType": "w",
        "deadline": "2030-01-01T00:00:00.000Z",
        "expires": "2031-01-01T00:00:00.000Z",
        "retries": retries,
        "routes": ["index.a"],
    }
    return TaskRecord(
        task_id="task",
        task_group_id="group",
        scheduler_id="-",
        project_id="none",
        task_queue_id="p/w",
        priority="lowest",
        requires="all-completed",
        retries_left=retries,
        created=0,
        deadline=10**12,
        expires=2 * 10**12,
        definition=definition,  # type: ignore[arg-type]
    )


# ---------------------------------------------------------------------------------------------------
# Operations: what a request or a resolver asks of the machine


@dataclass(frozen=True)
class Op:
    """One operation. `run` is relative to the latest run (0: the latest, -1: the one before, 1:
    one that does not exist yet); `worker`, `resolution` and `reason` are used where they apply."""

    name: str
    run: int = 0
    worker: tuple[str, str] = WORKER
    resolution: tuple[ResolvedState, ReasonResolved] = ("completed", "completed")
    reason: ReasonResolved = "canceled"

    def run_id(self, rec: TaskRecord) -> int:
        return max(0, len(rec.runs) - 1 + self.run)


RESOLUTIONS: list[tuple[ResolvedState, ReasonResolved]] = [
    ("completed", "completed"),
    ("failed", "failed"),
    *(("exception", reason) for reason in runs.EXCEPTION_REASONS),
]


def apply(rec: TaskRecord, op: Op, now: int) -> Change:
    """`op` on `rec` as the queue's services and resolvers call the machine."""
    run_id = op.run_id(rec)
    if op.name == "schedule":
        return runs.schedule(rec, now)
    if op.name == "claim":
        return runs.claim(rec, run_id, op.worker, now, now + CLAIM_FOR)
    if op.name == "reclaim":
        return runs.reclaim(rec, run_id, now + CLAIM_FOR)
    if op.name == "report":
        state, reason = op.resolution
        return runs.resolve(rec, run_id, state, reason, now)
    if op.name == "claim-expired":  # the claim resolver: only a running task's latest run
        if rec.state != "running":
            return Change(rec, changed=False)
        return runs.resolve(rec, len(rec.runs) - 1, "exception", "claim-expired", now)
    if op.name == "cancel":  # cancelTask (canceled), the deadline resolver (deadline-exceeded)
        return runs.cancel(rec, now, op.reason)
    assert op.name == "rerun"
    return runs.rerun(rec, now)


run_offsets = st.sampled_from([0, 0, 0, 0, -1, -2, 1])
claims = st.builds(Op, st.just("claim"), run_offsets, st.sampled_from([WORKER, WORKER, OTHER_WORKER]))
reports = st.builds(Op, st.just("report"), run_offsets, resolution=st.sampled_from(RESOLUTIONS))
# Claims and reports twice as likely as the rest, so that sequences get far: retries, many runs.
operations = st.one_of(
    st.builds(Op, st.just("schedule")),
    claims,
    claims,
    st.builds(Op, st.just("reclaim"), run_offsets),
    reports,
    reports,
    st.builds(Op, st.just("claim-expired")),
    st.builds(Op, st.just("cancel"), reason=st.sampled_from(["canceled", "deadline-exceeded"])),
    st.builds(Op, st.just("rerun")),
)
# A definition's retries (0 to 49), mostly few, so that they run out.
retry_counts = st.one_of(st.integers(0, 3), st.integers(0, 49))


def with_runs(retries: int, count: int) -> TaskRecord:
    """A task with `count` runs, all but the latest failed and the latest pending (0: no runs)."""
    rec = record(retries)
    now = START
    for run_id in range(count):
        rec = (runs.schedule(rec, now) if run_id == 0 else runs.rerun(rec, now)).record
        if run_id < count - 1:
            rec = runs.claim(rec, run_id, WORKER, now, now + CLAIM_FOR).record
            rec = runs.resolve(rec, run_id, "failed", "failed", now).record
    return rec


# ---------------------------------------------------------------------------------------------------
# The rules, from docs/protocol.md


def expected(rec: TaskRecord, op: Op) -> tuple[str, list[str]]:
    """What `op` must do to `rec`: ("conflict" | "unchanged" | "changed", the run states after it)."""
    states = [run["state"] for run in rec.runs]
    n, latest = len(states), states[-1] if states else None
    if op.name == "schedule":
        return ("changed", ["pending"]) if n == 0 else ("unchanged", states)
    if op.name == "claim":
        return _expected_claim(rec, op, states)
    if op.name == "reclaim":
        fits = op.run_id(rec) == n - 1 and latest == "running"
        return ("changed", states) if fits else ("conflict", states)
    if op.name == "report":
        return _expected_report(rec, op.run_id(rec), *op.resolution, states)
    if op.name == "claim-expired":
        if latest != "running":
            return "unchanged", states
        return _expected_report(rec, n - 1, "exception", "claim-expired", states)
    if op.name == "cancel":
        if n == 0:
            return "changed", ["exception"]
        return ("unchanged", states) if latest in RESOLVED else ("changed", [*states[:-1], "exception"])
    assert op.name == "rerun"
    if latest in ("pending", "running"):
        return "unchanged", states
    return ("conflict", states) if n >= MAX_RUNS else ("changed", [*states, "pending"])


def _expected_claim(rec: TaskRecord, op: Op, states: list[str]) -> tuple[str, list[str]]:
    """Only the latest run, pending; the worker that holds it again gets its claim back."""
    if op.run_id(rec) != len(states) - 1 or states[-1] not in ("pending", "running"):
        return "conflict", states
    if states[-1] == "running":
        mine = (rec.runs[-1].get("workerGroup"), rec.runs[-1].get("workerId")) == op.worker
        return ("unchanged", states) if mine else ("conflict", states)
    return "changed", [*states[:-1], "running"]


def _expected_report(
    rec: TaskRecord, run_id: int, state: str, reason: str, states: list[str]
) -> tuple[str, list[str]]:
    """A repeat is accepted; else only the latest run, running; a retry while retries and runs last."""
    n = len(states)
    if run_id < n and _same_resolution(rec, run_id, state, reason):
        return "unchanged", states
    if run_id != n - 1 or states[-1] != "running":
        return "conflict", states
    retried = reason in RETRIES and rec.retries_left > 0 and n < MAX_RUNS
    return "changed", [*states[:-1], state, *(["pending"] if retried else [])]


def _same_resolution(rec: TaskRecord, run_id: int, state: str, reason: str) -> bool:
    """A repeated report: the run's own resolution, on the latest run or the one a retry follows."""
    run = rec.runs[run_id]
    if (run["state"], run.get("reasonResolved")) != (state, reason):
        return False
    n = len(rec.runs)
    return run_id == n - 1 or (run_id == n - 2 and rec.runs[-1]["reasonCreated"] in ("retry", "task-retry"))


def check_record(rec: TaskRecord) -> None:
    """What holds of every record the machine makes."""
    assert [run["runId"] for run in rec.runs] == list(range(len(rec.runs)))  # consecutive from 0
    assert len(rec.runs) <= MAX_RUNS
    assert all(run["state"] in RESOLVED for run in rec.runs[:-1])  # only the latest may be open
    assert rec.state == (rec.runs[-1]["state"] if rec.runs else "unscheduled")
    assert 0 <= rec.retries_left <= rec.definition["retries"]
    assert len(rec.runs) + rec.retries_left <= MAX_RUNS  # every retry left has room for its run
    assert rec.ever_resolved == (rec.state in RESOLVED)
    assert (rec.taken_until is not None) == (rec.state == "running") == (rec.claimed_at is not None)
    for run in rec.runs:
        check_run(run)
    # Retries: at most the task's `retries` retry runs since the last run that was not one.
    retries = 0
    for run in rec.runs:
        retries = retries + 1 if run["reasonCreated"] in ("retry", "task-retry") else 0
        assert retries <= rec.definition["retries"]
    if rec.runs and rec.runs[-1]["state"] == "running":
        assert rec.runs[-1]["takenUntil"] == dates.to_iso(rec.taken_until or 0)


def check_run(run: RunStatus) -> None:
    keys = set(run)
    claimed = {"workerGroup", "workerId", "takenUntil", "started"}
    if run["state"] == "pending":
        assert keys == {"runId", "state", "reasonCreated", "scheduled"}
    elif run["state"] == "running":
        assert keys == {"runId", "state", "reasonCreated", "scheduled", *claimed}
    else:
        assert {"reasonResolved", "resolved"} <= keys
        assert keys - {"reasonResolved", "resolved"} - claimed == {
            "runId",
            "state",
            "reasonCreated",
            "scheduled",
        }
        assert (keys & claimed) in (set(), claimed)  # a run resolved while pending never had a worker
        reason = run["reasonResolved"]
        if run["state"] in ("completed", "failed"):
            assert reason == run["state"]
        else:
            assert reason not in ("completed", "failed")
    if run["reasonCreated"] == "exception":  # only a cancel of a task with no runs creates one so
        assert run["runId"] == 0 and run["state"] == "exception" and "workerId" not in run


def check_step(rec: TaskRecord, op: Op, change: Change) -> None:
    """What holds of one transition that was accepted."""
    new = change.record
    kind, states = expected(rec, op)
    assert kind != "conflict", (op, rec.runs)
    assert [run["state"] for run in new.runs] == states, (op, rec.runs)
    if not change.changed:
        assert kind == "unchanged", (op, rec.runs)
        assert new is rec
        assert change.enqueue_run is None and change.resolution is None and not change.dequeue
        return
    assert kind == "changed", (op, rec.runs)
    assert new is not rec and new.version > rec.version  # the conditional update sees it changed
    # Runs are only added, one at a time, and a resolved run never changes.
    assert len(rec.runs) <= len(new.runs) <= len(rec.runs) + 1
    for old_run, new_run in zip(rec.runs, new.runs, strict=False):
        if old_run["state"] in RESOLVED:
            assert new_run == old_run
    assert new.runs[: len(rec.runs) - 1] == rec.runs[: len(rec.runs) - 1]
    check_messages(rec, change)


def check_messages(rec: TaskRecord, change: Change) -> None:
    """The events of a change: a new pending run is announced last and enqueued, a resolution first."""
    new, exchanges = change.record, [m.exchange for m in change.messages]
    added = len(new.runs) > len(rec.runs) and new.runs[-1]["state"] == "pending"  # a run to claim
    assert (change.enqueue_run is not None) == added
    if added:
        assert change.enqueue_run == len(new.runs) - 1
        assert exchanges[-1] == "task-pending"
        assert change.messages[-1].body["runId"] == change.enqueue_run  # type: ignore[index,call-overload]
    # The run this change resolved, if any: the open latest one, or a cancel's run 0 of a task with none.
    at = (
        len(rec.runs) - 1
        if rec.runs and rec.runs[-1]["state"] not in RESOLVED
        else 0
        if not rec.runs
        else None
    )
    done = new.runs[at] if at is not None else None
    if done is not None and done["state"] in RESOLVED:
        assert exchanges[0] == f"task-{done['state']}"
        assert change.resolution == (None if added else done["state"])
        retried = added and done["reasonResolved"] in RETRIES
        assert new.retries_left == rec.retries_left - (1 if retried else 0)
        if retried:
            assert new.runs[-1]["reasonCreated"] == RETRIES[done["reasonResolved"]]
    else:
        assert change.resolution is None
    if rec.state == "pending" and new.state == "running":
        assert exchanges == ["task-running"] and change.dequeue
    for message in change.messages:
        assert message.cc == ["route.index.a"]
    if change.messages:  # the last event carries the task's new status
        assert change.messages[-1].body["status"] == new.status()  # type: ignore[index,call-overload]
    assert change.dequeue == (rec.state == "pending" and new.state != "pending")


# ---------------------------------------------------------------------------------------------------
# Properties


@settings(PROPERTIES, max_examples=500)
@given(
    retries=retry_counts,
    start=st.one_of(st.just(0), st.integers(1, MAX_RUNS)),
    ops=st.lists(operations, max_size=80),
)
def test_every_sequence_of_operations_keeps_the_rules(retries: int, start: int, ops: list[Op]) -> None:
    rec = with_runs(retries, start)
    check_record(rec)
    now = START + 1000
    for op in ops:
        now += 1000
        try:
            change = apply(rec, op, now)
        except RequestConflict as refused:
            assert expected(rec, op)[0] == "conflict", (op, rec.runs, refused)
            assert f"task {rec.task_id}" in refused.message
            continue
        check_step(rec, op, change)
        check_record(change.record)
        rec = change.record


@PROPERTIES
@given(retries=retry_counts, start=st.integers(1, MAX_RUNS), ops=st.lists(operations, max_size=30))
def test_a_transition_never_changes_the_record_it_was_given(retries: int, start: int, ops: list[Op]) -> None:
    rec = with_runs(retries, start)
    for i, op in enumerate(ops):
        before = copy.deepcopy(rec)
        try:
            change = apply(rec, op, START + i)
        except RequestConflict:
            assert rec == before
            continue
        assert rec == before
        rec = change.record


@PROPERTIES
@given(
    retries=st.integers(0, 3),
    start=st.integers(1, MAX_RUNS),
    first=st.sampled_from(RESOLUTIONS),
    second=st.sampled_from(RESOLUTIONS),
)
def test_a_report_on_a_resolved_run_is_refused_unless_it_repeats_the_resolution(
    retries: int,
    start: int,
    first: tuple[ResolvedState, ReasonResolved],
    second: tuple[ResolvedState, ReasonResolved],
) -> None:
    rec = with_runs(retries, start)
    run_id = len(rec.runs) - 1
    rec = runs.claim(rec, run_id, WORKER, START, START + CLAIM_FOR).record
    rec = runs.resolve(rec, run_id, *first, START).record
    retried = len(rec.runs) == run_id + 2  # a retry run follows the one reported
    latest = rec.runs[-1]
    if second == first:
        change = runs.resolve(rec, run_id, *second, START + 1)
        assert not change.changed and change.record is rec
        exchange = "task-exception" if first[0] == "exception" else f"task-{first[0]}"
        assert [m.exchange for m in change.messages] == [exchange, *(["task-pending"] if retried else [])]
        return
    with pytest.raises(RequestConflict) as refused:
        runs.resolve(rec, run_id, *second, START + 1)
    if retried:  # the report names a run that is no longer the latest
        assert f"is not its latest run (the latest is {run_id + 1})" in refused.value.message
    else:
        assert f"run {run_id} of task task is already resolved {first[0]}" in refused.value.message
    assert rec.runs[-1] == latest


# ---------------------------------------------------------------------------------------------------
# The table: each state, each operation, the outcome docs/protocol.md gives


def in_state(state: str, retries: int = 1) -> TaskRecord:
    """A task in `state`, its latest run claimed by WORKER where it was ever claimed."""
    rec = record(retries)
    if state == "unscheduled":
        return rec
    rec = runs.schedule(rec, START).record
    if state == "pending":
        return rec
    rec = runs.claim(rec, 0, WORKER, START, START + CLAIM_FOR).record
    if state == "running":
        return rec
    reason: ReasonResolved = "malformed-payload" if state == "exception" else state  # type: ignore[assignment]
    return runs.resolve(rec, 0, state, reason, START).record  # type: ignore[arg-type]


CONFLICT = "409"
# state | operation | run states after it, or CONFLICT | events sent
TABLE: list[tuple[str, Op, list[str] | str, list[str]]] = [
    ("unscheduled", Op("schedule"), ["pending"], ["task-pending"]),
    ("unscheduled", Op("rerun"), ["pending"], ["task-pending"]),
    ("unscheduled", Op("cancel"), ["exception"], ["task-exception"]),
    ("unscheduled", Op("cancel", reason="deadline-exceeded"), ["exception"], ["task-exception"]),
    ("unscheduled", Op("claim"), CONFLICT, []),
    ("unscheduled", Op("reclaim"), CONFLICT, []),
    ("unscheduled", Op("report"), CONFLICT, []),
    ("pending", Op("schedule"), ["pending"], []),
    ("pending", Op("claim"), ["running"], ["task-running"]),
    ("pending", Op("claim", run=1), CONFLICT, []),
    ("pending", Op("reclaim"), CONFLICT, []),
    ("pending", Op("report"), CONFLICT, []),
    ("pending", Op("claim-expired"), ["pending"], []),
    ("pending", Op("cancel"), ["exception"], ["task-exception"]),
    ("pending", Op("cancel", reason="deadline-exceeded"), ["exception"], ["task-exception"]),
    ("pending", Op("rerun"), ["pending"], ["task-pending"]),
    ("running", Op("schedule"), ["running"], []),
    ("running", Op("claim"), ["running"], []),
    ("running", Op("claim", worker=OTHER_WORKER), CONFLICT, []),
    ("running", Op("reclaim"), ["running"], []),
    ("running", Op("report"), ["completed"], ["task-completed"]),
    ("running", Op("report", resolution=("failed", "failed")), ["failed"], ["task-failed"]),
    (
        "running",
        Op("report", resolution=("exception", "malformed-payload")),
        ["exception"],
        ["task-exception"],
    ),
    (
        "running",
        Op("report", resolution=("exception", "worker-shutdown")),
        ["exception", "pending"],
        ["task-exception", "task-pending"],
    ),
    (
        "running",
        Op("report", resolution=("exception", "intermittent-task")),
        ["exception", "pending"],
        ["task-exception", "task-pending"],
    ),
    ("running", Op("claim-expired"), ["exception", "pending"], ["task-exception", "task-pending"]),
    ("running", Op("cancel"), ["exception"], ["task-exception"]),
    ("running", Op("cancel", reason="deadline-exceeded"), ["exception"], ["task-exception"]),
    ("running", Op("rerun"), ["running"], []),
    *(
        row
        for state in ("completed", "failed", "exception")
        for row in [
            (state, Op("schedule"), [state], []),
            (state, Op("claim"), CONFLICT, []),
            (state, Op("reclaim"), CONFLICT, []),
            (state, Op("claim-expired"), [state], []),
            (state, Op("cancel"), [state], []),
            (state, Op("rerun"), [state, "pending"], ["task-pending"]),
        ]
    ),
    ("completed", Op("report"), ["completed"], ["task-completed"]),  # a repeat: sent again
    ("completed", Op("report", resolution=("failed", "failed")), CONFLICT, []),
    ("failed", Op("report"), CONFLICT, []),
    (
        "exception",
        Op("report", resolution=("exception", "malformed-payload")),
        ["exception"],
        ["task-exception"],
    ),
    ("exception", Op("report", resolution=("exception", "internal-error")), CONFLICT, []),
]


@pytest.mark.parametrize(
    ("state", "op", "after", "events"),
    TABLE,
    ids=[f"{s}-{op.name}-{i}" for i, (s, op, _, _) in enumerate(TABLE)],
)
def test_each_state_and_operation(state: str, op: Op, after: list[str] | str, events: list[str]) -> None:
    rec = in_state(state)
    if after == CONFLICT:
        with pytest.raises(RequestConflict):
            apply(rec, op, START + 1000)
        return
    change = apply(rec, op, START + 1000)
    assert [run["state"] for run in change.record.runs] == after
    assert [m.exchange for m in change.messages] == events
    check_step(rec, op, change)
    check_record(change.record)


@pytest.mark.parametrize("reason", ["worker-shutdown", "claim-expired", "intermittent-task"])
def test_no_retry_once_the_retries_are_spent(reason: ReasonResolved) -> None:
    rec = in_state("running", retries=0)
    change = runs.resolve(rec, 0, "exception", reason, START + 1000)
    assert [run["state"] for run in change.record.runs] == ["exception"]
    assert change.resolution == "exception" and change.enqueue_run is None


def test_a_canceled_task_sends_its_cancellation_again_and_nothing_else() -> None:
    canceled = runs.cancel(in_state("running"), START + 1000).record
    again = runs.cancel(canceled, START + 2000)
    assert not again.changed and [m.exchange for m in again.messages] == ["task-exception"]
    other = runs.cancel(canceled, START + 2000, "deadline-exceeded")
    assert not other.changed and other.messages == []


def test_rerun_resets_the_retries_to_what_the_runs_left_allow() -> None:
    rec = with_runs(retries=5, count=MAX_RUNS - 3)
    rec = runs.claim(rec, len(rec.runs) - 1, WORKER, START, START + CLAIM_FOR).record
    rec = runs.resolve(rec, len(rec.runs) - 1, "failed", "failed", START).record
    assert len(rec.runs) == MAX_RUNS - 3
    rerun = runs.rerun(rec, START).record
    assert rerun.retries_left == 2  # 49 minus the 47 runs it had: room for the rerun and its retries
    last = with_runs(retries=5, count=MAX_RUNS)
    last = runs.claim(last, MAX_RUNS - 1, WORKER, START, START + CLAIM_FOR).record
    last = runs.resolve(last, MAX_RUNS - 1, "failed", "failed", START).record
    with pytest.raises(RequestConflict, match=f"already has {MAX_RUNS} runs"):
        runs.rerun(last, START)


def test_a_repeated_report_is_accepted_only_on_the_run_its_retry_follows() -> None:
    rec = in_state("running", retries=2)
    for run_id in (0, 1):  # two retries: runs 0 and 1 exception(worker-shutdown), run 2 pending
        rec = runs.resolve(rec, run_id, "exception", "worker-shutdown", START).record
        if run_id == 0:
            rec = runs.claim(rec, 1, WORKER, START, START + CLAIM_FOR).record
    assert [run["state"] for run in rec.runs] == ["exception", "exception", "pending"]
    again = runs.resolve(rec, 1, "exception", "worker-shutdown", START + 1)
    assert not again.changed and [m.exchange for m in again.messages] == ["task-exception", "task-pending"]
    with pytest.raises(RequestConflict, match="is not its latest run"):
        runs.resolve(rec, 0, "exception", "worker-shutdown", START + 1)
