"""TaskCluster's Python client of the seeds' era, `taskcluster` 1.3.5, in a virtualenv of its own.

That client has the APIs today's client dropped (`Scheduler.createTaskGraph`, `Queue.pollTaskUrls`),
so the tests of those APIs drive taskyard with it. It shares its import name with today's client
and pins an aiohttp that no longer builds, so it lives in its own virtualenv beside the project's
(`.venv/legacy-taskcluster-1.3.5`, built once, by one test process at a time, and kept), installed
with `--no-deps` next to the few packages its synchronous half needs. It calls
`base64.encodestring`, which Python 3.9 removed: `run_legacy` aliases it before importing the client.

Usage, from a test::

    def test_something(legacy_python: Path) -> None:
        answer = run_legacy(legacy_python, '''
            scheduler = taskcluster.Scheduler(options)
            result = scheduler.ping()
        ''', options={"baseUrl": root_url + "/api/scheduler/v1", "credentials": {...}})

The script sees `taskcluster`, `options` and `json`; whatever it assigns to `result` comes back
as JSON. An exception in the script fails the test with the client's own traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.exclusive import exclusive

VERSION = "1.3.5"
PACKAGES = ["requests>=2.20", "mohawk<0.4", "slugid<2", "six"]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

_PRELUDE = """\
import base64, json, sys
base64.encodestring = base64.encodebytes
base64.decodestring = base64.decodebytes
import taskcluster
options = json.loads(sys.argv[1])
result = None
"""

_POSTLUDE = """
sys.stdout.write("\\n@@result@@" + json.dumps(result))
"""


def _venv_dir() -> Path:
    return Path(sys.executable).resolve().parent.parent / f"legacy-taskcluster-{VERSION}"


def build_legacy_venv() -> Path:
    """The legacy client's interpreter, building its virtualenv on first use."""
    venv = _venv_dir()
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if stamp.exists():
        return python
    with exclusive(venv):  # another test process may be building it: wait, then look again
        if stamp.exists():
            return python
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "--no-deps", f"taskcluster=={VERSION}"], check=True, capture_output=True)
        subprocess.run([*pip, *PACKAGES], check=True, capture_output=True)
        stamp.write_text(VERSION + "\n")
    return python


@pytest.fixture(scope="session")
def legacy_python() -> Path:
    """Python of a virtualenv with taskcluster 1.3.5; skips (fails under CI=true) without PyPI."""
    try:
        return build_legacy_venv()
    except subprocess.CalledProcessError as exc:
        output = (exc.stderr or b"").decode(errors="replace")[-400:]
        reason = f"could not install taskcluster {VERSION} from the package index: {output}"
        if IN_CI:
            pytest.fail(reason + " (CI=true: the legacy client tests must run)")
        pytest.skip(reason)


def run_legacy(python: Path, script: str, *, options: dict[str, Any], timeout: float = 120) -> Any:
    """Run `script` with the legacy client and return what it assigned to `result`."""
    code = _PRELUDE + textwrap.dedent(script) + _POSTLUDE
    done = subprocess.run(
        [str(python), "-c", code, json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    if done.returncode != 0:
        pytest.fail(f"the legacy client failed:\n{done.stdout}\n{done.stderr}")
    _, _, tail = done.stdout.rpartition("@@result@@")
    return json.loads(tail)
