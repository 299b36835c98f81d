"""The README's quick starts run as written against a real `taskyard up` (server and worker)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
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
