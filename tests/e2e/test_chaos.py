"""The fault campaign of `make chaos` (bench/chaos.py), small: 150 task lifecycles per database
while the server is killed twice, PostgreSQL (a private cluster) and RabbitMQ (a private node)
restarted once each, and a real worker killed mid-task. Every figure that must be 0 is 0: no task
lost, no run resolved twice or claimed twice, no committed transition without its event, no event
without its transition, no 5xx outside the faults' windows, a consistent database at the end,
and the killed worker's run retried and completed by another worker.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench import chaos

from tests.events.rabbit import PrivateRabbit

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_nothing_is_lost_or_done_twice_under_faults(
    kind: str, private_rabbit: PrivateRabbit, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    cluster = request.getfixturevalue("pg_cluster") if kind == "postgres" else None
    progress: list[str] = []
    options = chaos.Options(tasks=150, kills=2, kill_every=10_000, seed=7, say=progress.append)

    figures = chaos.campaign(kind, options, tmp_path, cluster=cluster, rabbit=private_rabbit)

    details = "\n".join([*progress, chaos.table({kind: figures}), str(figures)])
    assert chaos.failures(figures) == {}, details
    assert figures["tasks created"] == 150, details
    assert figures["server kills"] == 2, details
    assert figures["RabbitMQ restarts"] == 1, details
    assert figures["PostgreSQL restarts"] == (1 if kind == "postgres" else "-"), details
    assert figures["5xx inside windows"] > 0, details  # the kills were felt
    assert figures["server log errors"] == 0, details  # an outage is a warning, not an error
