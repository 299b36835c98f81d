"""The pool `taskyard up` runs its workers in: a local pool, set to `up`'s flags at each start."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from taskyard.model.errors import ResourceNotFound
from taskyard.pools import pools
from taskyard.pools.service import PoolRequest, WorkerManager

log = logging.getLogger(__name__)

IDLE_TIMEOUT = 300  # seconds a worker beyond the first waits for work before it exits
OWNER = "taskyard-up@localhost.localdomain"


@dataclass(frozen=True)
class OwnPool:
    """`up`'s pool: at least `min_capacity` (one worker, always ready), at most `max_capacity`
    workers of capacity 1 (the machine's cores, or `--capacity`)."""

    worker_pool_id: str
    max_capacity: int
    min_capacity: int = 1

    def request(self) -> PoolRequest:
        return {
            "providerId": "local",
            "description": "The workers `taskyard up` starts on this machine: one always ready, "
            "more while work waits, each stopped after it found none for five minutes.",
            "config": {
                "minCapacity": min(self.min_capacity, self.max_capacity),
                "maxCapacity": self.max_capacity,
                "capacityPerWorker": 1,
                "idleTimeoutSeconds": IDLE_TIMEOUT,
            },
            "owner": OWNER,
            "emailOnError": False,
        }


async def ensure(wm: WorkerManager, own: OwnPool) -> None:
    """Create `up`'s pool, or set it back to `up`'s flags (an edit through the API lasts until
    the next `up`)."""
    try:
        await pools.update_pool(wm, own.worker_pool_id, own.request(), client_id="taskyard up")
    except ResourceNotFound:
        await pools.create_pool(wm, own.worker_pool_id, own.request(), client_id="taskyard up")
