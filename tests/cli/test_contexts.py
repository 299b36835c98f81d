"""Named contexts, `taskyard signin`, anonymous reads, and the small tools: `slugid`, `completion`,
a sub-command's usage for an unknown flag, and `up --help`."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import uuid
from pathlib import Path

import pytest
import taskcluster
import yaml

from taskyard.model import slugid
from tests.cli.helpers import environment, run
from tests.e2e.conftest import ROOT_CLIENT_ID, TASKYARD, Server
from tests.e2e.helpers import create


def config_env(tmp_path: Path, **more: str) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path), **more}


def test_contexts_are_saved_0600_and_used_after_flags_and_variables(
    server: Server, tmp_path: Path, tq: str
) -> None:
    env = config_env(tmp_path)
    saved = run({**env, **environment(server)}, "config", "set-context", "here")
    assert saved.returncode == 0, saved.stderr
    file = tmp_path / "xdg" / "taskyard" / "config.yaml"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert yaml.safe_load(file.read_text())["current-context"] == "here"

    task_id = create(server.client(), tq)
    by_context = run(env, "task", "status", task_id)  # no TASKCLUSTER_* variable at all
    assert by_context.returncode == 0 and task_id in by_context.stdout, by_context.stderr
    # A variable wins over the context: this wrong token is the one used.
    wrong = run(
        {**env, "TASKCLUSTER_CLIENT_ID": ROOT_CLIENT_ID, "TASKCLUSTER_ACCESS_TOKEN": "x"},
        "task",
        "status",
        task_id,
    )
    assert wrong.returncode == 1 and "TASKCLUSTER_ACCESS_TOKEN" in wrong.stderr

    assert run(env, "config", "set-context", "elsewhere", "--root-url", "http://127.0.0.1:9").returncode == 0
    assert run(env, "config", "use-context", "elsewhere").returncode == 0
    listed = run(env, "config", "get-contexts").stdout
    assert "* elsewhere" in listed and server.access_token not in listed
    assert "cannot reach" in run(env, "task", "status", task_id).stderr
    assert run(env, "task", "status", task_id, "--context", "here").returncode == 0
    assert "not in" in run(env, "config", "use-context", "nowhere").stderr

    # The context's credentials never go to another root URL (here the same server, named apart).
    other_name = server.root_url.replace("127.0.0.1", "localhost")
    elsewhere = run(env, "task", "status", task_id, "--context", "here", "--root-url", other_name)
    assert elsewhere.returncode == 1 and "requires Taskcluster credentials" in elsewhere.stderr


def test_an_explicit_context_wins_over_the_variables_before_or_after_the_command(
    server: Server, tmp_path: Path, tq: str
) -> None:
    """`--context NAME` is what the user pointed the command at: the exported TASKCLUSTER_*
    variables (here the root client's) do not override it, and it may come before the command."""
    env = config_env(tmp_path)
    task_id = create(server.client(), tq)
    wrong = {**environment(server), "TASKCLUSTER_ACCESS_TOKEN": "wrong"}
    assert run({**env, **wrong}, "config", "set-context", "w2").returncode == 0
    assert run({**env, **environment(server)}, "config", "set-context", "good").returncode == 0
    root = {**env, **environment(server)}
    for args in (
        ["task", "status", task_id, "--context", "w2"],
        ["--context", "w2", "task", "status", task_id],
    ):
        as_w2 = run(root, *args)
        assert as_w2.returncode == 1 and "TASKCLUSTER_ACCESS_TOKEN" in as_w2.stderr, (args, as_w2.stderr)
    exported_wrong = {**env, **wrong}
    for args in (["task", "status", task_id, "--context", "good"], ["--context", "good", "queue", "list"]):
        as_good = run(exported_wrong, *args)
        assert as_good.returncode == 0, (args, as_good.stderr)
    # The command's own --context, after it, wins over the one before it.
    assert run(root, "--context", "w2", "task", "status", task_id, "--context", "good").returncode == 0
    # Flags still win over the context.
    flagged = run(
        root, "--context", "good", "task", "status", task_id, "--client-id", "x", "--access-token", "x"
    )
    assert flagged.returncode == 1 and "TASKCLUSTER_CLIENT_ID" in flagged.stderr
    refused = run(env, "--context", "good", "slugid")
    assert (
        refused.returncode == 2 and "--context applies only to commands that call the API" in refused.stderr
    )


def test_signin_makes_temporary_credentials_that_work(server: Server, tmp_path: Path, tq: str) -> None:
    env = config_env(tmp_path)
    made = run({**env, **environment(server)}, "signin", "--expires-in", "1h", "--save-as", "temp")
    assert made.returncode == 0, made.stderr
    context = yaml.safe_load((tmp_path / "xdg" / "taskyard" / "config.yaml").read_text())["contexts"]["temp"]
    assert (
        json.loads(context["certificate"])["expiry"] - json.loads(context["certificate"])["start"]
        <= 3_900_000
    )
    assert context["accessToken"] != server.access_token
    task_id = create(server.client(), tq)
    assert run(env, "task", "status", task_id).returncode == 0  # signed with the temporary ones

    printed = run(environment(server), "signin", "--scope", f"queue:status:{task_id}").stdout
    exported = dict(line.removeprefix("export ").split("=", 1) for line in printed.splitlines())
    assert json.loads(exported["TASKCLUSTER_CERTIFICATE"].strip("'"))["scopes"] == [f"queue:status:{task_id}"]


def test_public_logs_are_read_anonymously(server: Server, tq: str, tmp_path: Path) -> None:
    queue = server.client()
    task_id = create(queue, tq)
    claim = queue.claimWork(tq, {"workerGroup": "g", "workerId": "w", "tasks": 1})["tasks"][0]
    worker = server.client(claim["credentials"])
    worker.createArtifact(
        task_id,
        "0",
        "public/logs/live.log",
        {
            "storageType": "reference",
            "url": f"{server.root_url}/",
            "expires": claim["task"]["expires"],
            "contentType": "text/plain",
        },
    )
    env = {**config_env(tmp_path), "TASKCLUSTER_ROOT_URL": server.root_url}
    got = run(env, "task", "get-artifact", task_id, "public/logs/live.log")
    assert got.returncode == 0, got.stderr


def test_slugid_prints_fresh_slugids(tmp_path: Path) -> None:
    made = run({}, "slugid", "-n", "3").stdout.split()
    assert len(set(made)) == 3 and all(slugid.is_valid(s) for s in made)


def test_an_unknown_flag_prints_the_sub_command_s_usage() -> None:
    said = run({}, "task", "status", slugid.nice(), "--bogus")
    assert said.returncode == 2
    assert (
        said.stderr.startswith("usage: taskyard task status")
        and "unrecognized arguments: --bogus" in said.stderr
    )


def test_up_help_says_it_starts_worker_processes() -> None:
    said = " ".join(run({}, "up", "--help").stdout.split())
    assert "beside it as child processes, a local worker pool" in said


def test_bash_completion_completes_commands_flags_and_task_queues(server: Server, tq: str) -> None:
    create(server.client(), tq)
    server.client().claimWork(tq, {"workerGroup": "g", "workerId": "w", "tasks": 1})  # the queue is known now
    script = run({}, "completion", "bash").stdout

    def complete(*words: str) -> list[str]:
        line = " ".join(f"'{w}'" for w in words)
        cword = len(words) - 1
        program = f'{script}\nCOMP_WORDS=({line}); COMP_CWORD={cword}; _taskyard; echo "${{COMPREPLY[@]}}"'
        env = {"PATH": f"{TASKYARD.parent}:/usr/bin:/bin", **environment(server)}
        done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("taskyard", "ta") == ["task"]
    assert set(complete("taskyard", "task", "")) >= {"create", "list", "def", "log"}
    assert complete("taskyard", "task", "create", "--task-g") == ["--task-group-id"]
    assert tq in complete("taskyard", "task", "list", "--task-queue", "")
    pool = f"{tq.split('/')[0]}/pool-{uuid.uuid4().hex[:6]}"
    definition = {"providerId": "static", "description": "", "config": {}, "owner": "a@example.com"}
    taskcluster.WorkerManager(server.options()).createWorkerPool(pool, {**definition, "emailOnError": False})
    assert pool in complete("taskyard", "pool", "show", "")
    assert pool in complete("taskyard", "pool", "workers", pool.split("/")[0])
    assert complete("taskyard", "pool", "workers", pool, "--st") == ["--state"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_are_generated(shell: str) -> None:
    script = run({}, "completion", shell).stdout
    assert "task-group-id" in script and "task-queues" in script
    if shutil.which(shell):
        check = ["zsh", "-n", "-c", script] if shell == "zsh" else ["fish", "--no-execute", "-c", script]
        assert subprocess.run(check, capture_output=True, timeout=60).returncode == 0


@pytest.mark.parametrize("text", ["contexts: {x: !!int abc}\n", "a: !!bool maybe\n", "b: [\n", "\xff"])
def test_an_unreadable_config_file_is_one_line_naming_it_never_a_traceback(tmp_path: Path, text: str) -> None:
    file = tmp_path / "config.yaml"
    file.write_bytes(text.encode("latin-1"))
    result = run({"TASKYARD_CONFIG": str(file)}, "config", "get-contexts")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and str(file) in result.stderr, result.stderr
