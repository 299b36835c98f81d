"""The README's quick start runs as written against a real server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import Server

README = Path(__file__).parents[2] / "README.md"


def test_the_readme_quick_start_completes_a_task(server: Server) -> None:
    snippet = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert snippet is not None, "README.md has no python quick start"
    env = {
        **os.environ,
        "TASKCLUSTER_ROOT_URL": server.root_url,
        "TASKCLUSTER_CLIENT_ID": "static/taskyard/root",
        "TASKCLUSTER_ACCESS_TOKEN": server.access_token,
    }
    # The quick start uses the queue `local/default`; give it a queue of its own here.
    code = snippet.group(1).replace("local/default", "readme-prov/quick-start")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "completed"
