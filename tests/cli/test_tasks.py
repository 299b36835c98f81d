"""`taskyard task|group` against a real server, run as the installed `taskyard` command.

Workers' parts (claiming, artifacts, resolving) are played with TaskCluster's own Python client.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests
import taskcluster

from taskyard.cli import tasks
from taskyard.model import slugid
from tests.cli.helpers import Run
from tests.e2e.conftest import Server
from tests.e2e.helpers import WORKER, claim_one, create, iso, now, parse, slug


def write(path: Path, body: dict[str, Any]) -> str:
    path.write_text(json.dumps(body))
    return str(path)


def worker_queue(server: Server, claim: dict[str, Any]) -> taskcluster.Queue:
    return server.client(claim["credentials"])


def expires() -> str:
    return iso(now() + timedelta(hours=1))


# ---------------------------------------------------------------------------------------------------
# Tasks


def test_create_fills_the_defaults_and_status_shows_the_runs(
    server: Server, cli: Run, tq: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "hello-world.json", {"taskQueueId": tq, "payload": {"command": ["true"]}})
    task_id, state = cli("task", "create", path).stdout.split()
    assert slugid.is_valid(task_id) and state == "pending"
    task = server.client().task(task_id)
    assert task["metadata"]["name"] == "hello-world" and task["metadata"]["source"] == tasks.DEFAULT_SOURCE
    assert timedelta(hours=23) < parse(task["deadline"]) - parse(task["created"]) <= timedelta(days=1)

    given = slug()
    answer = json.loads(cli("task", "create", path, "--task-id", given, "--json").stdout)
    assert answer["taskId"] == given and answer["status"]["state"] == "pending"

    shown = cli("task", "status", task_id).stdout
    assert task_id in shown and "pending" in shown and "scheduled" in shown
    status = json.loads(cli("task", "status", task_id, "--json").stdout)
    assert status["state"] == "pending" and [r["runId"] for r in status["runs"]] == [0]


def test_create_refuses_bad_files(server: Server, cli: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert "must hold an object" in cli("task", "create", str(bad), status=2).stderr
    bad.write_text("{nope")
    assert "not valid JSON" in cli("task", "create", str(bad), status=2).stderr
    missing = write(tmp_path / "no-queue.json", {"payload": {}})
    assert cli("task", "create", missing, status=1).stderr.startswith("taskyard: ")
    bad_yaml = tmp_path / "bad.yml"
    bad_yaml.write_text("taskQueueId: [unclosed\n")
    assert "not valid YAML" in cli("task", "create", str(bad_yaml), status=2).stderr


def test_create_prints_every_problem_of_the_body_one_per_line(cli: Run, tq: str, tmp_path: Path) -> None:
    """As the web form lists them: not the first alone, the rest only with --verbose."""
    bad = {"taskQueueId": tq, "payload": {}, "priority": "urgent", "retries": 1000, "requires": "sometimes"}
    err = cli("task", "create", write(tmp_path / "bad.json", bad), status=1).stderr
    assert err.splitlines() == [
        "taskyard: body has 3 problems:",
        "taskyard: - body.requires must be one of: all-completed, all-resolved",
        "taskyard: - body.priority must be one of: highest, very-high, high, medium, low, very-low, lowest",
        "taskyard: - body.retries must be at most 49",
    ]


def test_an_unscheduled_task_says_what_it_waits_for_or_that_a_failed_dependency_blocks_it(
    server: Server, cli: Run, tq: str
) -> None:
    queue = server.client()
    first = create(queue, tq)
    blocked = create(queue, tq, dependencies=[first])
    waiting = cli("task", "status", blocked).stdout
    assert (
        f"task {blocked} is unscheduled: it waits for 1 of its 1 dependencies to complete: {first} (pending)"
        in waiting
    )
    claim = claim_one(queue, tq)
    assert claim["status"]["taskId"] == first
    worker_queue(server, claim).reportFailed(first, 0)
    deadline = queue.task(blocked)["deadline"]
    said = (
        f"task {blocked} is blocked: its dependency {first} failed and it requires all-completed, so it "
        f"will never run; it stays unscheduled until its deadline, {deadline}, then resolves exception "
        "(deadline-exceeded)"
    )
    assert said in cli("task", "status", blocked).stdout
    log = cli("task", "log", blocked, status=1).stderr
    assert f"taskyard: task {blocked} has no log yet: {said.removeprefix(f'task {blocked} ')}" in log, log


def test_create_from_yaml(server: Server, cli: Run, tq: str, tmp_path: Path) -> None:
    path = tmp_path / "from-yaml.yml"
    path.write_text(
        f"taskQueueId: {tq}\npayload:\n  command: [echo, hi]\nmetadata:\n  owner: me@example.com\n"
    )
    task_id, state = cli("task", "create", str(path)).stdout.split()
    metadata = server.client().task(task_id)["metadata"]
    assert state == "pending" and metadata["owner"] == "me@example.com" and metadata["name"] == "from-yaml"


def test_create_from_yaml_with_explicit_tags(server: Server, cli: Run, tq: str, tmp_path: Path) -> None:
    """A tag's bad value is the file's line and column (exit 2), never a traceback; a date stays the
    string the definition wants; an alias is the user's own file's business."""
    path = tmp_path / "tagged.yml"
    for value, says in [
        ("!!int abc", "line 4, column 15: not valid YAML: the value 'abc' is not a valid !!int"),
        ("!!bool maybe", "line 4, column 15: not valid YAML: the value 'maybe' is not a valid !!bool"),
        ("!!timestamp 99999-01-01", "line 4, column 15: not valid YAML: the value '99999-01-01' is not"),
        ("!!binary aGk=", "line 4, column 15: not valid YAML: a !!binary is not a JSON value"),
        ("!foo x", "line 4, column 15: not valid YAML: could not determine a constructor for the tag '!foo'"),
    ]:
        path.write_text(f"taskQueueId: {tq}\npayload:\n  command: [echo, hi]\n  maxRunTime: {value}\n")
        refused = cli("task", "create", str(path), status=2).stderr
        assert says in refused and "Traceback" not in refused, refused
    deadline = iso(now() + timedelta(hours=2))
    path.write_text(f"taskQueueId: {tq}\ndeadline: {deadline}\npayload: &p {{command: [echo]}}\nextra: *p\n")
    task_id, _ = cli("task", "create", str(path)).stdout.split()
    assert server.client().task(task_id)["extra"] == {"command": ["echo"]}


def test_cancel_then_rerun(server: Server, cli: Run, tq: str) -> None:
    task_id = create(server.client(), tq)
    cancelled = cli("task", "cancel", task_id)
    assert f"Cancelled task {task_id}." in cancelled.stdout and "exception" in cancelled.stdout
    assert server.client().status(task_id)["status"]["runs"][0]["reasonResolved"] == "canceled"
    rerun = json.loads(cli("task", "rerun", task_id, "--json").stdout)
    assert rerun["state"] == "pending" and [r["runId"] for r in rerun["runs"]] == [0, 1]
    assert "task" in cli("task", "status", slug(), status=1).stderr


def test_cancel_and_rerun_say_when_they_changed_nothing(server: Server, cli: Run, tq: str) -> None:
    queue = server.client()
    done = create(queue, tq)
    claim = claim_one(queue, tq)
    worker_queue(server, claim).reportCompleted(done, 0)
    said = cli("task", "cancel", done).stdout
    assert f"Task {done} is already completed: nothing to cancel." in said and "Cancelled" not in said
    assert queue.status(done)["status"]["state"] == "completed"

    running = create(queue, tq)
    claim_one(queue, tq)
    said = cli("task", "rerun", running).stdout
    assert f"Task {running} is running: no new run" in said and "Rerunning" not in said
    assert len(queue.status(running)["status"]["runs"]) == 1
    said = cli("task", "rerun", done).stdout
    assert f"Rerunning task {done}: run 1 is pending." in said


# ---------------------------------------------------------------------------------------------------
# Artifacts


def test_artifacts_are_listed_and_downloaded(server: Server, cli: Run, tq: str, tmp_path: Path) -> None:
    queue = server.client()
    task_id = create(queue, tq)
    worker = worker_queue(server, claim_one(queue, tq))
    for name, data, content_type in (
        ("public/logs/hello.txt", b"hello\n", "text/plain"),
        ("private/data.bin", bytes(range(256)) * 100, "application/octet-stream"),
    ):
        answer = worker.createArtifact(
            task_id, 0, name, {"storageType": "s3", "contentType": content_type, "expires": expires()}
        )
        put = requests.put(answer["putUrl"], data=data, headers={"Content-Type": content_type}, timeout=30)
        assert put.status_code == 200, put.text
    worker.createArtifact(
        task_id,
        0,
        "public/missing.txt",
        {"storageType": "error", "reason": "file-missing-on-worker", "message": "no such file",
         "expires": expires()},
    )  # fmt: skip

    listed = cli("task", "artifacts", task_id).stdout
    assert "public/logs/hello.txt" in listed and "text/plain" in listed and "error" in listed
    names = {a["name"]: a for a in json.loads(cli("task", "artifacts", task_id, "--json").stdout)}
    assert set(names) == {"public/logs/hello.txt", "private/data.bin", "public/missing.txt"}
    assert names["private/data.bin"]["contentType"] == "application/octet-stream"

    assert cli("task", "get-artifact", task_id, "public/logs/hello.txt").stdout == "hello\n"
    target = tmp_path / "data.bin"
    cli("task", "get-artifact", task_id, "private/data.bin", "-o", str(target))
    assert target.read_bytes() == bytes(range(256)) * 100

    failed = cli("task", "get-artifact", task_id, "public/missing.txt", status=1)
    assert "file-missing-on-worker" in failed.stderr and "no such file" in failed.stderr
    assert failed.stdout == ""
    assert cli("task", "get-artifact", task_id, "public/nothing", status=1).stderr.startswith("taskyard: ")
    assert cli("task", "artifacts", create(queue, tq)).stdout.strip() == "no artifacts"


# ---------------------------------------------------------------------------------------------------
# Groups


def test_group_status_counts_and_waits(server: Server, cli: Run, tq: str) -> None:
    queue = server.client()
    group = slug()
    ids = [create(queue, tq, taskGroupId=group) for _ in range(3)]
    counts = json.loads(cli("group", "status", group, "--json").stdout)
    assert counts["total"] == 3 and counts["counts"]["pending"] == 3
    assert "pending 3" in cli("group", "status", group).stdout

    claims = queue.claimWork(tq, {**WORKER, "tasks": 3})["tasks"]
    assert sorted(c["status"]["taskId"] for c in claims) == sorted(ids)
    for claim in claims:
        worker_queue(server, claim).reportCompleted(claim["status"]["taskId"], claim["runId"])
    waited = cli("group", "status", group, "--wait", "--json")
    assert json.loads(waited.stdout)["counts"]["completed"] == 3

    queue.cancelTask(create(queue, tq, taskGroupId=group))
    waited = cli("group", "status", group, "--wait", "--interval", "0.1", status=1)
    assert "completed 3" in waited.stdout and "exception 1" in waited.stdout
