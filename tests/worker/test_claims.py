"""The worker's slots: a run's slot frees for the next claim as soon as it is reported, and a claim
whose answer comes after the worker was told to stop is not run."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from taskyard.config import WorkerConfig
from taskyard.worker.client import QueueClient
from taskyard.worker.task import SHUTDOWN, Outcome, TaskRun
from taskyard.worker.worker import Worker
from tests.worker.helpers import claim_of


def worker_in(tmp_path: Path) -> Worker:
    config = WorkerConfig("http://127.0.0.1:1", "c", "t", work_dir=str(tmp_path), capacity=1)
    return Worker(config, client=QueueClient(config.root_url))


async def test_a_slot_is_free_for_the_next_claim_before_the_runs_files_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    removing, removed = threading.Event(), threading.Event()

    async def reported(self: TaskRun) -> Outcome | None:
        return Outcome("completed")

    def clean_up(self: TaskRun) -> None:
        removing.set()
        removed.wait()

    monkeypatch.setattr(TaskRun, "run", reported)
    monkeypatch.setattr(TaskRun, "clean_up", clean_up)
    worker = worker_in(tmp_path)
    try:
        worker._start(claim_of("T", 0))
        assert worker.running
        await asyncio.to_thread(removing.wait)
        # Reported, its files still being removed: the claim loop has been woken to claim again.
        assert worker.running == {} and worker._changed.is_set()
        removed.set()
        await asyncio.gather(*worker._tasks)
    finally:
        removed.set()
        await worker.client.close()


async def test_a_claim_answered_after_sigterm_is_stopped_as_a_worker_shutdown(tmp_path: Path) -> None:
    worker = worker_in(tmp_path)
    try:
        worker.shut_down()
        worker._start(claim_of("T", 0))  # claimWork's answer, arriving just after the signal
        assert worker.running[("T", 0)].abort.reason == SHUTDOWN
        for task in list(worker._tasks):
            task.cancel()
        await asyncio.gather(*worker._tasks, return_exceptions=True)
    finally:
        await worker.client.close()


async def test_a_run_reported_while_the_status_check_asked_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = WorkerConfig("http://127.0.0.1:1", "c", "t", work_dir=str(tmp_path), status_interval=0.01)
    worker = Worker(config, client=QueueClient(config.root_url))
    run = TaskRun(claim_of("T", 0), worker.config, worker.client)
    worker.running[("T", 0)] = run
    answered = asyncio.Event()

    async def statuses(task_ids: list[str], creds: object) -> dict[str, Any]:
        worker.running.pop(("T", 0))  # the run was reported while the call was in flight
        answered.set()
        return {"T": {"taskId": "T", "runs": [{"runId": 0, "state": "completed"}]}}

    monkeypatch.setattr(worker.client, "statuses", statuses)
    watcher = asyncio.create_task(worker._watch_statuses())
    try:
        await answered.wait()
        for _ in range(5):
            await asyncio.sleep(0)
        assert not run.abort.event.is_set()
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        await worker.client.close()
