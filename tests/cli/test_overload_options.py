"""The overload bounds of `serve` and `up`: flags, environment variables, and what is refused at start."""

from __future__ import annotations

import argparse
import resource
from pathlib import Path

import pytest

from taskyard.cli import options
from taskyard.cli.connections import raise_open_files_limit
from taskyard.config import ServerConfig
from taskyard.model.errors import ConfigError


def config(tmp_path: Path, argv: list[str], environ: dict[str, str] | None = None) -> ServerConfig:
    parser = argparse.ArgumentParser()
    options.add_server_options(parser)
    environ = {"TASKYARD_DATA_DIR": str(tmp_path), **(environ or {})}
    return options.server_config(options.resolve(parser.parse_args(argv), environ), environ)


def test_the_bounds_have_defaults_flags_and_variables(tmp_path: Path) -> None:
    defaults = config(tmp_path, [])
    assert (defaults.max_in_flight, defaults.max_long_polls) == (256, 4000)
    assert (defaults.db_wait_timeout, defaults.head_timeout, defaults.keep_alive_timeout) == (5.0, 10.0, 5)
    assert (defaults.max_running, defaults.max_streams, defaults.body_timeout) == (16, 1000, 30.0)
    environ = {"TASKYARD_MAX_IN_FLIGHT": "32", "TASKYARD_HEAD_TIMEOUT": "2.5"}
    chosen = config(tmp_path, ["--max-long-polls", "0", "--db-wait-timeout", "1"], environ)
    assert (chosen.max_in_flight, chosen.max_long_polls, chosen.head_timeout) == (32, 0, 2.5)
    assert chosen.db_wait_timeout == 1.0
    environ = {"TASKYARD_MAX_RUNNING": "4", "TASKYARD_BODY_TIMEOUT": "7.5"}
    chosen = config(tmp_path, ["--max-streams", "0"], environ)
    assert (chosen.max_running, chosen.max_streams, chosen.body_timeout) == (4, 0, 7.5)


def test_the_per_client_shares_have_defaults_flags_and_variables(tmp_path: Path) -> None:
    defaults = config(tmp_path, [])
    assert (defaults.max_streams_per_client, defaults.max_anonymous_streams_per_client) == (100, 25)
    assert defaults.max_connections_per_client == 128
    environ = {"TASKYARD_MAX_CONNECTIONS_PER_CLIENT": "0", "TASKYARD_MAX_STREAMS_PER_CLIENT": "7"}
    chosen = config(tmp_path, ["--max-anonymous-streams-per-client", "3"], environ)
    assert (chosen.max_connections_per_client, chosen.max_streams_per_client) == (0, 7)
    assert chosen.max_anonymous_streams_per_client == 3


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--max-in-flight", "-1"], "max-in-flight"),
        (["--max-long-polls", "-5"], "max-long-polls"),
        (["--db-wait-timeout", "0"], "db-wait-timeout"),
        (["--head-timeout", "-1"], "head-timeout"),
        (["--keep-alive-timeout", "0"], "keep-alive-timeout"),
        (["--head-timeout", "86400"], "head-timeout"),
        (["--max-running", "-1"], "max-running"),
        (["--max-streams", "-1"], "max-streams"),
        (["--body-timeout", "0"], "body-timeout"),
        (["--max-streams-per-client", "-1"], "max-streams-per-client"),
        (["--max-anonymous-streams-per-client", "-1"], "max-anonymous-streams-per-client"),
        (["--max-connections-per-client", "-2"], "max-connections-per-client"),
    ],
)
def test_bad_bounds_are_refused_naming_the_flag(tmp_path: Path, argv: list[str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        config(tmp_path, argv)


def test_the_open_files_limit_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        if hard != resource.RLIM_INFINITY and soft == hard and hard > 64:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard // 2, hard))
        now = raise_open_files_limit()
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == now
        assert hard == resource.RLIM_INFINITY or now == hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
