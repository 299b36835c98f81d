"""What the fault tests and the fault campaign (`bench/chaos.py`) share: a server killed with
SIGKILL and restarted on the same data, and what its database recorded, read straight from it.

The events every committed transition must have published are derived from the database: a task's
definition, and each run's pending, running and resolution (`recorded_transitions`); an event is
matched to one of them by `transition_of`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from tests.e2e import conftest
from tests.e2e.bus import Event
from tests.e2e.conftest import Server

TC = "exchange/taskcluster-queue/v1/"
TASK_EXCHANGES = (
    "task-defined",
    "task-pending",
    "task-running",
    "task-completed",
    "task-failed",
    "task-exception",
)
RESOLUTIONS = {"completed": "task-completed", "failed": "task-failed", "exception": "task-exception"}

Transition = tuple[str, int | None, str]  # (exchange, runId, the run's state after it)


# The server, killed and restarted. ----------------------------------------------------------------


@dataclass
class Lives:
    """One server's successive processes on one database, port, data directory and secrets."""

    current: Server
    kills: int = 0

    @contextlib.contextmanager
    def running(self) -> Iterator[Lives]:
        try:
            yield self
        finally:
            self.current.stop()

    def kill(self) -> None:
        """SIGKILL the whole process group, and wait until it is gone."""
        dead = self.current
        assert dead.process is not None
        os.killpg(dead.process.pid, signal.SIGKILL)
        dead.process.wait(timeout=30)
        if dead in conftest.RUNNING:
            conftest.RUNNING.remove(dead)
        self.kills += 1

    def restart(self) -> None:
        """Start the next process on the same port and data; returns once it answers ping."""
        dead = self.current
        log = dead.data_dir / f"server-{self.kills}.log"
        self.current = replace(dead, process=None, log_file=log, name=f"{dead.name}-{self.kills}").start()

    def kill_and_restart(self) -> None:
        self.kill()
        self.restart()


# What the database recorded. --------------------------------------------------------------------------


def db_rows(db_url: str, sql_sqlite: str, sql_postgres: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows of a query, read straight from the server's database (SQLite file or PostgreSQL)."""
    if db_url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(db_url.removeprefix("sqlite:///"), timeout=30)) as db:
            return list(db.execute(sql_sqlite, args).fetchall())

    async def fetch() -> list[tuple[Any, ...]]:
        import asyncpg

        conn = await asyncpg.connect(db_url, timeout=10)
        try:
            return [tuple(r) for r in await conn.fetch(sql_postgres, *args)]
        finally:
            await conn.close()

    return asyncio.run(fetch())


def task_runs(db_url: str, group: str) -> dict[str, list[dict[str, Any]]]:
    """The runs of each task of `group`, as the database holds them."""
    rows = db_rows(
        db_url,
        "SELECT task_id, runs FROM tasks WHERE task_group_id = ?",
        "SELECT task_id, runs FROM tasks WHERE task_group_id = $1",
        group,
    )
    return {str(task_id): json.loads(runs) for task_id, runs in rows}


def runs_of(db_url: str, group: str) -> list[dict[str, Any]]:
    return [run for runs in task_runs(db_url, group).values() for run in runs]


def transitions_of_runs(runs: list[dict[str, Any]]) -> list[Transition]:
    """A task's transitions as committed, in order, from its runs."""
    steps: list[Transition] = [("task-defined", None, "")]
    for run in runs:
        run_id = int(run["runId"])
        if run["reasonCreated"] != "exception":  # a run created resolved was never pending
            steps.append(("task-pending", run_id, "pending"))
        if "started" in run:
            steps.append(("task-running", run_id, "running"))
        if run["state"] in RESOLUTIONS:
            steps.append((RESOLUTIONS[run["state"]], run_id, run["state"]))
    return steps


def recorded_transitions(db_url: str, group: str) -> dict[str, list[Transition]]:
    """Each task's transitions as committed: (exchange, runId, the run's state after it), in order."""
    return {task_id: transitions_of_runs(runs) for task_id, runs in task_runs(db_url, group).items()}


def unresolved(db_url: str, group: str) -> list[str]:
    done = "state IN ('completed', 'failed', 'exception')"
    rows = db_rows(
        db_url,
        f"SELECT task_id FROM tasks WHERE task_group_id = ? AND NOT {done}",
        f"SELECT task_id FROM tasks WHERE task_group_id = $1 AND NOT {done}",
        group,
    )
    return [str(r[0]) for r in rows]


def outbox_size(db_url: str) -> int:
    """Events written and not yet published."""
    count = "SELECT count(*) FROM unpublished_events"
    (row,) = db_rows(db_url, count, count)
    return int(row[0])


def transition_of(event: Event) -> Transition:
    exchange = event.exchange.removeprefix(TC)
    run_id = event.body.get("runId")
    state = "" if exchange == "task-defined" else event.body["status"]["runs"][run_id]["state"]
    return exchange, run_id, state
