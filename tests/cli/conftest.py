"""The CLI's end-to-end tests drive the real server of `tests/e2e` (one per module and backend)."""

from __future__ import annotations

import subprocess

import pytest

from tests.cli.helpers import Run, environment, run
from tests.e2e.conftest import Server, module_db_url, pytest_runtest_makereport, server, tq

__all__ = ["module_db_url", "pytest_runtest_makereport", "server", "tq"]


@pytest.fixture
def cli(server: Server) -> Run:
    """Run `taskyard` as the root client of the module's server; expect success unless `status=`."""

    def runner(*args: str, status: int = 0, **env: str) -> subprocess.CompletedProcess[str]:
        result = run({**environment(server), **env}, *args)
        assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
        return result

    return runner
