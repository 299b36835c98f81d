"""`taskyard worker`: claim tasks from one task queue and run them (see taskyard.worker)."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from taskyard.auth import static
from taskyard.cli import admin, options
from taskyard.config import ServerConfig, WorkerConfig
from taskyard.model import identifiers
from taskyard.model.errors import ConfigError

_TASK_QUEUE_ID = re.compile(identifiers.TASK_QUEUE_ID)
_IDENT = re.compile(identifiers.IDENT)
PROTOCOLS = ("claim-work", "poll")


def default_worker_id() -> str:
    """The host's name, made a valid workerId."""
    name = re.sub(r"[^a-zA-Z0-9-_]", "-", socket.gethostname().split(".")[0])[:38]
    return name or "worker"


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


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
    add_worker_options(worker, capacity=1)
    add(
        worker,
        "--protocol",
        "how to find work: claim-work (claimWork's long poll) or poll (pollTaskUrls and the "
        "Azure-queue messages, claimed with claimTask)",
        "claim-work",
    )
    add(worker, "--worker-group", "the worker group this worker reports", "local")
    add(worker, "--worker-id", "this worker's id (default: the host name)", default_worker_id())
    add(worker, "--work-dir", "where task directories and logs live while tasks run", "./work")
    add(worker, "--max-run-time-limit", "the largest maxRunTime a payload may ask, seconds", 86400, int)
    add(
        worker,
        "--status-interval",
        "seconds between checks that running tasks were not cancelled "
        "(every 30 s, as a safety net, while --events tells of cancellations)",
        2.0,
        float,
    )
    add(
        worker,
        "--events",
        "amqp://user:password@host:port/vhost: hear of this worker's cancelled tasks from the "
        "deployment's RabbitMQ and stop them at once (empty or memory://: status checks only)",
        "",
    )


def add(parser: argparse.ArgumentParser, flag: str, help: str, default: Any, kind: Any = str) -> None:
    options.add(parser, flag, help=help, default=default, type=kind)


def add_worker_options(parser: argparse.ArgumentParser, *, capacity: int) -> None:
    """The options `worker` and `up` share."""
    add(parser, "--task-queue-id", "the task queue to claim from (provisionerId/workerType)", "local/default")
    add(parser, "--capacity", "how many tasks run at once", capacity, int)


def check(values: Mapping[str, Any]) -> None:
    """ConfigError naming the option whose value can't work."""
    if not _TASK_QUEUE_ID.fullmatch(values["task_queue_id"]):
        raise ConfigError(
            "--task-queue-id", values["task_queue_id"], "must look like provisioner/worker-type"
        )
    for key in ("worker_group", "worker_id"):
        if key in values and not _IDENT.fullmatch(values[key]):
            raise ConfigError(f"--{key.replace('_', '-')}", values[key], "must be 1-38 of a-z A-Z 0-9 - _")
    if values.get("protocol", "claim-work") not in PROTOCOLS:
        raise ConfigError("--protocol", values["protocol"], f"must be one of: {', '.join(PROTOCOLS)}")
    if not 0 <= values["capacity"] <= 255:
        raise ConfigError("--capacity", str(values["capacity"]), "must be between 0 and 255")


def worker_config(args: argparse.Namespace, environ: Mapping[str, str]) -> WorkerConfig:
    values = options.resolve(args, environ)
    check(values)
    if values["capacity"] < 1:
        raise ConfigError("--capacity", str(values["capacity"]), "a worker runs at least one task at a time")
    connection = admin.connection(args, environ)
    return WorkerConfig(
        root_url=connection.root_url,
        client_id=connection.client_id,
        access_token=connection.access_token,
        certificate=connection.certificate,
        task_queue_id=values["task_queue_id"],
        worker_group=values["worker_group"],
        worker_id=values["worker_id"],
        capacity=values["capacity"],
        work_dir=values["work_dir"],
        max_run_time_limit=values["max_run_time_limit"],
        status_interval=values["status_interval"],
        protocol=values["protocol"],
        events=worker_events(values["events"]),
    )


def worker_events(url: str) -> str:
    """The broker a worker listens to: an amqp(s):// URL, or "" for none (empty or memory://: an
    in-process bus is the server's own, out of a worker's reach). ConfigError for anything else."""
    if url in ("", "memory://"):
        return ""
    from taskyard.events.amqp import check_url

    return check_url(url, "--events")


async def run_worker(config: WorkerConfig) -> int:
    from taskyard.worker.worker import Worker

    worker = Worker(config)
    worker.install_signal_handlers()
    return await asyncio.create_task(worker.run())


def local_worker(server: ServerConfig, values: Mapping[str, Any]) -> WorkerConfig | None:
    """`up`'s own worker: the root client, on the server's root URL, in DATA_DIR/work (None: --capacity 0)."""
    check(values)
    if values["capacity"] == 0:
        return None
    return WorkerConfig(
        root_url=server.root_url,
        client_id=static.ROOT_CLIENT_ID,
        access_token=server.root_access_token,
        task_queue_id=values["task_queue_id"],
        worker_group="local",
        worker_id=default_worker_id(),
        capacity=values["capacity"],
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
