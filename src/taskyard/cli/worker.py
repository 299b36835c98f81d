"""`taskyard worker`: claim tasks from one task queue and run them (see taskyard.worker)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from taskyard.cli import admin, options, settings
from taskyard.config import ServerConfig, WorkerConfig
from taskyard.model.errors import ConfigError

if TYPE_CHECKING:
    from taskyard.pools.own import OwnPool


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


EXIT_REGISTRATION_FAILED = 78  # sysexits' EX_CONFIG: the worker-manager refused it


def worker_config(args: argparse.Namespace, environ: Mapping[str, str]) -> WorkerConfig:
    values = options.resolve(args, environ)
    found = settings.fields(settings.checked("worker", values, environ, "WorkerConfig"), "WorkerConfig")
    if found["capacity"] < 1:
        raise ConfigError("--capacity", str(found["capacity"]), "a worker runs at least one task at a time")
    if found["register"]:
        if not found["secret_file"]:
            raise ConfigError(
                "--secret-file", "", "--register needs the file that holds the worker's static secret"
            )
        return WorkerConfig(root_url=found["register"].rstrip("/"), client_id="", access_token="", **found)
    connection = admin.connection(args, environ, anonymous=False)
    return WorkerConfig(
        root_url=connection.root_url,
        client_id=connection.client_id,
        access_token=connection.access_token,
        certificate=connection.certificate,
        **found,
    )


async def run_worker(config: WorkerConfig) -> int:
    from taskyard.worker.registration import Registered, register
    from taskyard.worker.worker import Worker

    registered: Registered | None = None
    if config.register:
        try:
            config, registered = await register(config)
        except Exception as exc:  # refused, or the server is unreachable: nothing to run
            print(
                f"taskyard: registering worker {config.worker_group}/{config.worker_id} failed: {exc}",
                file=sys.stderr,
            )
            return EXIT_REGISTRATION_FAILED
    worker = Worker(config, registration=registered)
    worker.install_signal_handlers()
    code = await asyncio.create_task(worker.run())
    if worker.refused:
        print(f"taskyard: {worker.refused}", file=sys.stderr)
    return code


def own_pool(server: ServerConfig, values: Mapping[str, Any]) -> OwnPool | None:
    """`up`'s pool of local workers, on the server's task queue (`--task-queue-id`): one always
    ready, up to `--capacity` (the machine's cores) while work waits. None: `--capacity 0`."""
    found = settings.fields(settings.checked("up", values, {}, "WorkerConfig"), "WorkerConfig")
    if found["capacity"] == 0:
        return None
    from taskyard.pools.own import OwnPool

    return OwnPool(found["task_queue_id"], max_capacity=found["capacity"])
