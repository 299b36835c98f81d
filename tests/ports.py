"""Ports for the servers tests start, stop and start again on the same port.

A port the kernel hands out for `bind(0)` is one of its ephemeral ports, which it also gives to
outgoing connections as their source port: while a server is down for a restart, any client's
new connection may take its port, and the server can't listen on it again (`eaddrinuse`). So
these ports are chosen below the ephemeral range, where no outgoing connection lands.

Nor may another test take it: under pytest-xdist each worker draws from a slice of that range of
its own (`PYTEST_XDIST_WORKER`), so a port freed by one worker's restart is never found free by
another's `free_port()` in the moment before the server listens again.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on now, below the kernel's ephemeral ports."""
    try:
        ephemeral_low = int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    low, high = _slice(10_000 if ephemeral_low > 12_000 else 1_024, ephemeral_low)
    for _ in range(200):
        port = random.randrange(low, high)
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port of 127.0.0.1 between {low} and {high}")


def _slice(low: int, high: int) -> tuple[int, int]:
    """This xdist worker's part of [low, high): all of it outside xdist."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not worker.startswith("gw") or not worker[2:].isdigit() or not count.isdigit() or int(count) < 1:
        return low, high
    index, width = int(worker[2:]), (high - low) // int(count)
    return low + index * width, low + (index + 1) * width
