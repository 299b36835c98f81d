"""`make up` installs only what running needs; `make test` and `make install` add the dev extras;
`make test` is the whole suite, `make check` lint and the tier of tests that run in one process;
both install from lock files, every file checked against its hash, which `make lock` writes.

Read with `make -n -B` (print every command, as if nothing were built), so nothing is installed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def commands(target: str, *variables: str) -> str:
    done = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), target, *variables],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return done.stdout


def test_make_up_installs_taskyard_without_the_dev_extras() -> None:
    up = commands("up")
    assert "pip install --quiet --require-hashes -r requirements.lock\n" in up
    assert up.index("requirements.lock") < up.index(
        "pip install --quiet --no-deps --no-build-isolation -e .\n"
    )
    assert "[dev]" not in up and "requirements-dev.lock" not in up
    assert "taskyard up" in up


@pytest.mark.parametrize("target", ["test", "check", "lint", "bench", "chaos", "install"])
def test_the_development_targets_install_the_dev_extras(target: str) -> None:
    done = commands(target)
    assert "pip install --quiet --require-hashes -r requirements-dev.lock\n" in done
    assert "pip install --quiet --no-deps --no-build-isolation -e .\n" in done


def test_make_lock_writes_the_development_lock_then_the_runtime_one_at_its_versions() -> None:
    lock = commands("lock")
    assert "pip install --quiet 'pip-tools==" in lock  # the resolver's version is pinned too
    dev = lock.index("-o requirements-dev.lock pyproject.toml")
    runtime = lock.index("--constraint requirements-dev.lock -o requirements.lock pyproject.toml")
    assert dev < runtime
    assert lock.count("--generate-hashes") == 2
    assert "--upgrade-package starlette" in commands("lock", "UPGRADE=starlette")


@pytest.mark.parametrize(
    ("stamp", "lock"), [("install", "requirements-dev.lock"), ("up", "requirements.lock")]
)
def test_a_changed_lock_file_installs_again(tmp_path: Path, stamp: str, lock: str) -> None:
    """The install stamps depend on the lock files: a venv installed before `make lock` (or a pull
    that changed a lock file) installs again; an unchanged one does not."""
    for name in ("Makefile", "pyproject.toml", "requirements.lock", "requirements-dev.lock"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    for made in (".venv/bin/python", ".venv/.installed", ".venv/.installed-runtime"):
        (tmp_path / made).touch()
        os.utime(tmp_path / made, (2e9, 2e9))  # newer than the copies
    target = "install" if stamp == "install" else ".venv/.installed-runtime"

    def dry(*args: str) -> str:
        run = ["make", "-n", "-C", str(tmp_path), *args, target]
        return subprocess.run(run, capture_output=True, text=True, check=True, timeout=30).stdout

    assert "pip install" not in dry()
    assert f"--require-hashes -r {lock}" in dry("-W", lock)


def locked(name: str) -> dict[str, str]:
    """A lock file's pins, by normalized name; each must be exact and carry its hashes."""
    pins = {}
    for entry in re.split(r"\n(?=\S)", (ROOT / name).read_text()):
        if entry.startswith("#") or not entry.strip():
            continue
        found = re.match(r"([A-Za-z0-9._-]+)==(\S+)", entry)
        assert found, f"{name}: not an exact pin: {entry.splitlines()[0]}"
        assert "--hash=sha256:" in entry, f"{name}: {found[1]} has no hash"
        pins[normalized(found[1])] = found[2]
    return pins


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(requirements: list[str]) -> set[str]:
    return {normalized(re.match(r"[A-Za-z0-9._-]+", each)[0]) for each in requirements}  # type: ignore[index]


def test_the_lock_files_hold_every_declared_dependency_at_one_version() -> None:
    """A dependency added to pyproject.toml without `make lock` fails here, not at install time."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime, dev = locked("requirements.lock"), locked("requirements-dev.lock")
    build = declared(tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"])
    assert declared(project["dependencies"]) | build <= runtime.keys(), "run `make lock`"
    assert declared(project["optional-dependencies"]["dev"]) | runtime.keys() <= dev.keys(), "run `make lock`"
    assert {name: dev[name] for name in runtime} == runtime  # the same versions in both


def test_make_up_installs_taskclusters_client_for_the_readmes_example() -> None:
    """The README's client example runs after `make up` alone: `taskcluster` is in the runtime lock."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    runtime = locked("requirements.lock")
    assert "taskcluster" in declared(extras["client"])
    assert declared(extras["client"]) <= runtime.keys(), "run `make lock`"
    lock = commands("lock")
    assert "--extra dev --extra client -o requirements-dev.lock" in lock
    assert "--extra client --constraint requirements-dev.lock -o requirements.lock" in lock


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
