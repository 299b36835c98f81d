"""Running the installed `taskyard` command and parsing its options, for the CLI's tests."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Mapping

from taskyard.cli import main
from taskyard.cli import worker as worker_cli
from taskyard.config import WorkerConfig
from tests.e2e.conftest import ROOT_CLIENT_ID, TASKYARD, Server

Run = Callable[..., subprocess.CompletedProcess[str]]


def run(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`taskyard ARGS` with only `env` of the TASKCLUSTER_* and TASKYARD_* variables."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TASKCLUSTER_", "TASKYARD_"))}
    return subprocess.run(
        [str(TASKYARD), *args], env={**clean, **env}, capture_output=True, text=True, timeout=60
    )


def environment(server: Server, client_id: str = ROOT_CLIENT_ID, token: str | None = None) -> dict[str, str]:
    return {
        "TASKCLUSTER_ROOT_URL": server.root_url,
        "TASKCLUSTER_CLIENT_ID": client_id,
        "TASKCLUSTER_ACCESS_TOKEN": server.access_token if token is None else token,
    }


def unique(name: str) -> str:
    return f"cli-{uuid.uuid4().hex[:8]}/{name}"


def worker_config(argv: list[str], environ: dict[str, str] | None = None) -> WorkerConfig:
    args = main.parser().parse_args(["worker", *argv])
    connection = {"TASKCLUSTER_ROOT_URL": "http://127.0.0.1:8080", "TASKCLUSTER_CLIENT_ID": "c"}
    return worker_cli.worker_config(args, {**connection, "TASKCLUSTER_ACCESS_TOKEN": "t", **(environ or {})})
