"""`taskyard hook list|show|create|update|remove|trigger|fires` against a real server: definitions
from YAML and JSON files, a trigger with a payload file, the fires listed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import taskcluster

from tests.cli.helpers import Run
from tests.e2e.conftest import Server

DEFINITION = """\
metadata:
  name: cli hook
  description: made by the CLI's test
  owner: cli@example.com
schedule: ["0 0 2 * * *"]
triggerSchema: {type: object}
task:
  taskQueueId: cli/hooks
  payload: {}
  metadata:
    name: "fired by ${firedBy} for ${payload.who}"
    description: "-"
    owner: cli@example.com
    source: https://example.com/cli
"""


def test_define_trigger_and_inspect(server: Server, cli: Run, tmp_path: Path) -> None:
    group = f"cli-{uuid.uuid4().hex[:8]}"
    taskcluster.Auth(server.options()).createRole(
        f"hook-id:{group}/nightly",
        {"description": "cli", "scopes": ["queue:create-task:*", "queue:scheduler-id:*"]},
    )
    yaml_file = tmp_path / "hook.yml"
    yaml_file.write_text(DEFINITION)
    assert f"Created hook {group}/nightly" in cli("hook", "create", group, "nightly", str(yaml_file)).stdout
    assert group in cli("hook", "list").stdout.splitlines()
    assert "0 0 2 * * *" in cli("hook", "list", group).stdout
    shown = json.loads(cli("hook", "show", group, "nightly").stdout)
    assert shown["metadata"]["name"] == "cli hook" and shown["schedule"] == ["0 0 2 * * *"]
    payload = tmp_path / "payload.json"
    payload.write_text('{"who": "carol"}')
    fired = cli("hook", "trigger", group, "nightly", "--payload", str(payload)).stdout
    task_id = fired.strip().rsplit(" ", 1)[-1]
    assert server.client().task(task_id)["metadata"]["name"] == "fired by triggerHook for carol"
    assert task_id in cli("hook", "fires", group, "nightly").stdout
    json_file = tmp_path / "hook.json"
    json_file.write_text(json.dumps({**shown, "schedule": []}))
    cli("hook", "update", group, "nightly", str(json_file))
    assert json.loads(cli("hook", "show", group, "nightly").stdout)["schedule"] == []
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**shown, "schedule": ["not cron"]}))
    refused = cli("hook", "update", group, "nightly", str(bad), status=1)
    assert "schedule[0]" in refused.stderr
    assert "Removed hook" in cli("hook", "remove", group, "nightly").stdout
    cli("hook", "show", group, "nightly", status=1)
