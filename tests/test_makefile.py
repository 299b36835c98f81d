"""`make up` installs only what running needs; `make test` and `make install` add the dev extras;
`make test` is the whole suite, `make check` lint and the tier of tests that run in one process.

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


@pytest.mark.parametrize("target", ["test", "check", "lint", "bench", "chaos", "install"])
def test_the_development_targets_install_the_dev_extras(target: str) -> None:
    assert "pip install --quiet -e '.[dev]'" in commands(target)


def test_make_chaos_runs_the_fault_campaign_then_the_fuzzer_at_a_higher_count() -> None:
    chaos = commands("chaos")
    assert chaos.index("bench/chaos.py") < chaos.index("TASKYARD_FUZZ_COUNT=50000")
    assert "tests/api/test_fuzz.py" in chaos


def last_command(target: str) -> str:
    return [line for line in commands(target).splitlines() if not line.startswith("make")][-1]


def test_make_test_runs_the_whole_suite() -> None:
    assert last_command("test") == ".venv/bin/pytest"


def test_make_check_lints_then_runs_the_one_process_tier_and_prints_its_time() -> None:
    check = commands("check")
    linting = [line for line in commands("lint").splitlines() if "ruff" in line or "mypy" in line]
    assert len(linting) == 3 and all(line in check for line in linting)
    tests = check.index(".venv/bin/pytest tests ")
    assert all(check.index(line) < tests for line in linting)  # and only if lint passed: `&&`
    for left_out in ("tests/e2e", "tests/cli", "tests/browser", "tests/upgrade"):
        assert f"--ignore={left_out} " in check
    assert "-m 'not postgres and not slow'" in check
    assert last_command("check").endswith('echo "make check: $(( $(date +%s) - start )) s"; exit $status')
