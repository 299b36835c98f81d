"""A real taskgraph decision task on a real `taskyard worker`, through its taskcluster-proxy.

The test makes a small taskgraph repository (a git repository of its own), creates a decision task
as a hook or the GitHub service would (its scopes through a role, its schedulerId
`<trust-domain>-level-<level>`), and lets the worker run `taskgraph decision` in it. The decision
calls the server only through the proxy: createTask for each task of the graph, findTasksAtIndex
and statuses for the `index-search` optimization. The graph runs in dependency order; a second
decision finds the first's build in the index and reuses it, while the test task runs again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import taskcluster

from tests.e2e.conftest import Server
from tests.e2e.helpers import iso, now, slug
from tests.e2e.workers import WorkerProcess, fetch, log_text, resolved

# The console script installed beside this interpreter with taskcluster-taskgraph (dev extras).
TASKGRAPH = Path(sys.executable).parent / "taskgraph"
TRUST_DOMAIN = "yard"
LEVEL = "1"
SCHEDULER_ID = f"{TRUST_DOMAIN}-level-{LEVEL}"
# The build's index path: its `index-search` optimization looks here, its route writes here.
BUILD_INDEX = f"{TRUST_DOMAIN}.v2.demo.cache.build.linux"
# What the repository's metadata names (taskgraph wants a GitHub URL for a git repository's
# `metadata.source`); the decision itself runs in a clone of the test's local repository.
GITHUB_URL = "https://github.com/example/demo"
# A whole graph: the decision, then each task of it in turn (generous: the machine is shared).
GRAPH_TIMEOUT = 300


@pytest.fixture
def worker(server: Server, tq: str, tmp_path: Path) -> Iterator[WorkerProcess]:
    """A worker running two tasks at once, each with its own proxy."""
    process = WorkerProcess(server, tq, tmp_path / "work", args=["--capacity", "2"]).start()
    yield process
    process.stop()


def kinds(tq: str) -> dict[str, str]:
    """The repository's files: the graph's config for taskyard's worker, and three kinds."""
    provisioner, worker_type = tq.split("/")
    return {
        ".taskcluster.yml": "version: 1\ntasks: []\n",  # taskgraph hashes it for actions.json
        "taskcluster/config.yml": f"""
            trust-domain: {TRUST_DOMAIN}
            task-priority: low
            workers:
              aliases:
                linux:
                  provisioner: {provisioner}
                  implementation: generic-worker
                  os: linux
                  worker-type: {worker_type}
            taskgraph:
              repositories:
                demo:
                  name: demo
            """,
        "taskcluster/kinds/build/kind.yml": f"""
            loader: taskgraph.loader.transform:loader
            transforms: [taskgraph.transforms.task:transforms]
            tasks:
              linux:
                description: a build worth reusing
                worker-type: linux
                routes: [index.{BUILD_INDEX}]
                optimization:
                  index-search: [{BUILD_INDEX}]
                worker:
                  max-run-time: 600
                  command: [[bash, -c, 'mkdir -p out && echo built by $TASK_ID > out/app.txt']]
                  artifacts: [{{type: file, path: out/app.txt, name: public/build/app.txt}}]
            """,
        "taskcluster/kinds/test/kind.yml": """
            loader: taskgraph.loader.transform:loader
            transforms: [taskgraph.transforms.task:transforms]
            kind-dependencies: [build]
            tasks:
              linux:
                description: tests the build
                worker-type: linux
                dependencies: {build: build-linux}
                worker:
                  max-run-time: 600
                  command: [[bash, -c, 'echo testing']]
            """,
        # The default loader's run transforms: run-task, which generic-worker payloads get as a
        # file mount of the decision's own public/run-task.
        "taskcluster/kinds/lint/kind.yml": """
            tasks:
              linux:
                description: lints with run-task
                worker-type: linux
                worker: {max-run-time: 600}
                run:
                  using: run-task
                  checkout: false
                  # run-task started as root switches to the user `worker` unless told to stay
                  # root; taskyard's worker runs tasks as its own user, root in a container.
                  run-as-root: true
                  command: 'echo linting in $PWD'
            """,
    }


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
    }
    done = subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def make_repository(repo: Path, tq: str) -> str:
    """A git repository holding the graph; its first commit's revision."""
    for name, text in kinds(tq).items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a graph")
    return git(repo, "rev-parse", "HEAD")


