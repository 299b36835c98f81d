"""How long Ctrl-C takes to stop `taskyard up`.

R rounds (default 5), each on a new temporary data directory on SQLite: start `taskyard up`, wait
until its local worker runs (a `taskyard worker` child of the server) and `--settle` seconds more
(default 3: its claimWork long poll is under way), while an outside worker's claimWork long poll
waits on another task queue too (unless --no-outside); then SIGINT the process group (as Ctrl-C in
a terminal does: the server and its workers) and time its exit. With `--busy`, each round first
creates a task that sleeps for a minute and waits until it runs, so the stop has a task to stop.
Aim: an idle `up` stops in under 2 s. Printed, never asserted.
Run: .venv/bin/python bench/stop.py [--rounds 5] [--busy]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import taskcluster

TASKYARD = Path(sys.executable).with_name("taskyard")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def workers(pid: int) -> list[int]:
    """The `taskyard worker` children of `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid and b"worker" in command:
            found.append(int(entry.name))
    return found


def wait_for(what: str, check: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def one_round(busy: bool, settle: float, outside: bool) -> tuple[float, list[str]]:
    with tempfile.TemporaryDirectory(prefix="taskyard-stop-") as home:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TASKCLUSTER_", "TASKYARD_"))}
        server = subprocess.Popen(
            [str(TASKYARD), "up", "--port", str(port), "--data-dir", f"{home}/data"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # a process group of its own, which Ctrl-C signals whole
        )
        lines: list[str] = []
        assert server.stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(server.stdout), daemon=True)  # type: ignore[arg-type]
        reader.start()
        try:
            wait_for("the banner", lambda: any("stop with Ctrl-C" in line for line in lines))
            wait_for("the local worker", lambda: workers(server.pid))
            credentials = {}
            for line in lines:
                if "export TASKCLUSTER_" in line:
                    name, value = line.split("export ", 1)[1].strip().split("=", 1)
                    credentials[name] = value
            if outside:
                queue = taskcluster.Queue(
                    {
                        "rootUrl": credentials["TASKCLUSTER_ROOT_URL"],
                        "credentials": {
                            "clientId": credentials["TASKCLUSTER_CLIENT_ID"],
                            "accessToken": credentials["TASKCLUSTER_ACCESS_TOKEN"],
                        },
                        "maxRetries": 0,
                    }
                )
                claim = {"workerGroup": "bench", "workerId": "outside", "tasks": 1}
                threading.Thread(target=lambda: queue.claimWork("bench/outside", claim), daemon=True).start()
            time.sleep(settle)  # the claimWork long polls are under way
            if busy:
                task = Path(home) / "sleep.yml"
                task.write_text(
                    "taskQueueId: local/default\npayload:\n  command: [[sleep, '60']]\n  maxRunTime: 600\n"
                )
                created = subprocess.run(
                    [str(TASKYARD), "task", "create", str(task), "-o", "json"],
                    env={**env, **credentials},
                    capture_output=True,
                    text=True,
                    check=True,
                )
                task_id = json.loads(created.stdout)["status"]["taskId"]

                def state() -> str:
                    done = subprocess.run(
                        [str(TASKYARD), "task", "status", task_id, "-o", "json"],
                        env={**env, **credentials},
                        capture_output=True,
                        text=True,
                    )
                    said = json.loads(done.stdout or "{}")
                    return str(said.get("status", said).get("state"))

                wait_for("the task to run", lambda: state() == "running")
            seen = len(lines)
            start = time.monotonic()
            os.killpg(server.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the server and its workers
            server.wait(timeout=120)
            took = time.monotonic() - start
            reader.join(timeout=5)
            return took, lines[seen:]
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--busy", action="store_true", help="stop with a task running")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds before SIGINT")
    parser.add_argument("--no-outside", action="store_true", help="no outside worker's long poll")
    parser.add_argument("--verbose", action="store_true", help="print what the server printed as it stopped")
    args = parser.parse_args()
    times = []
    for n in range(args.rounds):
        took, said = one_round(args.busy, args.settle, not args.no_outside)
        times.append(took)
        print(f"round {n + 1}: stopped in {took:.2f} s", flush=True)
        if args.verbose:
            for line in said:
                print("    " + line.rstrip())
    times.sort()
    median, most = times[len(times) // 2], times[-1]
    kind = "busy" if args.busy else "idle"
    print(f"{kind} up: median {median:.2f} s, max {most:.2f} s (aim: idle under 2 s)")


if __name__ == "__main__":
    main()
