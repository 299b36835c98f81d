"""`taskyard events tail` as a real process, for the end-to-end tests that follow events with it."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO

from tests.e2e.bus import EVENTS_URL
from tests.e2e.conftest import TASKYARD


class Tail:
    """`taskyard events tail ARGS...`, its output read line by line as it comes."""

    def __init__(self, *args: str, stdout: int = subprocess.PIPE, env: dict[str, str] | None = None) -> None:
        """From the shared RabbitMQ, unless `env` says otherwise (TASKCLUSTER_* for the server's stream)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TASKYARD_", "TASKCLUSTER_"))} | (
            {"TASKYARD_EVENTS": EVENTS_URL} if env is None else env
        )
        self.process = subprocess.Popen(
            [str(TASKYARD), "events", "tail", *args],
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            self._read(stream, into)
            for stream, into in ((self.process.stdout, self.out), (self.process.stderr, self.err))
            if stream is not None
        ]
        self.wait_until(lambda: any(line.startswith("following ") for line in self.err), "the bindings")

    def _read(self, stream: IO[str], into: list[str]) -> threading.Thread:
        def read() -> None:
            for line in stream:
                into.append(line.rstrip("\n"))

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        return thread

    def wait_until(self, condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
        give_up = time.monotonic() + timeout
        while not condition():
            assert self.process.poll() is None or condition(), (
                f"tail exited {self.process.returncode}: {self.err}"
            )
            assert time.monotonic() < give_up, f"timed out waiting for {what}; out {self.out}, err {self.err}"
            time.sleep(0.02)

    def lines(self, count: int) -> list[str]:
        self.wait_until(lambda: len(self.out) >= count, f"{count} lines")
        return self.out[:count]

    def finish(self, timeout: float = 30) -> int:
        code = self.process.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return code

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.finish()
