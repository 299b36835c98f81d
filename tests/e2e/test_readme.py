"""The README's quick starts run as written against a real `taskyard up` (server and worker)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import TASKYARD, Server, start_server

README = Path(__file__).parents[2] / "README.md"


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Server]:
    """`taskyard up` on a fresh SQLite database, as `make up` runs it."""
    data = tmp_path_factory.mktemp("up")
    shutil.copy(request.getfixturevalue("sqlite_template"), data / "taskyard.sqlite3")
    server = start_server(f"sqlite:///{data}/taskyard.sqlite3", data, name="up", command="up")
    yield server
    server.stop()


def environment(server: Server) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TASKCLUSTER_", "TASKYARD_"))},
        "TASKCLUSTER_ROOT_URL": server.root_url,
        "TASKCLUSTER_CLIENT_ID": "static/taskyard/root",
        "TASKCLUSTER_ACCESS_TOKEN": server.access_token,
    }


def block(language: str, after: str) -> str:
    """The first ```language block of the README after the heading `after`."""
    text = README.read_text()
    found = re.search(rf"{re.escape(after)}.*?```{language}\n(.*?)```", text, re.S)
    assert found is not None, f"README.md has no {language} block after {after!r}"
    return found.group(1)


def taskyard(server: Server, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TASKYARD), *args], env=environment(server), cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_the_first_task_runs_to_its_log_and_artifacts(up: Server, tmp_path: Path) -> None:
    commands = block("sh", "## A first task")
    for used in ("taskyard task create hello.yml", "taskyard task log TASK_ID -f", "get-artifact TASK_ID"):
        assert used in commands
    (tmp_path / "hello.yml").write_text(block("yaml", "## A first task"))
    created = taskyard(up, "task", "create", "hello.yml", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    task_id, state = created.stdout.split()
    assert state == "pending"
    followed = taskyard(up, "task", "log", task_id, "-f")
    assert followed.returncode == 0, followed.stderr
    assert f"hello from {task_id}" in followed.stdout
    assert "completed" in followed.stderr
    listed = taskyard(up, "task", "artifacts", task_id)
    assert "public/when.txt" in listed.stdout and "public/logs/live.log" in listed.stdout
    fetched = taskyard(up, "task", "get-artifact", task_id, "public/when.txt")
    assert fetched.returncode == 0 and fetched.stdout.strip(), fetched.stderr


def test_the_python_quick_start_completes_a_task(up: Server) -> None:
    code = block("python", "## The same with TaskCluster's Python client")
    result = subprocess.run(
        [sys.executable, "-c", code], env=environment(up), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "completed"


def test_the_worker_client_example_lets_a_worker_claim(up: Server, tmp_path: Path) -> None:
    """Scaling out's role and client, then its worker command with the printed token: the queue
    accepts the worker's claimWork (it is listed as seen) and SIGINT stops it as documented."""
    env = {**environment(up), "PATH": f"{TASKYARD.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    setup = subprocess.run(
        ["bash", "-e", "-c", block("sh", "A worker's client needs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert setup.returncode == 0, setup.stderr
    token = setup.stdout.strip().splitlines()[-1].strip()
    words = shlex.split(block("sh", "`client create` prints").replace("\\\n", " "))
    assignments = dict(word.split("=", 1) for word in words if re.fullmatch(r"[A-Z_]+=.*", word))
    argv = [word for word in words if word.split("=", 1)[0] not in assignments]
    assert assignments.pop("TASKCLUSTER_ACCESS_TOKEN") == "..." and argv[0] == "taskyard"
    worker_env = {**env, **assignments, "TASKCLUSTER_ACCESS_TOKEN": token}
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen([str(TASKYARD), *argv[1:]], env=worker_env, cwd=tmp_path, stderr=log)
    try:
        for _ in range(300):
            listed = taskyard(up, "worker", "list", "--json")
            if "laptop" in listed.stdout and '"w1"' in listed.stdout:
                break
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            time.sleep(0.1)
        else:
            pytest.fail(f"the worker laptop/w1 was never seen: {listed.stdout}")
    finally:
        worker.send_signal(signal.SIGINT)
        status = worker.wait(timeout=60)
        log.close()
    assert status == 71, (tmp_path / "worker.log").read_text()


def test_the_proxy_task_reads_its_own_definition_through_the_proxy(up: Server, tmp_path: Path) -> None:
    """The first task's proxy example: its command curls the queue through TASKCLUSTER_PROXY_URL
    with the task's scopes alone, and its log shows the answer."""
    (tmp_path / "proxy.yml").write_text(block("yaml", "calls the API through the proxy"))
    created = taskyard(up, "task", "create", "proxy.yml", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    task_id = created.stdout.split()[0]
    followed = taskyard(up, "task", "log", task_id, "-f")
    assert followed.returncode == 0, followed.stdout + followed.stderr
    assert '"taskQueueId":"local/default"' in followed.stdout.replace(" ", "")
    assert "queue:get-task:*" in followed.stdout
