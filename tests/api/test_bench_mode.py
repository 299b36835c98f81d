"""TASKYARD_BENCH_SKIP_AUTH: what bench/ uses to measure the cost of auth, and its guard rail."""

from __future__ import annotations

import pytest

from taskyard.cli import options
from taskyard.model.errors import ConfigError


def test_skipping_auth_is_off_unless_asked_for() -> None:
    assert options.bench_skip_auth("127.0.0.1", {}) is False
    assert options.bench_skip_auth("127.0.0.1", {"TASKYARD_BENCH_SKIP_AUTH": "0"}) is False
    assert options.bench_skip_auth("127.0.0.1", {"TASKYARD_BENCH_SKIP_AUTH": "1"}) is True


def test_only_a_loopback_server_may_skip_auth() -> None:
    with pytest.raises(ConfigError, match="loopback"):
        options.bench_skip_auth("0.0.0.0", {"TASKYARD_BENCH_SKIP_AUTH": "1"})
