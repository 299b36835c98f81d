"""A private PostgreSQL cluster, for tests (and benchmarks) that stop, restart or break the server.

The shared test server must never be restarted: other suites use it at the same time. This
makes a throwaway cluster instead: `initdb` into a fresh directory, the server on a free
port of 127.0.0.1 (its socket in that directory too), trust authentication, superuser
`postgres`. PostgreSQL refuses to run as root, so when we are root every command runs as the
`postgres` user, in a directory that user owns.

    with PgCluster.create() as cluster:
        storage = await open_storage(cluster.url())
        cluster.restart()

Binaries are found under /usr/lib/postgresql/<version>/bin, in TASKYARD_TEST_PG_BIN, or on PATH.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tests.ports import free_port

SERVER_USER = "postgres"
COMMAND_TIMEOUT = 60
# Durability is not what these clusters are for: skip the flushes, keep them quick.
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "100",
    "shared_buffers": "16MB",
}


def find_binaries() -> Path | None:
    """The directory holding initdb and pg_ctl, or None."""
    candidates = [os.environ.get("TASKYARD_TEST_PG_BIN", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for candidate in candidates:
        if candidate and all((Path(candidate) / tool).is_file() for tool in ("initdb", "pg_ctl")):
            return Path(candidate)
    return None


def _version(path: str) -> tuple[int, ...]:
    name = Path(path).parent.name
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def unavailable_reason() -> str | None:
    """None if a private cluster can be made here, else why not."""
    if find_binaries() is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl) found"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root, and there is no {SERVER_USER!r} user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root, and there is no runuser to run PostgreSQL as another user"
    return None


@dataclass
class PgCluster:
    """One private cluster: made by `create()`, removed by `destroy()` (or leaving `with`)."""

    bin_dir: Path
    root: Path
    port: int

    @classmethod
    def create(cls, *, settings: dict[str, str] | None = None) -> PgCluster:
        """initdb a new cluster and start it."""
        bin_dir = find_binaries()
        if bin_dir is None:
            raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl) found")
        root = Path(tempfile.mkdtemp(prefix="taskyard-pg-"))
        cluster = cls(bin_dir, root, free_port())
        try:
            if os.geteuid() == 0:
                user = pwd.getpwnam(SERVER_USER)
                os.chown(root, user.pw_uid, user.pw_gid)
            cluster._run(
                "initdb", "-D", str(cluster.data_dir), "-U", "postgres", "--auth=trust",
                "--no-sync", "--no-locale", "-E", "UTF8",
            )  # fmt: skip
            options = {**SETTINGS, **(settings or {})}
            options.update(port=str(cluster.port), unix_socket_directories=str(root))
            with (cluster.data_dir / "postgresql.conf").open("a") as conf:
                conf.writelines(f"{key} = '{value}'\n" for key, value in options.items())
            cluster.start()
        except BaseException:
            cluster.destroy()
            raise
        return cluster

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        self._pg_ctl("start", "-l", str(self.log_path))

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` disconnects every client (57P01), `immediate` kills it outright."""
        self._pg_ctl("stop", "-m", mode)

    def restart(self, mode: str = "fast") -> None:
        """Stop the server as `stop(mode)` does, then start it again; returns once it accepts."""
        self._pg_ctl("restart", "-m", mode, "-l", str(self.log_path))

    def running(self) -> bool:
        return self._pg_ctl("status", check=False).returncode == 0

    def destroy(self) -> None:
        """Stop the server (outright) if it runs, and delete every file of the cluster."""
        if (self.data_dir / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self._pg_ctl("stop", "-m", "immediate", check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, lines: int = 50) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no log: {exc})"

    def _pg_ctl(self, action: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run("pg_ctl", action, "-D", str(self.data_dir), "-w", "-t", "60", *args, check=check)

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        done = subprocess.run(
            command, cwd=self.root, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{tool} {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}\n"
                + self.log_tail()
            )
        return done

    def __enter__(self) -> PgCluster:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.destroy()
