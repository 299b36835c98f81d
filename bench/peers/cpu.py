"""CPU seconds from /proc for the peers' parts (standard library only: it runs in the peers' venv).

The parties of a peer are its sender (this process), its worker (a process tree) and the services
it uses: PostgreSQL's backends of its scratch database plus PostgreSQL's shared background
processes, or RabbitMQ (beam.smp) and Redis as wholes, since they serve every database and vhost.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process(pid: int) -> float:
    """utime + stime of one process (all its threads)."""
    with contextlib.suppress(OSError, IndexError):
        fields = _stat(pid)
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    return 0.0


def tree(pid: int) -> float:
    """A process and its living descendants (a Celery worker's pool processes)."""
    total = process(pid)
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += tree(int(child))
    return total


def named(*names: str) -> float:
    """Every process whose command name is one of `names` (beam.smp, redis-server)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip() in names:
                    total += process(int(entry.name))
    return total


def postgres(database: str) -> float:
    """PostgreSQL's backends serving `database`, plus its background processes (WAL writer...)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if (entry / "comm").read_text().strip() != "postgres":
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            is_backend = "(" in cmdline or "[local]" in cmdline
            if not is_backend or f" {database} " in cmdline:
                total += process(int(entry.name))
    return total


def own() -> float:
    return time.process_time()
