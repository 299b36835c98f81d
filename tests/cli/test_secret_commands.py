"""`taskyard secret get|set|list|remove` against a real server: values from stdin or a file."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

from taskyard.model import dates
from tests.cli.helpers import Run, environment
from tests.e2e.conftest import TASKYARD, Server


def unique(name: str) -> str:
    return f"cli-{uuid.uuid4().hex[:8]}/{name}"


def with_stdin(server: Server, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TASKCLUSTER_", "TASKYARD_"))}
    return subprocess.run(
        [str(TASKYARD), *args],
        env={**clean, **environment(server)},
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_set_from_stdin_get_list_remove(server: Server, cli: Run) -> None:
    name = unique("deploy")
    done = with_stdin(server, '{"token": "s3cr3t", "n": [1, 2]}', "secret", "set", name, "--expires-in", "2h")
    assert done.returncode == 0, done.stderr
    assert f"Set secret {name}" in done.stdout and "s3cr3t" not in done.stdout
    assert json.loads(cli("secret", "get", name).stdout) == {"token": "s3cr3t", "n": [1, 2]}
    answer = json.loads(cli("secret", "get", name, "-o", "json").stdout)
    assert answer["secret"]["token"] == "s3cr3t"
    assert dates.parse_iso(answer["expires"]) - dates.now_ms() > 3600_000
    assert name in cli("secret", "list").stdout.splitlines()
    assert name in json.loads(cli("secret", "list", "-o", "json").stdout)
    assert f"Removed secret {name}" in cli("secret", "remove", name).stdout
    missing = cli("secret", "get", name, status=1)
    assert "ResourceNotFound" in missing.stderr or "not found" in missing.stderr


def test_set_from_a_file_with_an_expiry_date(server: Server, cli: Run, tmp_path: Path) -> None:
    name = unique("from-file")
    path = tmp_path / "value.json"
    path.write_text('{"key": "from a file"}')
    cli("secret", "set", name, "--file", str(path), "--expires", "2999-01-01T00:00:00Z")
    answer = json.loads(cli("secret", "get", name, "-o", "json").stdout)
    assert answer == {"secret": {"key": "from a file"}, "expires": "2999-01-01T00:00:00.000Z"}


def test_a_value_that_is_no_json_object_exits_2_without_quoting_it(server: Server) -> None:
    for text, rule in [('{"token": "s3cr3t"', "not valid JSON"), ('["s3cr3t"]', "must hold a JSON object")]:
        done = with_stdin(server, text, "secret", "set", unique("bad"))
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert rule in done.stderr and "s3cr3t" not in done.stderr + done.stdout


def test_the_value_cannot_be_given_on_the_command_line(server: Server, cli: Run) -> None:
    refused = cli("secret", "set", unique("argv"), '{"token": "s3cr3t"}', status=2)
    assert "unrecognized arguments" in refused.stderr
