"""The `taskyard serve` process the scale bench measures: timed to its first ping, its memory, and
waiting until it is idle."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from pathlib import Path

import httpx
from bench import lifecycle as lc
from bench.lifecycle import Server, now


class TimedServer(Server):
    """lifecycle's Server, started with a finer ping loop that times spawn -> first answered ping."""

    ready_s: float = float("nan")
    ready_cpu_s: float = float("nan")  # the server's own CPU until then: steadier on a busy machine

    async def start(self) -> None:
        cmd = [*self.command, "serve", "--port", str(self.port), "--data-dir", str(self.data_dir)]
        cmd += ["--db", self.db_url] if self.db_url else []
        env = {k: v for k, v in os.environ.items() if not k.startswith("TASKYARD_")}
        env.update(TASKYARD_ROOT_ACCESS_TOKEN=self.token, TASKYARD_LOG_LEVEL="WARNING")
        url = f"{self.root_url}/api/queue/v1/ping"
        async with httpx.AsyncClient(timeout=2) as client:
            with self.log_path.open("ab") as log:
                spawned = now()
                self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            lc.RUNNING.append(self.proc)
            while now() - spawned < 60:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"taskyard serve exited with {self.proc.returncode}:\n{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(url)).status_code == 200:
                        self.ready_s = now() - spawned
                        self.ready_cpu_s = lc.proc_cpu_seconds(self.proc.pid)
                        return
                await asyncio.sleep(0.01)
        raise RuntimeError(f"taskyard serve did not answer ping within 60 s:\n{self.log_tail()}")


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of the process, in MB (the kernel reports kB)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}


async def settle(server: Server, quiet: float = 0.1, give_up: float = 30.0) -> None:
    """Wait until the server is idle (under `quiet` of a core over half a second): the work a step
    left behind (events to relay, dependents to announce) must not be timed by the next step."""
    started = now()
    while now() - started < give_up:
        before = lc.proc_cpu_seconds(server.pid)
        await asyncio.sleep(0.5)
        if lc.proc_cpu_seconds(server.pid) - before < quiet * 0.5:
            return