def decision_scopes(tq: str) -> list[str]:
    """What a decision needs, granted by the repository's role: create its tasks (no projectId) in
    the worker's queue at the config's priority, under its schedulerId, with their routes (`checks`
    on every task of a git project, the build's index route); look its index paths up and read the
    statuses of the tasks found there."""
    return [
        f"queue:create-task:low:{tq}",
        "queue:create-task:project:none",
        f"queue:scheduler-id:{SCHEDULER_ID}",
        "queue:route:checks",
        f"queue:route:index.{TRUST_DOMAIN}.v2.demo.*",
        f"index:find-task:{TRUST_DOMAIN}.v2.demo.*",
        "queue:status:*",
    ]


def decision_task(tq: str, repo: Path, head: str, base: str, role: str) -> dict[str, Any]:
    """The decision task as a hook or the GitHub service would create it."""
    command = " ".join(
        [
            f"git clone -q {repo} repo && cd repo && git checkout -q {head} &&",
            f"{TASKGRAPH} decision --pushlog-id 0 --pushdate 0 --project demo",
            f"--owner test@example.com --level {LEVEL} --repository-type git --tasks-for github-push",
            f"--base-repository {GITHUB_URL} --head-repository {GITHUB_URL}",
            f"--head-ref refs/heads/main --head-rev {head} --base-rev {base}",
        ]
    )
    start = now()
    return {
        "taskQueueId": tq,
        "schedulerId": SCHEDULER_ID,
        "created": iso(start),
        "deadline": iso(start + timedelta(hours=1)),
        # The graph's tasks depend on the decision: it must outlive their deadlines (a day).
        "expires": iso(start + timedelta(days=7)),
        "scopes": [f"assume:{role}"],
        "routes": ["checks"],
        "payload": {
            "command": [["bash", "-c", command]],
            "maxRunTime": 600,
            "features": {"taskclusterProxy": True},
            "artifacts": [{"type": "directory", "path": "repo/artifacts", "name": "public"}],
        },
        "metadata": {
            "name": "decision",
            "description": "taskgraph decision",
            "owner": "test@example.com",
            "source": GITHUB_URL,
        },
    }


