"""Ports for the servers tests start, stop and start again on the same port.

A port the kernel hands out for `bind(0)` is one of its ephemeral ports, which it also gives to
outgoing connections as their source port: while a server is down for a restart, any client's
new connection may take its port, and the server can't listen on it again (`eaddrinuse`). So
these ports are chosen below the ephemeral range, where no outgoing connection lands.
"""

from __future__ import annotations

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
    low = 10_000 if ephemeral_low > 12_000 else 1_024
    for _ in range(200):
        port = random.randrange(low, ephemeral_low)
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port of 127.0.0.1 between {low} and {ephemeral_low}")
