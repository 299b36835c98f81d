"""The scale-out example (deploy/docker-compose.yml) stays true: every taskyard command it runs
parses with today's command line, and the server's options make a valid scale-out config."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import yaml

from taskyard.cli import options
from taskyard.cli.main import parser
from tests.cli.helpers import Run, environment
from tests.e2e.conftest import TASKYARD, Server

COMPOSE = Path(__file__).parents[2] / "deploy" / "docker-compose.yml"


def commands() -> dict[str, list[str]]:
    """The command of each service built from the project's image, `${VAR:-default}` expanded."""
    services: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
    # worker-setup runs a shell script (its entrypoint is sh): test_the_worker_setup_... below.
    built = {name: s["command"] for name, s in services.items() if "build" in s and "entrypoint" not in s}
    expand = re.compile(r"\$\{[A-Z0-9_]+:-([^}]*)\}")
    return {name: [expand.sub(r"\1", word) for word in command] for name, command in built.items()}


def test_the_example_runs_several_api_processes_and_a_worker() -> None:
    assert {c[0] for c in commands().values()} == {"serve", "worker"}


def test_the_servers_options_are_a_valid_scale_out_config(tmp_path: Path) -> None:
    for command in commands().values():
        args = parser().parse_args(command)
        if args.command != "serve":
            continue
        values = options.resolve(args, {})
        values["data_dir"] = str(tmp_path)
        config = options.server_config(values, {})
        assert config.processes > 1
        assert config.db_url.startswith("postgresql://")
        assert config.events.startswith("amqp://")
        assert config.artifacts.startswith("s3://")


def test_the_worker_setup_then_the_static_worker_run_a_task(server: Server, cli: Run, tmp_path: Path) -> None:
    """worker-setup's script (as compose runs it, `$$` being `$`), against a real server: it records
    the static worker and its secret, again changes nothing; the worker's command, with no client,
    registers with that secret and runs a task of proj/linux."""
    found: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
    secret_dir = str(tmp_path / "secret")
    Path(secret_dir).mkdir()
    script = (
        found["worker-setup"]["command"][0].replace("$$", "$").replace("/home/taskyard/secret", secret_dir)
    )
    env = {**os.environ, **environment(server), "PATH": f"{TASKYARD.parent}:{os.environ['PATH']}"}
    for _ in range(2):  # a second `docker compose up` finds the worker there and keeps its secret
        done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    secret = Path(secret_dir, "static-secret")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600

    task = tmp_path / "hello.yml"
    task.write_text("taskQueueId: proj/linux\npayload:\n  command: [[echo, hello]]\n  maxRunTime: 60\n")
    task_id = cli("task", "create", str(task)).stdout.split()[0]
    command = [
        word.replace("http://queue:8080", server.root_url)
        .replace("/home/taskyard/secret", secret_dir)
        .replace("/home/taskyard/work", str(tmp_path / "work"))
        for word in found["worker"]["command"]
        if not word.startswith("--events=")  # this machine's RabbitMQ is not the example's
    ]
    no_client = {k: v for k, v in os.environ.items() if not k.startswith(("TASKCLUSTER_", "TASKYARD_"))}
    worker = subprocess.run(
        [str(TASKYARD), *command, "--idle-timeout", "2"],
        env=no_client,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode == 0, worker.stderr
    assert "completed" in cli("task", "status", task_id).stdout
