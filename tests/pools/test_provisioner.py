"""The provisioner's loop through a database outage: one warning when it begins, never an error
(the database restarting is not a bug, and a deployment's logs are read for errors)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from taskyard.pools import provisioner
from taskyard.pools.service import NULL_PROVIDER, WorkerManager
from taskyard.pools.static import NullProvider, StaticProvider
from taskyard.queue.service import Queue
from taskyard.storage.port import Storage
from tests.conftest import until


async def test_an_outage_is_a_warning_not_an_error(
    queue: Queue, storage: Storage, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not storage.one_writer:
        pytest.skip(
            "a closed PostgreSQL storage leads nothing, so the loop sends nothing to fail (chaos covers it)"
        )
    monkeypatch.setattr(provisioner, "RETRY_AFTER", 0.01)
    monkeypatch.setattr(provisioner, "LEAD_RECHECK", 0.01)
    wm = WorkerManager(
        queue, providers={"static": StaticProvider(), NULL_PROVIDER: NullProvider()}, issuer=("i", "t")
    )
    await storage.close()  # every statement now answers DatabaseUnavailable
    caplog.set_level(logging.INFO, logger="taskyard.pools.provisioner")
    running = asyncio.create_task(provisioner.run_forever(wm))
    try:
        await until(lambda: any("provisioning" in r.getMessage() for r in caplog.records))
        await asyncio.sleep(0.1)  # several more failed rounds
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == provisioner.__name__]
    warnings = [text for level, text in said if level == "WARNING"]
    assert not [text for level, text in said if level == "ERROR"], said
    assert len(warnings) == 1 and "is closed" in warnings[0], said