def decide(server: Server, queue: taskcluster.Queue, task: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """Create the decision (its own task group), wait for it; its label-to-taskid."""
    task_id = slug()
    queue.createTask(task_id, {**task, "taskGroupId": task_id})
    run = resolved(queue, task_id, timeout=GRAPH_TIMEOUT)
    assert run["state"] == "completed", log_text(server, task_id)
    labels = fetch(server, task_id, "public/label-to-taskid.json")
    assert labels.status_code == 200, labels.text
    found: dict[str, str] = labels.json()
    return task_id, found


# An action task's reads (a real one would also create tasks, as the decision does).
ACTION_SCOPES = [
    "auth:current-scopes",
    f"index:find-task:{TRUST_DOMAIN}.v2.demo.*",
    "queue:get-task:*",
    "queue:list-task-group:*",
    "queue:status:*",
]
ACTION = """
import json, sys
from taskgraph.util import taskcluster as tc

decision, build, test, path = sys.argv[1:]
seen = {
    "labels": tc.get_artifact(decision, "public/label-to-taskid.json"),
    "found": tc.find_task_id(path),
    "state": tc.state_task(build),
    "ancestors": tc.get_ancestors(test),
    "incomplete": list(tc.list_task_group_incomplete_tasks(decision)),
    "scopes": sorted(tc.get_current_scopes()),
}
open("result.json", "w").write(json.dumps(seen))
"""


def action_calls(
    server: Server, queue: taskcluster.Queue, tq: str, decision: str, build: str, test: str
) -> dict[str, Any]:
    """What taskgraph's client functions answer in a task with the proxy: getLatestArtifact's
    JSON `{url}`, findTask, status, tasks, listTaskGroup and currentScopes (the role's scopes
    expanded, plus the run's own)."""
    start = now()
    task_id = slug()
    body = {
        "taskQueueId": tq,
        "created": iso(start),
        "deadline": iso(start + timedelta(hours=1)),
        "scopes": ACTION_SCOPES,
        "payload": {
            "command": [[sys.executable, "-c", ACTION, decision, build, test, BUILD_INDEX]],
            "maxRunTime": 600,
            "features": {"taskclusterProxy": True},
            "artifacts": [{"type": "file", "path": "result.json", "name": "public/result.json"}],
        },
        "metadata": {
            "name": "action",
            "description": "reads",
            "owner": "test@example.com",
            "source": GITHUB_URL,
        },
    }
    queue.createTask(task_id, body)
    run = resolved(queue, task_id, timeout=GRAPH_TIMEOUT)
    assert run["state"] == "completed", log_text(server, task_id)
    seen: dict[str, Any] = fetch(server, task_id, "public/result.json").json()
    return seen


def test_a_decision_task_runs_its_graph_and_the_next_reuses_the_indexed_build(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    repo = tmp_path / "demo"
    first = make_repository(repo, tq)
    role = f"project:{TRUST_DOMAIN}:{slug()}:decision"
    server.auth_client().createRole(role, {"description": "the decision's", "scopes": decision_scopes(tq)})

    decision, labels = decide(server, queue, decision_task(tq, repo, first, first, role))
    assert set(labels) == {"build-linux", "test-linux", "lint-linux"}
    build, test, lint = labels["build-linux"], labels["test-linux"], labels["lint-linux"]
    for name in ("task-graph.json", "parameters.yml", "full-task-graph.json", "actions.json"):
        assert fetch(server, decision, f"public/{name}").status_code == 200, name
    graph = fetch(server, decision, "public/task-graph.json").json()
    assert "index.yard.v2.demo.cache.build.linux" in graph[build]["task"]["routes"]
    assert graph[test]["dependencies"] == {"build": build}

    # The graph ran in dependency order: the build after the decision, the test after the build.
    runs = {task_id: resolved(queue, task_id, timeout=GRAPH_TIMEOUT) for task_id in (build, test, lint)}
    for task_id, run in runs.items():
        assert run["state"] == "completed", log_text(server, task_id)
    decision_run = queue.status(decision)["status"]["runs"][0]
    assert runs[build]["started"] >= decision_run["resolved"]
    assert runs[lint]["started"] >= decision_run["resolved"]
    assert runs[test]["started"] >= runs[build]["resolved"]
    assert "linting in" in log_text(server, lint)
    for task_id in (build, test, lint):
        definition = queue.task(task_id)
        assert definition["taskGroupId"] == decision and definition["schedulerId"] == SCHEDULER_ID
    # The server indexed the build from its route.
    index = taskcluster.Index(server.options())
    assert index.findTask(BUILD_INDEX)["taskId"] == build
    assert fetch(server, build, "public/build/app.txt").text.strip() == f"built by {build}"

    # What actions do next, with taskgraph's own client functions through a task's proxy.
    seen = action_calls(server, queue, tq, decision, build, test)
    assert seen["labels"] == labels and seen["found"] == build
    assert seen["state"] == "completed" and seen["incomplete"] == []
    assert seen["ancestors"] == {build: "build-linux", decision: "decision"}
    assert set(ACTION_SCOPES) <= set(seen["scopes"])

    # A second push: the decision finds the build in the index and reuses it; the test runs again.
    (repo / "README").write_text("a change the build does not depend on\n")
    git(repo, "add", "README")
    git(repo, "commit", "-q", "-m", "a second push")
    second = git(repo, "rev-parse", "HEAD")
    decision2, labels2 = decide(server, queue, decision_task(tq, repo, second, first, role))
    assert labels2["build-linux"] == build
    test2 = labels2["test-linux"]
    assert test2 != test
    graph2 = fetch(server, decision2, "public/task-graph.json").json()
    assert set(graph2) == {test2, labels2["lint-linux"]}
    assert graph2[test2]["dependencies"] == {"build": build}
    for task_id in graph2:
        run = resolved(queue, task_id, timeout=GRAPH_TIMEOUT)
        assert run["state"] == "completed", log_text(server, task_id)
        assert run["started"] >= queue.status(decision2)["status"]["runs"][0]["resolved"]
    assert len(queue.status(build)["status"]["runs"]) == 1  # not run again
    # The optimization's log names the build as replaced by the first build's task.
    optimizations = fetch(server, decision2, "public/optimizations.log")
    assert optimizations.status_code == 200, optimizations.text
    assert f"build-linux replaced with {build}" in optimizations.text
