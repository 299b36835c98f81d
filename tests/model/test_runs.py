"""The state machine's copies: a transition never changes the record it was given."""

from __future__ import annotations

import dataclasses

from taskyard.model import runs
from taskyard.model.runs import TaskRecord


def _record() -> TaskRecord:
    definition = {"provisionerId": "p", "workerType": "w", "deadline": "x", "expires": "y", "retries": 1}
    return TaskRecord(
        task_id="t",
        task_group_id="g",
        scheduler_id="-",
        project_id="none",
        task_queue_id="p/w",
        priority="lowest",
        requires="all-completed",
        retries_left=1,
        created=0,
        deadline=10_000,
        expires=20_000,
        definition=definition,  # type: ignore[arg-type]
    )


def test_fork_is_replace_with_the_runs_copied() -> None:
    # `_fork` copies the instance's dict: sound only while every field is a plain init field.
    assert all(f.init for f in dataclasses.fields(TaskRecord))
    assert not hasattr(TaskRecord, "__post_init__") and not hasattr(TaskRecord, "__slots__")
    rec = runs.schedule(_record(), 5).record
    forked = runs._fork(rec)
    assert forked == dataclasses.replace(rec) and forked is not rec
    assert forked.runs == rec.runs and forked.runs is not rec.runs and forked.runs[0] is not rec.runs[0]
    assert forked.definition is rec.definition


def test_transitions_leave_the_given_record_and_its_statuses_alone() -> None:
    scheduled = runs.schedule(_record(), 5).record
    before = dataclasses.replace(scheduled, runs=[dict(r) for r in scheduled.runs])  # type: ignore[misc]
    status = scheduled.status()
    claimed = runs.claim(scheduled, 0, ("g", "w"), 6, 1000).record
    assert scheduled == before and status["runs"] == before.runs
    status["runs"][0]["state"] = "failed"  # an answer changed by its reader reaches no record
    assert scheduled.runs[0]["state"] == "pending"
    resolved = runs.resolve(claimed, 0, "completed", "completed", 7)
    assert claimed.runs[0]["state"] == "running" and resolved.record.runs[0]["state"] == "completed"
    assert resolved.messages[0].body["status"]["runs"][0]["state"] == "completed"  # type: ignore[index]
