"""No setting turns authentication off: a server started with the variable that once did (for
benchmarks) still authenticates every request and checks every scope, on the API and the pages."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.e2e.conftest import START_TIMEOUT, TASKYARD
from tests.ports import free_port

# Every variable that has ever switched checks off, set as a benchmark would have set it.
SWITCHES = {"TASKYARD_BENCH_SKIP_AUTH": "1", "TASKYARD_SKIP_AUTH": "1", "TASKYARD_NO_AUTH": "1"}


@pytest.fixture
def switched_server(tmp_path: Path) -> Iterator[str]:
    """A `taskyard serve` on loopback (SQLite) with the switches set: its root URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKYARD_")}
    env |= SWITCHES | {"TASKYARD_ROOT_ACCESS_TOKEN": secrets.token_urlsafe(24)}
    command = [
        str(TASKYARD),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        str(tmp_path),
    ]
    with (tmp_path / "server.log").open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    root = f"http://127.0.0.1:{port}"
    try:
        give_up = time.monotonic() + START_TIMEOUT
        while True:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if requests.get(f"{root}/api/queue/v1/ping", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < give_up, (tmp_path / "server.log").read_text()
            time.sleep(0.05)
        yield root
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)


def test_the_switches_turn_nothing_off(switched_server: str) -> None:
    api = f"{switched_server}/api/queue/v1"
    unsigned = requests.get(f"{api}/task-queues", timeout=10)
    assert unsigned.status_code == 403, unsigned.text  # the anonymous caller, without the scope
    assert unsigned.json()["code"] == "InsufficientScopes"
    forged = 'Hawk id="static/taskyard/root", ts="1", nonce="n", mac="bm90IGEgbWFj"'
    badly_signed = requests.get(f"{api}/task-queues", headers={"authorization": forged}, timeout=10)
    assert badly_signed.status_code == 401, badly_signed.text
    assert badly_signed.json()["code"] == "AuthenticationFailed"
    page = requests.get(f"{switched_server}/workers", headers={"accept": "text/html"}, timeout=10)
    assert page.status_code == 401 and "Sign in" in page.text
