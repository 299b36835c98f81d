"""`taskyard worker --protocol`: claim-work by default, poll on request, anything else refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskyard.model.errors import ConfigError
from taskyard.pools.local import LocalProvider
from taskyard.pools.port import StoredPool
from tests.cli.helpers import worker_config


def test_the_protocol_is_claim_work_unless_asked() -> None:
    assert worker_config([]).protocol == "claim-work"
    assert worker_config(["--protocol", "poll"]).protocol == "poll"
    assert worker_config([], {"TASKYARD_PROTOCOL": "poll"}).protocol == "poll"


def test_an_unknown_protocol_is_refused() -> None:
    with pytest.raises(ConfigError, match="--protocol"):
        worker_config(["--protocol", "azure"])


def test_a_local_pools_workers_keep_its_protocol(tmp_path: Path) -> None:
    local = LocalProvider(root_url="http://127.0.0.1:1", data_dir=str(tmp_path))
    config = {"maxCapacity": 1, "workerConfig": {"protocol": "poll"}}
    pool = StoredPool("local/default", "local", (), "", config, "a@b.c", False, 0, 0)
    command = local._command(pool, "w1", 1, tmp_path, tmp_path / "secret", 0)
    assert command[command.index("--protocol") + 1] == "poll"
