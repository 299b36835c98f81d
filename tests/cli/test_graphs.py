"""`taskyard graph submit|status|inspect` against a real server, with a real worker running the tasks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from taskyard.model import slugid
from tests.cli.helpers import Run
from tests.e2e.conftest import Server
from tests.e2e.workers import WorkerProcess, sh

SCOPES = ["queue:create-task:*", "queue:scheduler-id:task-graph-scheduler"]


@pytest.fixture
def worker(server: Server, tq: str, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = WorkerProcess(server, tq, tmp_path / "work").start()
    yield process
    process.stop()


def task(tq: str, script: str) -> dict[str, object]:
    return {"taskQueueId": tq, "payload": {"command": sh(script), "maxRunTime": 60}}


def test_submit_a_labelled_graph_follow_it_and_inspect_it(
    server: Server, cli: Run, tq: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    path = tmp_path / "nightly.yml"
    graph = {
        "scopes": SCOPES,
        "tasks": {
            "build": {"task": task(tq, "true")},
            "test": {"requires": ["build"], "task": task(tq, "true")},
        },
    }
    path.write_text(yaml.safe_dump(graph))
    graph_id = cli("graph", "submit", str(path)).stdout.strip()
    assert slugid.is_valid(graph_id)
    followed = cli("graph", "status", graph_id, "--interval", "0.2")
    assert f"{graph_id} finished" in followed.stdout and "2/2 completed" in followed.stdout
    shown = cli("graph", "inspect", graph_id).stdout
    assert "build" in shown and "test" in shown and shown.count("completed") == 2
    answer = json.loads(cli("graph", "inspect", graph_id, "--json").stdout)
    assert answer["metadata"]["name"] == "nightly"
    assert [t["label"] for t in answer["tasks"]] == ["build", "test"]
    made = server.client().task(answer["tasks"][1]["taskId"])["metadata"]
    assert made["name"] == "test"  # its label, not the file's name
    assert made["description"] == "task test of graph nightly.yml, submitted with `taskyard graph submit`"


def test_a_graph_with_a_cycle_and_unknown_labels_is_refused_naming_every_problem(
    server: Server, cli: Run, tq: str, tmp_path: Path
) -> None:
    """One 400 naming every problem: the cycle and the unknown label do not hide the tasks' own."""
    bad_task = {**task(tq, "true"), "priority": "urgent"}
    graph = {
        "scopes": SCOPES,
        "tasks": {
            "a": {"requires": ["b"], "task": task(tq, "true")},
            "b": {"requires": ["a", "nowhere"], "task": task(tq, "true")},
            "c": {"task": bad_task},
        },
    }
    path = tmp_path / "tangled.yml"
    path.write_text(yaml.safe_dump(graph))
    err = cli("graph", "submit", str(path), status=1).stderr.splitlines()
    assert err[0] == "taskyard: Errors found in task nodes:", err
    assert "taskyard: - task b: requires label 'nowhere', which is not in the graph" in err
    assert "taskyard: - the requirements form a cycle: a -> b -> a" in err
    assert any(line.startswith("taskyard: - task c: ") and "priority" in line for line in err), err


def test_status_exits_1_for_a_blocked_graph(
    server: Server, cli: Run, tq: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    a, b = slugid.nice(), slugid.nice()
    graph = {
        "scopes": SCOPES,
        "tasks": [
            {"taskId": a, "task": task(tq, "exit 3")},
            {"taskId": b, "requires": [a], "task": task(tq, "true")},
        ],
    }
    path = tmp_path / "failing.json"
    path.write_text(json.dumps(graph))
    graph_id = cli("graph", "submit", str(path), "--graph-id", slugid.nice()).stdout.strip()
    assert f"{graph_id} blocked" in cli("graph", "status", graph_id, "--interval", "0.2", status=1).stdout
    rows = cli("graph", "inspect", graph_id).stdout
    # A task of the list form without a label is named by its taskId.
    assert f"{a}  {a}  failed" in rows and f"{b}  {b}  unscheduled  0            {a}" in rows


def test_submit_refuses_bad_files(server: Server, cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "not-a-graph.json"
    path.write_text(json.dumps({"payload": {}}))
    assert "must hold a task graph" in cli("graph", "submit", str(path), status=2).stderr
    path.write_text(json.dumps({"tasks": []}))
    assert "at least one task" in cli("graph", "submit", str(path), status=1).stderr
    assert "task-graph not found" in cli("graph", "status", slugid.nice(), status=1).stderr
