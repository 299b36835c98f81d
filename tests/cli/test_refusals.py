"""What the command line says when something is refused: one or two lines naming what to check.

Against a real server, as the installed `taskyard` command; `--verbose` gives TaskCluster's block.
"""

from __future__ import annotations

import json
from pathlib import Path

from taskyard.cli import refusals
from taskyard.model.client_errors import Refused
from tests.cli.helpers import Run, environment, run, unique
from tests.e2e.conftest import ROOT_CLIENT_ID, Server
from tests.e2e.helpers import slug


def test_a_wrong_token_names_the_client_and_the_variable(server: Server) -> None:
    result = run(environment(server, token="not-the-token"), "task", "status", slug())
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert "Bad mac" in lines[0]
    assert ROOT_CLIENT_ID in lines[1] and "TASKCLUSTER_ACCESS_TOKEN" in lines[1]


def test_an_unknown_client_points_at_the_client_id(server: Server) -> None:
    result = run(environment(server, client_id="nobody-here"), "client", "list")
    assert result.returncode == 1
    assert "nobody-here" in result.stderr and "TASKCLUSTER_CLIENT_ID" in result.stderr
    assert "errorCode" not in result.stderr and len(result.stderr.splitlines()) == 2


def test_an_id_that_is_not_a_slugid_says_so_without_a_regular_expression(cli: Run) -> None:
    for command in (["task", "status", "abc"], ["task", "log", "abc"], ["group", "status", "abc"]):
        said = cli(*command, status=2).stderr
        assert "'abc' is not a task" in said and "22 characters of" in said, said
        assert "^" not in said and "[A-Za-z" not in said


def test_the_server_s_pattern_message_becomes_words() -> None:
    message = "URL parameter taskId 'abc' must match ^[A-Za-z0-9_-]{8}[Q-T]$\n\n---\n\n* method: x"
    said = refusals.explain(Refused(400, "InvalidRequestArguments", message), "me")
    assert said == "'abc' is not a taskId (22 characters of A-Z a-z 0-9 - _, like `taskyard slugid` prints)"


def test_a_task_queue_id_refused_by_the_server_is_not_said_to_be_a_slugid(cli: Run) -> None:
    for command in (["task", "list", "--task-queue", "bad"], ["api", "worker-manager", "workerPool", "bad"]):
        said = cli(*command, status=1).stderr
        assert "'bad' is not a " in said and "provisionerId/workerType" in said, said
        assert "22 characters" not in said and "slugid" not in said, said
    # A parameter whose rule has no words here is shown with the server's own pattern.
    message = "URL parameter roleId 'x\x01' must match ^[\x20-\x7e]+$"
    said = refusals.explain(Refused(400, "InvalidRequestArguments", message), "me")
    assert said == message


def test_a_bad_file_is_named_once_with_its_line(cli: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("taskQueueId: x/y\npayload: [unclosed\n")
    said = cli("task", "create", str(bad), status=2).stderr
    assert said.count(str(bad)) == 1 and "line 3" in said and "not valid YAML" in said, said
    assert "<unicode string>" not in said and len(said.splitlines()) == 1
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{\n  "a": 1,\n}')
    said = cli("task", "create", str(bad_json), status=2).stderr
    assert said.count(str(bad_json)) == 1 and "line 3" in said and "not valid JSON" in said, said


def test_a_port_that_is_not_a_number_must_be_an_integer(tmp_path: Path) -> None:
    result = run({"TASKYARD_PORT": "abc"}, "serve", "--data-dir", str(tmp_path))
    assert result.returncode == 2
    assert "TASKYARD_PORT" in result.stderr and "must be an integer" in result.stderr


def test_a_403_is_one_line_by_default_and_the_full_block_with_verbose(server: Server, cli: Run) -> None:
    client_id = unique("powerless")
    created = json.loads(cli("client", "create", client_id, "--json").stdout)
    env = environment(server, client_id, created["accessToken"])
    role = unique("role")
    short = run(env, "role", "create", role, "--scope", "some:scope")
    assert short.returncode == 1
    assert len(short.stderr.splitlines()) == 1, short.stderr
    assert f"auth:create-role:{role} and some:scope" in short.stderr and client_id in short.stderr
    full = run(env, "role", "create", role, "--scope", "some:scope", "--verbose")
    assert full.returncode == 1
    assert "errorCode:  InsufficientScopes" in full.stderr and '"AllOf"' in full.stderr


def test_scope_expressions_read_as_words() -> None:
    expression = {"AllOf": ["a", {"AnyOf": ["b", "c"]}]}
    assert refusals.expression(expression) == "a and (b or c)"
    assert refusals.expression({"AnyOf": ["x"]}) == "x"
