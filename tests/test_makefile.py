"""`make up` installs only what running needs; `make test` and `make install` add the dev extras.

Read with `make -n -B` (print every command, as if nothing were built), so nothing is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def commands(target: str) -> str:
    done = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), target], capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout


def test_make_up_installs_taskyard_without_the_dev_extras() -> None:
    up = commands("up")
    assert "pip install --quiet -e .\n" in up
    assert "[dev]" not in up
    assert "taskyard up" in up


@pytest.mark.parametrize("target", ["test", "lint", "bench", "chaos", "install"])
def test_the_development_targets_install_the_dev_extras(target: str) -> None:
    assert "pip install --quiet -e '.[dev]'" in commands(target)


def test_make_chaos_runs_the_fault_campaign_then_the_fuzzer_at_a_higher_count() -> None:
    chaos = commands("chaos")
    assert chaos.index("bench/chaos.py") < chaos.index("TASKYARD_FUZZ_COUNT=50000")
    assert "tests/api/test_fuzz.py" in chaos
