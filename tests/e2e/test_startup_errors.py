"""`taskyard serve` that cannot start says why in a line or two, with what to do, and no traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import _pg_url, postgres_available
from tests.e2e.conftest import TASKYARD, free_port


def serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TASKYARD), "serve", "--data-dir", str(tmp_path), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def told(result: subprocess.CompletedProcess[str], code: int, *advice: str) -> list[str]:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    assert 1 <= len(lines) <= 2, result.stderr
    for words in advice:
        assert words in result.stderr
    return lines


def test_an_unknown_db_scheme_is_a_configuration_error(tmp_path: Path) -> None:
    told(serve(tmp_path, "--port", str(free_port()), "--db", "mysql://x/y"), 2, "sqlite:///", "postgresql://")


def test_an_unknown_log_level_names_the_variable_and_the_levels(tmp_path: Path) -> None:
    result = serve(tmp_path, "--port", str(free_port()), TASKYARD_LOG_LEVEL="verbose")
    told(result, 2, "TASKYARD_LOG_LEVEL", "'verbose'", "DEBUG, INFO, WARNING, ERROR")


def test_unreachable_postgres_names_where_and_masks_the_password(tmp_path: Path) -> None:
    port = free_port()
    db = f"postgresql://postgres:hunter2@127.0.0.1:{port}/taskyard"
    result = serve(tmp_path, "--port", str(free_port()), "--db", db)
    told(result, 3, f"127.0.0.1:{port}", "is it running?")
    assert "hunter2" not in result.stderr


def test_a_missing_database_says_how_to_create_it(tmp_path: Path) -> None:
    if (why := postgres_available()) is not None:
        pytest.skip(why)
    name = f"missing_{uuid.uuid4().hex[:12]}"
    result = serve(tmp_path, "--port", str(free_port()), "--db", _pg_url(name))
    told(result, 3, "does not exist", "createdb -h ", f" {name}")


def test_a_port_in_use_says_how_to_choose_another(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve(tmp_path, "--host", "127.0.0.1", "--port", str(port))
    told(result, 3, f"port {port} on 127.0.0.1 is in use", "--port or TASKYARD_PORT")


def test_several_processes_on_sqlite_are_refused(tmp_path: Path) -> None:
    result = serve(tmp_path, "--port", str(free_port()), "--processes", "2")
    told(result, 2, "processes=2", "needs PostgreSQL")


def test_several_processes_on_unreachable_postgres_say_so_once(tmp_path: Path) -> None:
    port = free_port()
    result = serve(
        tmp_path, "--port", str(free_port()), "--processes", "3", "--db", f"postgresql://127.0.0.1:{port}/x"
    )
    told(result, 3, f"127.0.0.1:{port}", "is it running?")
