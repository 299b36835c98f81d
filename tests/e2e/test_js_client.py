"""TaskCluster's JavaScript client authenticates against taskyard unchanged (Hawk, certificates, bewits)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import IN_CI
from tests.e2e.conftest import Server
from tests.exclusive import exclusive

JS = Path(__file__).parent / "js"


def _need(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        if IN_CI:
            pytest.fail(f"{tool} is needed for the JavaScript client test (CI=true: it must run)")
        pytest.skip(f"{tool} is not installed")
    return found


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The JavaScript client, installed once from the lock file (npm ci)."""
    node, npm = _need("node"), _need("npm")
    del node
    # Another test process may be installing it (npm ci empties node_modules first): wait for it.
    with exclusive(JS / "node_modules"):
        if not (JS / "node_modules" / "taskcluster-client").exists():
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=JS, check=True, timeout=300
            )
    return JS / "node_modules"


def test_the_javascript_client_runs_a_task_through_its_lifecycle(
    server: Server, node_modules: Path, tq: str
) -> None:
    env = {
        **os.environ,
        "TASKCLUSTER_ROOT_URL": server.root_url,
        "TASKCLUSTER_CLIENT_ID": server.credentials["clientId"],
        "TASKCLUSTER_ACCESS_TOKEN": server.access_token,
        "TASK_QUEUE_ID": tq,
    }
    run = subprocess.run(
        ["node", "lifecycle.mjs"], cwd=JS, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["created"] == "pending"
    assert result["claimed"] is True
    assert result["completed"] == "completed"
    assert result["workerCannotCancel"] == {"statusCode": 403, "code": "InsufficientScopes"}
    assert result["signedUrl"] == {"status": 200, "state": "completed"}
    assert result["narrowedStatus"] == "completed"
    assert result["narrowedTask"] == {"statusCode": 403, "code": "InsufficientScopes"}
    assert result["wrongToken"] == {"statusCode": 401, "code": "AuthenticationFailed"}
