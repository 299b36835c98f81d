"""A real `taskyard serve` process per module (or per test), driven by TaskCluster's own client.

The server runs as a subprocess in its own process group, on a free port, with short timeouts
given as flags. Its output goes to a log file; when a test fails, the log of every server that was
running is attached to the report ("taskyard serve ... log" sections).

Databases come from the fixtures of `tests/conftest.py`: `db_url` (one fresh database per test)
for servers started by a single test, and `module_db_url` below (the same templates, one database
per module and backend) for the server a whole module shares.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import requests
import taskcluster

from tests.conftest import _pg_admin, _pg_url
from tests.ports import free_port

if TYPE_CHECKING:  # tests.e2e.tails imports this module
    from tests.e2e.tails import Tail

TASKYARD = Path(sys.executable).parent / "taskyard"
ROOT_CLIENT_ID = "static/taskyard/root"
START_TIMEOUT = 30.0

# The module-shared server's settings. claimWork's long poll is short so that an empty poll costs
# little; claims last long enough that no test sees one expire unless it waits for it.
CLAIM_TIMEOUT = 60
CLAIM_WORK_TIMEOUT = 2.0
RESOLVER_INTERVAL = 0.2

RUNNING: list[Server] = []


@dataclass
class Server:
    """One `taskyard serve` process."""

    name: str
    db_url: str
    data_dir: Path
    access_token: str
    claim_timeout: int
    claim_work_timeout: float
    resolver_interval: float
    deadline_delay: float
    secret_key: str = ""  # TASKYARD_SECRET_KEY; derived from the root token when empty
    port: int = field(default_factory=free_port)
    extra_args: list[str] = field(default_factory=list)  # more `taskyard serve` flags
    command: str = "serve"  # or "up": the same server with a local worker
    log_file: Path | None = None  # where its output goes; DATA_DIR/server.log when None
    process: subprocess.Popen[bytes] | None = None

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api(self) -> str:
        return f"{self.root_url}/api/queue/v1"

    @property
    def log_path(self) -> Path:
        return self.log_file or self.data_dir / "server.log"

    @property
    def credentials(self) -> dict[str, str]:
        return {"clientId": ROOT_CLIENT_ID, "accessToken": self.access_token}

    def options(self, credentials: dict[str, Any] | None = None) -> dict[str, Any]:
        """Options for TaskCluster's clients: this server, root credentials unless others are given."""
        return {
            "rootUrl": self.root_url,
            "credentials": credentials if credentials is not None else self.credentials,
            "maxRetries": 0,  # a 5xx is a failure to see, not something to paper over
        }

    def client(self, credentials: dict[str, Any] | None = None) -> taskcluster.Queue:
        """TaskCluster's Queue client for this server: root credentials unless others are given."""
        return taskcluster.Queue(self.options(credentials))

    def auth_client(self, credentials: dict[str, Any] | None = None) -> taskcluster.Auth:
        """TaskCluster's Auth client for this server: root credentials unless others are given."""
        return taskcluster.Auth(self.options(credentials))

    def start(self) -> Server:
        """Launch the process and wait until it answers ping."""
        self.launch()
        try:
            self._wait_until_up()
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self) -> subprocess.Popen[bytes]:
        """Start the process without waiting for it: for one that is expected to refuse."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            str(TASKYARD),
            self.command,
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            "--db",
            self.db_url,
            "--claim-timeout",
            str(self.claim_timeout),
            "--claim-work-timeout",
            str(self.claim_work_timeout),
            "--resolver-interval",
            str(self.resolver_interval),
            "--deadline-delay",
            str(self.deadline_delay),
            *self.extra_args,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TASKYARD_")}
        env["TASKYARD_ROOT_ACCESS_TOKEN"] = self.access_token
        # Processes sharing a database must share the key client tokens are derived from.
        env["TASKYARD_SECRET_KEY"] = self.secret_key or f"e2e-secret-key-{self.access_token}"
        env["PYTHONUNBUFFERED"] = "1"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        RUNNING.append(self)
        return self.process

    def _wait_until_up(self) -> None:
        assert self.process is not None
        give_up = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                pytest.fail(
                    f"taskyard serve exited with {self.process.returncode} before answering ping:\n"
                    + self.log_tail()
                )
            try:
                reply = requests.get(f"{self.api}/ping", timeout=2)
                if reply.status_code == 200 and reply.json().get("alive") is True:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > give_up:
                pytest.fail(
                    f"taskyard serve did not answer ping within {START_TIMEOUT}s:\n" + self.log_tail()
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Kill the whole process group: SIGTERM, then SIGKILL if it lingers."""
        if self in RUNNING:
            RUNNING.remove(self)
        if self.process is None or self.process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def log_tail(self, lines: int = 200) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        return "\n".join(text.splitlines()[-lines:])


def start_server(
    db_url: str,
    data_dir: Path,
    *,
    name: str = "server",
    access_token: str | None = None,
    claim_timeout: int = CLAIM_TIMEOUT,
    claim_work_timeout: float = CLAIM_WORK_TIMEOUT,
    resolver_interval: float = RESOLVER_INTERVAL,
    deadline_delay: float = 0.0,
    extra_args: list[str] | None = None,
    command: str = "serve",
) -> Server:
    return Server(
        name=name,
        db_url=db_url,
        data_dir=data_dir,
        access_token=access_token or secrets.token_urlsafe(24),
        claim_timeout=claim_timeout,
        claim_work_timeout=claim_work_timeout,
        resolver_interval=resolver_interval,
        deadline_delay=deadline_delay,
        extra_args=extra_args or [],
        command=command,
    ).start()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the logs of the running servers to a failed test's report."""
    report = yield
    if report.failed:
        for server in RUNNING:
            report.sections.append((f"taskyard serve {server.name} log ({server.db_url})", server.log_tail()))
    return report


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def module_db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Like `db_url` (same templates), but one fresh database per module and backend."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("db") / "taskyard.sqlite3"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    template = request.getfixturevalue("pg_template")
    name = f"taskyard_e2e_{uuid.uuid4().hex[:10]}"
    _pg_admin(f"CREATE DATABASE {name} TEMPLATE {template}")
    yield _pg_url(name)
    _pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def server(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the whole module (per backend); tests keep apart by their own taskQueueIds."""
    running = start_server(module_db_url, tmp_path_factory.mktemp("server"), name="shared")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def queue(server: Server) -> taskcluster.Queue:
    """The root client of the module's server."""
    return server.client()


@pytest.fixture
def tq(request: pytest.FixtureRequest) -> str:
    """A taskQueueId of this test alone."""
    from tests.e2e.helpers import task_queue_id

    return task_queue_id(request.node.originalname)


@pytest.fixture
def two_servers(db_url: str, tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    """Processes A and B sharing one database, root token and secret key, as one deployment does."""
    first = start_server(db_url, tmp_path / "a", name="A")
    try:
        second = start_server(db_url, tmp_path / "b", name="B", access_token=first.access_token)
    except BaseException:
        first.stop()
        raise
    yield first, second
    second.stop()
    first.stop()


@pytest.fixture
def moto_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's S3 as a real HTTP server on a free loopback port, with bucket `artifacts`."""
    from moto.server import ThreadedMotoServer

    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    port = free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    endpoint = f"http://127.0.0.1:{port}"
    import boto3

    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="artifacts")
    yield endpoint
    moto.stop()


@pytest.fixture
def tails() -> Iterator[list[Tail]]:
    """The `taskyard events tail` processes a test starts, stopped after it."""
    started: list[Tail] = []
    yield started
    for tail in started:
        tail.stop()
