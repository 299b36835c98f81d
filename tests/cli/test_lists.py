"""Lists, views and output formats against a real server: `task list|def`, `group list|status|cancel|seal`,
`queue list`, `worker list`, `-o json|yaml|wide`, `task create -` and `taskyard api`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import requests
import yaml

from tests.cli.helpers import Run, environment
from tests.e2e.conftest import TASKYARD, Server
from tests.e2e.helpers import WORKER, claim_one, create, slug


def test_task_list_by_group_and_state_and_task_def(server: Server, cli: Run, tq: str) -> None:
    queue = server.client()
    group = slug()
    pending = create(queue, tq, taskGroupId=group)
    canceled = create(queue, tq, taskGroupId=group)
    queue.cancelTask(canceled)
    listed = cli("task", "list", "--group", group).stdout
    assert pending in listed and canceled in listed and "pending" in listed and "exception" in listed
    only = json.loads(cli("task", "list", "--group", group, "--state", "exception", "-o", "json").stdout)
    assert [t["taskId"] for t in only] == [canceled] and only[0]["reason"] == "canceled"
    wide = cli("task", "list", "--group", group, "-o", "wide").stdout
    assert "TASK QUEUE" in wide and tq in wide and "canceled" in wide
    by_queue = json.loads(cli("task", "list", "--task-queue", tq, "--json").stdout)
    assert {t["taskId"] for t in by_queue} == {pending}
    assert "--group" in cli("task", "list", status=2).stderr  # a group or a task queue is required

    definition = yaml.safe_load(cli("task", "def", pending).stdout)
    assert definition["taskGroupId"] == group and definition["taskQueueId"] == tq
    assert json.loads(cli("task", "def", pending, "-o", "json").stdout) == definition


def test_group_status_names_the_unsuccessful_tasks_and_cancel_and_seal(
    server: Server, cli: Run, tq: str, tmp_path: Path
) -> None:
    queue = server.client()
    group = slug()
    failed = create(queue, tq, taskGroupId=group)
    claim = claim_one(queue, tq)
    assert claim["status"]["taskId"] == failed
    server.client(claim["credentials"]).reportFailed(failed, "0")
    still = create(queue, tq, taskGroupId=group)
    status = cli("group", "status", group).stdout
    assert failed in status and "failed" in status.split(failed)[1]
    assert json.loads(cli("group", "status", group, "--json").stdout)["unsuccessful"][0]["taskId"] == failed

    assert "must be sealed" in cli("group", "cancel", group, status=1).stderr
    assert "Sealed task group" in cli("group", "seal", group).stdout
    body = tmp_path / "late.yaml"
    body.write_text(f"taskQueueId: {tq}\npayload: {{}}\n")
    assert cli("task", "create", str(body), "--task-group-id", group, status=1).stderr.startswith(
        "taskyard: "
    )
    canceled = cli("group", "cancel", group).stdout
    assert f"Canceled 1 of the 2 tasks of group {group}." in canceled
    assert queue.status(still)["status"]["state"] == "exception"


def test_queue_worker_and_group_lists(server: Server, cli: Run, tq: str) -> None:
    queue = server.client()
    group = slug()
    create(queue, tq, taskGroupId=group)
    claim_one(queue, tq)  # the queue and the worker are seen from now on
    create(queue, tq, taskGroupId=group)
    queues = {q["taskQueueId"]: q for q in json.loads(cli("queue", "list", "-o", "json").stdout)}
    assert queues[tq]["pendingTasks"] == 1 and queues[tq]["claimedTasks"] == 1
    assert queues[tq]["oldestPendingAge"] is not None
    assert tq in cli("queue", "list").stdout
    workers = json.loads(cli("worker", "list", "--task-queue-id", tq, "--json").stdout)
    assert [(w["workerGroup"], w["workerId"]) for w in workers] == [
        (WORKER["workerGroup"], WORKER["workerId"])
    ]
    groups = {g["taskGroupId"]: g for g in json.loads(cli("group", "list", "--json").stdout)}
    assert (groups[group]["pending"], groups[group]["running"]) == (1, 1)


def test_a_queue_no_worker_polled_is_listed_and_its_tasks_counted(server: Server, cli: Run, tq: str) -> None:
    """`queue list` and `group list` see the tasks of a queue no worker has asked for work yet,
    as the dashboard does (its counts are /metrics' own, compared here)."""
    queue = server.client()
    group, unpolled = slug(), f"{tq}-new"
    for _ in range(3):
        create(queue, unpolled, taskGroupId=group)
    create(queue, tq, taskGroupId=group)
    claim_one(queue, tq)
    groups = {g["taskGroupId"]: g for g in json.loads(cli("group", "list", "--json").stdout)}
    assert (groups[group]["pending"], groups[group]["running"]) == (3, 1)
    queues = {q["taskQueueId"]: q for q in json.loads(cli("queue", "list", "-o", "json").stdout)}
    assert unpolled in queues, sorted(queues)
    assert (queues[unpolled]["pendingTasks"], queues[unpolled]["claimedTasks"]) == (3, 0)
    metrics = requests.get(f"{server.root_url}/metrics", timeout=10).text
    assert f'taskyard_pending_tasks{{task_queue_id="{unpolled}"}} 3.0' in metrics


def test_worker_list_shows_what_each_worker_runs(server: Server, cli: Run, tq: str) -> None:
    queue = server.client()
    made = {create(queue, tq) for _ in range(3)}
    claims = queue.claimWork(tq, {**WORKER, "tasks": 3})["tasks"]
    assert {c["status"]["taskId"] for c in claims} == made
    shown = cli("worker", "list", "--task-queue-id", tq).stdout.splitlines()
    assert shown[0].split() == ["TASK", "QUEUE", "WORKER", "RUNNING", "LAST", "ACTIVE", "LATEST", "TASK"]
    assert shown[1].split()[:3] == [tq, f"{WORKER['workerGroup']}/{WORKER['workerId']}", "3"]
    wide = cli("worker", "list", "--task-queue-id", tq, "-o", "wide").stdout
    assert "RUNS (CLAIMED)" in wide and "FIRST CLAIM" in wide and "QUARANTINED" in wide
    assert all(f"{task_id}/0 (" in wide for task_id in made), wide
    listed = json.loads(cli("worker", "list", "--task-queue-id", tq, "--json").stdout)
    assert {r["taskId"] for r in listed[0]["running"]} == made


def test_create_from_standard_input_into_a_group(server: Server, tq: str) -> None:
    group = slug()
    result = subprocess.run(
        [str(TASKYARD), "task", "create", "-", "--task-group-id", group, "-o", "yaml"],
        input=f"taskQueueId: {tq}\npayload: {{}}\n",
        capture_output=True,
        text=True,
        env={**environment(server)},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    answer = yaml.safe_load(result.stdout)
    assert answer["status"]["taskGroupId"] == group and answer["status"]["state"] == "pending"


def test_output_options_are_refused_where_nothing_is_formatted(cli: Run) -> None:
    said = cli("task", "log", slug(), "--json", status=2).stderr
    assert said.startswith("usage: taskyard task log") and "unrecognized arguments: --json" in said


def test_api_calls_any_method_by_name(server: Server, cli: Run, tq: str, tmp_path: Path) -> None:
    task_id = create(server.client(), tq)
    status = json.loads(cli("api", "queue", "status", task_id).stdout)
    assert status["status"]["taskId"] == task_id
    assert json.loads(cli("api", "queue", "pendingTasks", tq).stdout)["pendingTasks"] == 1
    body = tmp_path / "scopes.json"
    body.write_text(json.dumps({"scopes": ["assume:nothing"]}))
    assert json.loads(cli("api", "auth", "expandScopes", "--input", str(body)).stdout) == {
        "scopes": ["assume:nothing"]
    }
    methods = cli("api", "queue").stdout.splitlines()
    assert "createTask <taskId>" in methods and "claimWork <taskQueueId>" in methods
    assert "no method nope" in cli("api", "queue", "nope", status=1).stderr
    assert "takes <taskId>" in cli("api", "queue", "status", status=1).stderr
