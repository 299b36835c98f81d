"""How many workers a pool should start: the estimate of TaskCluster's provisioner, in capacity.

`existing` is the capacity of the pool's workers that are starting or running (not stopping),
`pending` and `claimed` the queue's counts of its task queue. Idle capacity first takes pending
tasks; what is left asks for more, up to `max_capacity`, and never less than `min_capacity` runs.
TaskCluster also subtracts the capacity still starting a second time, which holds back a pool
while its first workers boot; this one does not (a local worker boots in a second).
"""

from __future__ import annotations


def workers_to_start(
    *, min_capacity: int, max_capacity: int, per_worker: int, existing: int, pending: int, claimed: int
) -> int:
    """Whole workers of `per_worker` capacity to start now; never past `max_capacity` in all."""
    idle = max(0, existing - claimed)
    wanted = max(0, pending - idle)
    desired = max(min_capacity, min(wanted + existing, max_capacity))
    missing = max(0, desired - existing)
    room = max(0, max_capacity - existing) // per_worker
    return min(-(-missing // per_worker), room)
