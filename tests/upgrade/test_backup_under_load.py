"""A backup taken while the server is busy restores to a consistent queue that serves.

A real `taskyard serve` on SQLite; two clients create tasks (some depending on others, some on
a task queue nobody claims), claim them and resolve them every way, in a loop. Meanwhile
`taskyard backup` (the real command, holding no lock) copies the database three times. Each
copy is restored with `taskyard restore` into a fresh data directory, and then:

- the queue in it is consistent (`queue.consistency`): states agree with runs, the claim
  index with the pending tasks, the outbox refers to tasks that exist;
- it holds every task whose creation had been answered before the backup started;
- it serves: a pending task from the backup is claimed and completed.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import taskcluster

from taskyard.queue import consistency
from taskyard.storage import open_storage
from tests.upgrade import servers
from tests.upgrade.databases import fetch_raw

SECRET_KEY = "backup-under-load-secret-key"
ROOT_TOKEN = "backup-under-load-root-token"
WORK = "load/work"
BACKLOG = "load/backlog"  # nobody claims these: every backup holds pending tasks
TASKYARD = str(Path(sys.executable).parent / "taskyard")
BACKUPS = 3
ROUNDS_BETWEEN_BACKUPS = 15


class Load:
    """Clients keeping the server writing until `stop` is set; `created` is every task answered."""

    def __init__(self, server: servers.Served) -> None:
        self.server = server
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.created: set[str] = set()
        self.rounds = 0
        self.round_done = threading.Condition(self.lock)
        self.errors: list[BaseException] = []

    def run(self, worker_id: str) -> None:
        queue = self.server.queue()
        try:
            n = 0
            while not self.stop.is_set():
                self.one_round(queue, worker_id, n)
                n += 1
                with self.round_done:
                    self.rounds += 1
                    self.round_done.notify_all()
        except BaseException as exc:
            self.errors.append(exc)
            with self.round_done:
                self.round_done.notify_all()

    def one_round(self, queue: taskcluster.Queue, worker_id: str, n: int) -> None:
        first = self.create(queue, WORK)
        self.create(queue, WORK, dependencies=[first])
        self.create(queue, BACKLOG)
        claimed = queue.claimWork(WORK, {"workerGroup": "load", "workerId": worker_id, "tasks": 2})["tasks"]
        for i, claim in enumerate(claimed):
            task_id, run_id = claim["status"]["taskId"], str(claim["runId"])
            outcome = (n + i) % 4
            if outcome == 0:
                queue.reportCompleted(task_id, run_id)
            elif outcome == 1:
                queue.reportFailed(task_id, run_id)
            elif outcome == 2:
                queue.reportException(task_id, run_id, {"reason": "worker-shutdown"})  # retried
            # else: left running, its claim held

    def create(self, queue: taskcluster.Queue, task_queue_id: str, **extra: Any) -> str:
        task_id = taskcluster.slugId()
        body = {
            "taskQueueId": task_queue_id,
            "created": taskcluster.fromNowJSON("0 seconds"),
            "deadline": taskcluster.fromNowJSON("1 day"),
            "retries": 2,
            "payload": {},
            "metadata": {
                "name": "load",
                "description": "d",
                "owner": "o@example.com",
                "source": "https://e.com",
            },
            **extra,
        }
        queue.createTask(task_id, body)
        with self.lock:
            self.created.add(task_id)
        return task_id

    def wait_for_rounds(self, count: int) -> None:
        with self.round_done:
            while self.rounds < count and not self.errors:
                self.round_done.wait()
        assert not self.errors, self.errors


def taskyard(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKYARD_")}
    return subprocess.run([TASKYARD, *args], env=env, capture_output=True, text=True, timeout=120)


def test_a_backup_taken_under_load_restores_to_a_consistent_queue(tmp_path: Path) -> None:
    data_dir = tmp_path / "live"
    taken: list[tuple[Path, set[str]]] = []
    with servers.serve(
        f"sqlite:///{data_dir}/taskyard.sqlite3", data_dir, secret_key=SECRET_KEY, root_token=ROOT_TOKEN
    ) as server:
        load = Load(server)
        clients = [threading.Thread(target=load.run, args=(f"w{i}",)) for i in range(2)]
        for client in clients:
            client.start()
        try:
            for n in range(BACKUPS):
                load.wait_for_rounds((n + 1) * ROUNDS_BETWEEN_BACKUPS)
                with load.lock:
                    answered = set(load.created)
                backup = tmp_path / f"backup-{n}.sqlite3"
                made = taskyard("backup", str(backup), "--data-dir", str(data_dir))
                assert made.returncode == 0, made.stderr
                assert made.stdout.startswith(f"wrote {backup}: ")
                taken.append((backup, answered))
            rounds_during = load.rounds
        finally:
            load.stop.set()
            for client in clients:
                client.join(timeout=60)
        assert not load.errors, load.errors
        assert rounds_during >= BACKUPS * ROUNDS_BETWEEN_BACKUPS

    for n, (backup, answered) in enumerate(taken):
        check_restored(tmp_path / f"restored-{n}", backup, answered)


def check_restored(data_dir: Path, backup: Path, answered: set[str]) -> None:
    restored = taskyard("restore", str(backup), "--data-dir", str(data_dir))
    assert restored.returncode == 0, restored.stderr
    db_url = f"sqlite:///{data_dir}/taskyard.sqlite3"
    in_backup = {row[0] for row in asyncio.run(fetch_raw(db_url, "SELECT task_id FROM tasks"))}
    assert answered <= in_backup, f"{len(answered - in_backup)} tasks answered before the backup are missing"
    assert asyncio.run(_problems(db_url)) == []

    with servers.serve(db_url, data_dir, secret_key=SECRET_KEY, root_token=ROOT_TOKEN) as server:
        queue = server.queue()
        claimed = queue.claimWork(BACKLOG, {"workerGroup": "restored", "workerId": "w", "tasks": 1})["tasks"]
        assert len(claimed) == 1, "the backup holds no pending task"
        task_id, run_id = claimed[0]["status"]["taskId"], str(claimed[0]["runId"])
        assert task_id in in_backup
        assert queue.reportCompleted(task_id, run_id)["status"]["state"] == "completed"
    assert server.process.returncode == 0, server.log()
    assert asyncio.run(_problems(db_url)) == []


async def _problems(db_url: str) -> list[str]:
    storage = await open_storage(db_url)
    try:
        return await consistency.problems(storage)
    finally:
        await storage.close()
