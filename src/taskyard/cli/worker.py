"""`taskyard worker`: claim tasks from one task queue and run them (see taskyard.worker)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from taskyard.auth import static
from taskyard.cli import admin, options, settings
from taskyard.cli.settings import default_worker_id, worker_events
from taskyard.config import ServerConfig, WorkerConfig
from taskyard.model.errors import ConfigError


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser(
        "worker",
        help="claim tasks from a task queue and run them",
        description="Claim tasks from a task queue and run their commands (generic-worker's payload). "
        "SIGINT: finish running tasks, claim no more, exit 71 (twice: as SIGTERM). SIGTERM: resolve "
        "running tasks exception/worker-shutdown so the queue retries them, exit 72. Another live worker "
        "on the same --work-dir: refuse at once, exit 3.",
    )
    admin.add_connection_options(worker)
    options.add_declared(worker, "worker")


def worker_config(args: argparse.Namespace, environ: Mapping[str, str]) -> WorkerConfig:
    values = options.resolve(args, environ)
    found = settings.fields(settings.checked("worker", values, environ, "WorkerConfig"), "WorkerConfig")
    if found["capacity"] < 1:
        raise ConfigError("--capacity", str(found["capacity"]), "a worker runs at least one task at a time")
    connection = admin.connection(args, environ, anonymous=False)
    return WorkerConfig(
        root_url=connection.root_url,
        client_id=connection.client_id,
        access_token=connection.access_token,
        certificate=connection.certificate,
        **found,
    )


async def run_worker(config: WorkerConfig) -> int:
    from taskyard.worker.worker import Worker

    worker = Worker(config)
    worker.install_signal_handlers()
    code = await asyncio.create_task(worker.run())
    if worker.refused:
        print(f"taskyard: {worker.refused}", file=sys.stderr)
    return code


def local_worker(server: ServerConfig, values: Mapping[str, Any]) -> WorkerConfig | None:
    """`up`'s own worker: the root client, on the server's root URL, in DATA_DIR/work (None: --capacity 0).

    Of the worker's options `up` takes `--task-queue-id` and `--capacity`; the others are fixed."""
    found = settings.fields(settings.checked("up", values, {}, "WorkerConfig"), "WorkerConfig")
    if found["capacity"] == 0:
        return None
    return WorkerConfig(
        root_url=server.root_url,
        client_id=static.ROOT_CLIENT_ID,
        access_token=server.root_access_token,
        worker_group="local",
        worker_id=default_worker_id(),
        **found,
        work_dir=str(Path(server.data_dir, "work").absolute()),
        events=worker_events(server.events),
    )


def worker_process(config: WorkerConfig) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run `config` as a `taskyard worker` process."""
    command = [sys.executable, "-m", "taskyard.cli.main", "worker"]
    for flag, value in (
        ("--task-queue-id", config.task_queue_id),
        ("--worker-group", config.worker_group),
        ("--worker-id", config.worker_id),
        ("--capacity", config.capacity),
        ("--work-dir", config.work_dir),
        ("--max-run-time-limit", config.max_run_time_limit),
        ("--status-interval", config.status_interval),
        ("--protocol", config.protocol),
    ):
        command += [flag, str(value)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TASKCLUSTER_", "TASKYARD_"))}
    env.update(
        TASKCLUSTER_ROOT_URL=config.root_url,
        TASKCLUSTER_CLIENT_ID=config.client_id,
        TASKCLUSTER_ACCESS_TOKEN=config.access_token,
    )
    if config.events:  # in the environment, not on the command line: `ps` shows command lines
        env["TASKYARD_EVENTS"] = config.events
    if "TASKYARD_LOG_LEVEL" in os.environ:
        env["TASKYARD_LOG_LEVEL"] = os.environ["TASKYARD_LOG_LEVEL"]
    return command, env
