"""The task-graph scheduler end to end: TaskCluster's 1.3.5 client drives `/api/scheduler/v1` of a
real server, and a real `taskyard worker` runs the graphs' tasks. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.e2e.conftest import Server
from tests.e2e.helpers import GRAPH_SCOPES, META, options, slug, wait_until_not_running
from tests.e2e.workers import WorkerProcess, sh, task
from tests.legacy_client import legacy_python, run_legacy

__all__ = ["legacy_python"]


@pytest.fixture
def worker(server: Server, tq: str, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = WorkerProcess(server, tq, tmp_path / "work", args=["--capacity", "4"]).start()
    yield process
    process.stop()


def node(
    tq: str, task_id: str, script: str = "true", requires: list[str] | None = None, reruns: int = 0
) -> dict[str, Any]:
    return {
        "taskId": task_id,
        "requires": requires or [],
        "reruns": reruns,
        "task": task(tq, {"command": sh(script)}),
    }


def test_the_legacy_client_creates_extends_and_follows_a_graph_to_finished(
    server: Server, legacy_python: Path, tq: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    graph_id, a, b, c = slug(), slug(), slug(), slug()
    marker = tmp_path / "a-ran"
    body = {
        "scopes": GRAPH_SCOPES,
        "routes": [],
        "metadata": META,
        "tags": {"purpose": "e2e"},
        "tasks": [node(tq, a, f"touch {marker}"), node(tq, b, f"test -f {marker}", [a])],
    }
    answer = run_legacy(
        legacy_python,
        """
        scheduler = taskcluster.Scheduler(options)
        created = scheduler.createTaskGraph(options["graphId"], options["graph"])
        again = scheduler.createTaskGraph(options["graphId"], options["graph"])
        extended = scheduler.extendTaskGraph(options["graphId"], {"tasks": [options["more"]]})
        result = {
            "ping": scheduler.ping(),
            "created": created,
            "again": again,
            "extended": extended,
            "info": scheduler.info(options["graphId"]),
            "inspect": scheduler.inspect(options["graphId"]),
        }
        """,
        options=options(server, graphId=graph_id, graph=body, more=node(tq, c, "true", [a, b])),
    )
    assert answer["ping"]["alive"] is True
    assert answer["created"]["status"] == {
        "taskGraphId": graph_id,
        "schedulerId": "task-graph-scheduler",
        "state": "running",
        "routing": "",
    }
    assert answer["again"] == answer["created"]
    assert answer["info"]["tags"] == {"purpose": "e2e"} and answer["info"]["metadata"] == META
    assert [t["taskId"] for t in answer["inspect"]["tasks"]] == [a, b, c]
    assert answer["inspect"]["scopes"] == GRAPH_SCOPES
    assert wait_until_not_running(server, graph_id) == "finished"
    inspected = run_legacy(
        legacy_python,
        "result = taskcluster.Scheduler(options).inspectTask(options['graphId'], options['taskId'])",
        options=options(server, graphId=graph_id, taskId=c),
    )
    assert inspected["state"] == "completed" and inspected["requires"] == [a, b]
    # The scheduler document's task entity: its deadline, and its resolution with the run's URLs.
    assert inspected["deadline"] == server.client().task(c)["deadline"]
    resolution = inspected["resolution"]
    run_url = f"{server.root_url}/api/queue/v1/task/{c}/runs/0/artifacts"
    assert resolution == {
        "success": True,
        "completed": True,
        "resultUrl": run_url,
        "logsUrl": f"{run_url}/public/logs/live.log",
    }
    names = {x["name"] for x in server.client().listArtifacts(c, "0")["artifacts"]}
    assert "public/logs/live.log" in names  # listArtifacts is the resultUrl's route
    assert requests.get(resolution["logsUrl"], timeout=10).status_code == 200


def test_a_graph_whose_task_keeps_failing_blocks_after_its_reruns(
    server: Server, legacy_python: Path, tq: str, worker: WorkerProcess
) -> None:
    graph_id, a, b = slug(), slug(), slug()
    body = {
        "scopes": GRAPH_SCOPES,
        "metadata": META,
        "tasks": [node(tq, a, "exit 1", reruns=1), node(tq, b, "true", [a])],
    }
    run_legacy(
        legacy_python,
        "result = taskcluster.Scheduler(options).createTaskGraph(options['graphId'], options['graph'])",
        options=options(server, graphId=graph_id, graph=body),
    )
    assert wait_until_not_running(server, graph_id) == "blocked"
    answer = run_legacy(
        legacy_python,
        """
        scheduler = taskcluster.Scheduler(options)
        try:
            scheduler.extendTaskGraph(options["graphId"], {"tasks": []})
            refused = None
        except taskcluster.exceptions.TaskclusterRestFailure as error:
            refused = error.status_code
        result = {"inspect": scheduler.inspect(options["graphId"]), "refused": refused}
        """,
        options=options(server, graphId=graph_id),
    )
    first, second = answer["inspect"]["tasks"]
    assert (first["state"], first["rerunsLeft"]) == ("failed", 0)
    assert second["state"] == "unscheduled"
    assert answer["refused"] in (400, 409)
    runs = server.client().status(a)["status"]["runs"]
    assert [r["state"] for r in runs] == ["failed", "failed"]


def test_a_task_failing_once_is_rerun_and_the_graph_finishes(
    server: Server, legacy_python: Path, tq: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    graph_id, a, b = slug(), slug(), slug()
    marker = tmp_path / "failed-once"
    flaky = f"test -f {marker} || {{ touch {marker}; exit 1; }}"
    body = {
        "scopes": GRAPH_SCOPES,
        "metadata": META,
        "tasks": [node(tq, a, flaky, reruns=1), node(tq, b, "true", [a])],
    }
    run_legacy(
        legacy_python,
        "result = taskcluster.Scheduler(options).createTaskGraph(options['graphId'], options['graph'])",
        options=options(server, graphId=graph_id, graph=body),
    )
    assert wait_until_not_running(server, graph_id) == "finished"
    assert [r["state"] for r in server.client().status(a)["status"]["runs"]] == ["failed", "completed"]


def test_the_label_form_runs_with_subs(
    server: Server, legacy_python: Path, tq: str, worker: WorkerProcess
) -> None:
    graph_id = slug()
    body = {
        "routing": "e2e",
        "scopes": GRAPH_SCOPES,
        "tasks": {
            "build": {"task": task(tq, {"command": sh("true")})},
            "test": {
                "requires": ["build"],
                "task": task(
                    tq, {"command": sh('test -n "$BUILD"'), "env": {"BUILD": {"$subs": "taskId:build"}}}
                ),
            },
        },
    }
    answer = requests.put(f"{server.root_url}/api/scheduler/v1/task-graph/{graph_id}", json=body, timeout=10)
    assert answer.status_code == 403  # unsigned: anonymous callers may not create graphs
    answer = run_legacy(
        legacy_python,
        """
        scheduler = taskcluster.Scheduler(options)
        result = scheduler.createTaskGraph(options["graphId"], options["graph"])
        """,
        options=options(server, graphId=graph_id, graph=body),
    )
    assert answer["status"]["routing"] == "e2e"
    assert wait_until_not_running(server, graph_id) == "finished"
    inspected = requests.get(
        f"{server.root_url}/api/scheduler/v1/task-graph/{graph_id}/inspect", timeout=10
    ).json()
    build, test = inspected["tasks"]
    assert (build["label"], test["label"]) == ("build", "test")
    env = server.client().task(test["taskId"])["payload"]["env"]
    assert env == {"BUILD": build["taskId"]}


def test_the_legacy_client_extends_a_label_form_graph_by_its_earlier_labels(
    server: Server, legacy_python: Path, tq: str
) -> None:
    """The scheduler document's "Add tasks during execution", in the label form: the added tasks
    name the graph's earlier tasks by label. An extend that adds nothing answers the status."""
    graph_id = slug()
    body = {"scopes": GRAPH_SCOPES, "tasks": {"build": {"task": task(tq, {"command": sh("true")})}}}
    more = {
        "test": {
            "requires": ["build"],
            "task": task(tq, {"command": sh("true"), "env": {"BUILD": {"$subs": "taskId:build"}}}),
        }
    }
    answer = run_legacy(
        legacy_python,
        """
        scheduler = taskcluster.Scheduler(options)
        created = scheduler.createTaskGraph(options["graphId"], options["graph"])
        result = {
            "created": created,
            "empty": scheduler.extendTaskGraph(options["graphId"], {"tasks": {}}),
            "extended": scheduler.extendTaskGraph(options["graphId"], {"tasks": options["more"]}),
            "inspect": scheduler.inspect(options["graphId"]),
        }
        """,
        options=options(server, graphId=graph_id, graph=body, more=more),
    )
    assert answer["empty"] == answer["created"]
    assert answer["extended"]["status"]["state"] == "running"
    build, test = answer["inspect"]["tasks"]
    assert (build["label"], test["label"]) == ("build", "test")
    assert test["requires"] == [build["taskId"]] and test["state"] == "unscheduled"
    assert server.client().task(test["taskId"])["payload"]["env"] == {"BUILD": build["taskId"]}
