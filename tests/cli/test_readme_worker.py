"""The README's worker example, followed literally against a real `taskyard serve`: the role, the
client, then `taskyard worker` with the client's token runs a task. And the same worker with the
default worker group, which the role does not grant: one short line naming the missing scope."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

from tests.cli.helpers import Run
from tests.e2e.conftest import TASKYARD, Server

README = Path(__file__).parent.parent.parent / "README.md"


def example_commands() -> list[list[str]]:
    """The shell commands of the two blocks after "A worker's client needs", in order."""
    text = README.read_text()
    section = text[text.index("A worker's client needs") :]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)[:2]
    commands = []
    for block in blocks:
        joined = block.replace("\\\n", " ")
        commands += [shlex.split(line) for line in joined.splitlines() if line.strip()]
    return commands


def worker_env(words: list[str], token: str, server: Server) -> tuple[dict[str, str], list[str]]:
    """`NAME=value ... taskyard worker ...`: the variables, with `...` the printed token, and the command."""
    env = {}
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        env[name] = token if value == "..." else value
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TASKCLUSTER_", "TASKYARD_"))}
    return {**clean, "TASKCLUSTER_ROOT_URL": server.root_url, **env}, words


def test_the_readme_worker_example_works_when_followed_literally(
    server: Server, cli: Run, tmp_path: Path
) -> None:
    role, client, worker = example_commands()
    assert role[:3] == ["taskyard", "role", "create"] and client[:3] == ["taskyard", "client", "create"]
    cli(*role[1:])
    made = cli(*client[1:]).stdout
    token = made.strip().splitlines()[-1].strip()  # printed once, on the last line
    env, command = worker_env(worker, token, server)
    assert command[:2] == ["taskyard", "worker"]

    task = tmp_path / "hello.yml"
    task.write_text("taskQueueId: local/default\npayload:\n  command: [[echo, hello]]\n  maxRunTime: 60\n")
    task_id = cli("task", "create", str(task)).stdout.split()[0]
    (tmp_path / "w").mkdir()
    with subprocess.Popen(
        [str(TASKYARD), *command[1:], "--idle-timeout", "2"],
        env=env,
        cwd=tmp_path / "w",
        stderr=subprocess.PIPE,
        text=True,
    ) as running:
        try:
            _, err = running.communicate(timeout=90)
        finally:
            running.kill()
    assert running.returncode == 0, err
    assert "completed" in cli("task", "status", task_id).stdout

    # The same worker without --worker-group (its default is `local`): the role grants laptop/*.
    default_group = [word for word in command[1:] if word not in ("--worker-group", "laptop")]
    refused = subprocess.run(
        [str(TASKYARD), *default_group],
        env=env,
        cwd=tmp_path / "w",
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert refused.returncode == 77
    said = [line for line in refused.stderr.splitlines() if " INFO " not in line]
    assert said == [
        "taskyard: the queue refused claimWork for client 'laptop/w1': it lacks queue:worker-id:local/w1 "
        "(worker local/w1 on task queue local/default); grant it, or give the --worker-group and "
        "--worker-id its scopes allow"
    ], refused.stderr
