"""`taskyard worker --protocol`: claim-work by default, poll on request, anything else refused."""

from __future__ import annotations

import pytest

from taskyard.cli import worker as worker_cli
from taskyard.config import WorkerConfig
from taskyard.model.errors import ConfigError
from tests.cli.helpers import worker_config


def test_the_protocol_is_claim_work_unless_asked() -> None:
    assert worker_config([]).protocol == "claim-work"
    assert worker_config(["--protocol", "poll"]).protocol == "poll"
    assert worker_config([], {"TASKYARD_PROTOCOL": "poll"}).protocol == "poll"


def test_an_unknown_protocol_is_refused() -> None:
    with pytest.raises(ConfigError, match="--protocol"):
        worker_config(["--protocol", "azure"])


def test_a_worker_process_keeps_its_protocol() -> None:
    config = WorkerConfig("http://127.0.0.1:1", "c", "t", protocol="poll")
    command, _ = worker_cli.worker_process(config)
    assert command[command.index("--protocol") + 1] == "poll"
