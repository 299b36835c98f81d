"""What each command refuses at start, word for word: the messages operators and scripts know, kept
as the options' declaration (`cli/settings.py`) checks them."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskyard.cli import main, options
from taskyard.cli import worker as worker_cli
from taskyard.config import ServerConfig
from taskyard.model.errors import ConfigError

SERVE_REFUSALS = [
    (["--claim-timeout", "0"], {}, "configuration claim-timeout=0 is not valid: must be at least 1 second"),
    (["--port", "0"], {}, "configuration port=0 is not valid: must be between 1 and 65535"),
    (
        ["--claim-messages", "always"],
        {},
        "configuration claim-messages='always' is not valid: must be one of: optional, required",
    ),
    ([], {"TASKYARD_PORT": "65536"}, "configuration port=65536 is not valid: must be between 1 and 65535"),
    (
        ["--max-artifact-bytes", "0"],
        {},
        "configuration max-artifact-bytes=0 is not valid: must be at least 1",
    ),
    (
        ["--max-live-log-bytes", "-1"],
        {},
        "configuration max-live-log-bytes=-1 is not valid: must be at least 1",
    ),
    (
        ["--event-retention", "0"],
        {},
        "configuration event-retention=0.0 is not valid: must be above 0 and at most 604800 (7 days)",
    ),
    (
        ["--processes", "65"],
        {},
        "configuration processes=65 is not valid: must be between 1 and 64",
    ),
    (
        ["--processes", "2"],
        {},
        "configuration processes=2 is not valid: above 1 needs PostgreSQL (--db postgresql://...): "
        "a SQLite database is served by one process",
    ),
    (
        ["--max-in-flight", "-1"],
        {},
        "configuration max-in-flight=-1 is not valid: must be 0 (no bound) or more",
    ),
    (
        [],
        {"TASKYARD_KEEP_ALIVE_TIMEOUT": "3601"},
        "configuration keep-alive-timeout=3601 is not valid: must be above 0 and at most 3600 seconds",
    ),
    (
        ["--artifacts", "/tmp/blobs"],
        {},
        "configuration artifacts='/tmp/blobs' is not valid: must start with file:// or s3://",
    ),
    (
        ["--scheduler-id", "no spaces"],
        {},
        "configuration scheduler-id='no spaces' is not valid: must be 1 to 38 letters, digits, `-` or `_`",
    ),
    (
        ["--event-profiles", "tc,pulse"],
        {},
        "configuration event-profiles='tc,pulse' is not valid: must be a comma-separated list of tc, seed",
    ),
    (
        ["--events", "rabbitmq://u:hunter2@rabbit/"],
        {},
        "configuration events='rabbitmq://u:***@rabbit/' is not valid: "
        "must be memory:// or amqp://user:password@host:port/vhost",
    ),
    ([], {"TASKYARD_PORT": "http"}, "configuration TASKYARD_PORT='http' is not valid: must be an integer"),
    (
        [],
        {"TASKYARD_HEAD_TIMEOUT": "soon"},
        "configuration TASKYARD_HEAD_TIMEOUT='soon' is not valid: must be a number",
    ),
]


@pytest.mark.parametrize(("argv", "environ", "message"), SERVE_REFUSALS)
def test_serve_refuses_a_bad_value_naming_its_option(
    tmp_path: Path, argv: list[str], environ: dict[str, str], message: str
) -> None:
    environ = {"TASKYARD_DATA_DIR": str(tmp_path), **environ}
    with pytest.raises(ConfigError) as refused:
        args = main.parser("serve").parse_args(["serve", *argv])
        options.server_config(options.resolve(args, environ), environ)
    assert refused.value.message == message


def test_serve_refuses_a_blob_origin_on_the_root_urls_host(tmp_path: Path) -> None:
    environ = {"TASKYARD_DATA_DIR": str(tmp_path)}
    args = main.parser("serve").parse_args(["serve", "--blob-origin", "http://127.0.0.1:9000"])
    with pytest.raises(ConfigError) as refused:
        options.server_config(options.resolve(args, environ), environ)
    assert refused.value.key == "blob-origin"
    shown = "configuration blob-origin='http://127.0.0.1:9000' is not valid: "
    assert refused.value.message.startswith(shown)


def test_serve_takes_its_defaults_and_makes_its_secrets_once(tmp_path: Path) -> None:
    environ = {"TASKYARD_DATA_DIR": str(tmp_path), "TASKYARD_SECRET_KEY": "the-key"}
    args = main.parser("serve").parse_args(["serve", "--public-url", "https://queue.example.com/"])
    config = options.server_config(options.resolve(args, environ), environ)
    assert config == ServerConfig(
        data_dir=str(tmp_path),
        public_url="https://queue.example.com",
        root_access_token=(tmp_path / "root-access-token").read_text().strip(),
        secret_key="the-key",
    )
    assert not (tmp_path / "secret-key").exists()


WORKER_REFUSALS = [
    (
        ["--task-queue-id", "nope"],
        "configuration --task-queue-id='nope' is not valid: must look like provisioner/worker-type",
    ),
    (
        ["--worker-group", "a/b"],
        "configuration --worker-group='a/b' is not valid: must be 1-38 of a-z A-Z 0-9 - _",
    ),
    (["--worker-id", ""], "configuration --worker-id='' is not valid: must be 1-38 of a-z A-Z 0-9 - _"),
    (
        ["--protocol", "azure"],
        "configuration --protocol='azure' is not valid: must be one of: claim-work, poll",
    ),
    (["--capacity", "256"], "configuration --capacity='256' is not valid: must be between 0 and 255"),
    (
        ["--capacity", "0"],
        "configuration --capacity='0' is not valid: a worker runs at least one task at a time",
    ),
    (
        ["--events", "amqp://u:hunter2@rabbit:port/"],
        "configuration --events='amqp://u:***@rabbit:port/' is not valid: "
        "must be memory:// or amqp://user:password@host:port/vhost",
    ),
]


@pytest.mark.parametrize(("argv", "message"), WORKER_REFUSALS)
def test_a_worker_refuses_a_bad_value_naming_its_flag(argv: list[str], message: str) -> None:
    args = main.parser().parse_args(["worker", *argv])
    environ = {
        "TASKCLUSTER_ROOT_URL": "http://127.0.0.1:8080",
        "TASKCLUSTER_CLIENT_ID": "c",
        "TASKCLUSTER_ACCESS_TOKEN": "t",
    }
    with pytest.raises(ConfigError) as refused:
        worker_cli.worker_config(args, environ)
    assert refused.value.message == message


def test_ups_worker_refuses_a_bad_capacity_and_runs_none_at_0(tmp_path: Path) -> None:
    environ = {"TASKYARD_DATA_DIR": str(tmp_path)}
    args = main.parser("up").parse_args(["up", "--capacity", "300"])
    values = options.resolve(args, environ)
    server = options.server_config(values, environ)
    with pytest.raises(ConfigError) as refused:
        worker_cli.own_pool(server, values)
    assert refused.value.message == "configuration --capacity='300' is not valid: must be between 0 and 255"
    assert worker_cli.own_pool(server, {**values, "capacity": 0}) is None
    pool = worker_cli.own_pool(server, {**values, "capacity": 3, "task_queue_id": "p/w"})
    assert pool is not None and (pool.max_capacity, pool.worker_pool_id, pool.min_capacity) == (3, "p/w", 1)
