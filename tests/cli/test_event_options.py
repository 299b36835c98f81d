"""`--events` and `--event-profiles` of servers and workers: flags, environment variables, and what is
refused at start."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from taskyard.cli import main, options
from taskyard.cli.settings import worker_events
from taskyard.config import ServerConfig
from taskyard.model.errors import ConfigError
from taskyard.pools.local import LocalProvider
from taskyard.pools.port import StoredPool
from tests.cli.helpers import worker_config


def config(tmp_path: Path, argv: list[str], environ: dict[str, str] | None = None) -> ServerConfig:
    parser = argparse.ArgumentParser()
    options.add_server_options(parser)
    environ = {"TASKYARD_DATA_DIR": str(tmp_path), **(environ or {})}
    return options.server_config(options.resolve(parser.parse_args(argv), environ), environ)


def test_the_defaults_are_the_memory_bus_and_both_profiles(tmp_path: Path) -> None:
    defaults = config(tmp_path, [])
    assert defaults.events == "memory://" and defaults.event_profiles == ("tc", "seed")


def test_flags_win_over_environment_variables(tmp_path: Path) -> None:
    environ = {"TASKYARD_EVENTS": "amqp://u:p@rabbit:5672/tc", "TASKYARD_EVENT_PROFILES": "seed"}
    from_env = config(tmp_path, [], environ)
    assert from_env.events == "amqp://u:p@rabbit:5672/tc" and from_env.event_profiles == ("seed",)
    flagged = config(tmp_path, ["--events", "amqp://rabbit/", "--event-profiles", "tc"], environ)
    assert flagged.events == "amqp://rabbit/" and flagged.event_profiles == ("tc",)


def test_the_events_url_never_shows_in_the_config_repr(tmp_path: Path) -> None:
    assert "hunter2" not in repr(config(tmp_path, ["--events", "amqp://u:hunter2@rabbit/"]))


@pytest.mark.parametrize(
    "url",
    [
        "rabbitmq://u:hunter2@rabbit/",
        "amqp//u:hunter2@rabbit/",
        "amqp://",
        "amqp://u:hunter2@rabbit:notaport/",
        "amqp://u:hunter2@rabbit:70000/",
        "amqp://u:hunter2@rabbit/a/b",
        "memory:/",
        "",
    ],
)
def test_a_malformed_events_url_is_a_config_error_without_the_password(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config(tmp_path, ["--events", url])
    assert refused.value.key == "events"
    assert "hunter2" not in refused.value.message and "\n" not in refused.value.message


def test_serve_refuses_a_bad_events_url_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["serve", "--data-dir", str(tmp_path), "--events", "amqp://u:hunter2@rabbit:port/"]
    assert main.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "events=" in err and "hunter2" not in err


def test_serve_refuses_unknown_profiles_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main.main(["serve", "--data-dir", str(tmp_path), "--event-profiles", "tc,pulse"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "event-profiles" in err


# `taskyard worker --events`: the broker it hears cancellations from.


def test_a_worker_listens_to_no_broker_unless_given_one() -> None:
    assert worker_config([]).events == ""
    assert worker_config(["--events", "memory://"]).events == ""  # another process's bus: out of reach
    from_env = worker_config([], {"TASKYARD_EVENTS": "amqp://u:p@rabbit/%2F"})
    assert from_env.events == "amqp://u:p@rabbit/%2F"
    assert worker_config(["--events", "amqps://rabbit:5671/tc"], {"TASKYARD_EVENTS": "memory://"}).events == (
        "amqps://rabbit:5671/tc"
    )
    assert "hunter2" not in repr(worker_config(["--events", "amqp://u:hunter2@rabbit/"]))


@pytest.mark.parametrize(
    "url",
    ["rabbitmq://u:hunter2@rabbit/", "amqp://u:hunter2@rabbit:port/", "amqp://", "amqp://u:hunter2@r/a/b"],
)
def test_a_worker_refuses_a_malformed_events_url_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("TASKCLUSTER_ROOT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("TASKCLUSTER_CLIENT_ID", "c")
    monkeypatch.setenv("TASKCLUSTER_ACCESS_TOKEN", "t")
    assert main.main(["worker", "--work-dir", str(tmp_path), "--events", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--events=" in err and "hunter2" not in err
    assert list(tmp_path.iterdir()) == []  # refused before it took the work directory


def test_local_workers_hear_the_servers_broker_through_their_environment(tmp_path: Path) -> None:
    server = config(tmp_path, ["--events", "amqp://u:hunter2@rabbit/%2F"])
    local = LocalProvider(
        root_url=server.root_url, data_dir=str(tmp_path), events=worker_events(server.events)
    )
    pool = StoredPool("local/default", "local", (), "", {"maxCapacity": 1}, "a@b.c", False, 0, 0)
    command = local._command(pool, "w1", 1, tmp_path, tmp_path / "secret", 0)
    env = local._environment()
    assert env["TASKYARD_EVENTS"] == "amqp://u:hunter2@rabbit/%2F" and not any(
        "hunter2" in w for w in command
    )
    quiet = config(tmp_path, [])
    environment = LocalProvider(
        root_url=quiet.root_url, data_dir=str(tmp_path), events=worker_events(quiet.events)
    )
    assert "TASKYARD_EVENTS" not in environment._environment()
