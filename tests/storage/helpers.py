"""Rows the storage tests write and read through the port's statements."""

from __future__ import annotations

from collections.abc import Awaitable

from taskyard.storage.port import Row, Storage, Tx


async def _pending(storage: Storage, task_id: str, priority: int, inserted: int, tq: str = "p/w") -> None:
    """A task row and its pending run, as createTask writes them (definition and runs abridged)."""
    async with storage.transaction() as tx:
        row = (task_id, task_id, "-", "none", tq, "lowest", "all-completed", 5, 0, 10**13, 10**13, "{}", "[]")
        await tx.execute("insert_task", *row, "pending", None, None, False, 1)
        await tx.execute("insert_pending", task_id, 0, tq, priority, inserted, 10**13)


def take(tx: Tx, count: int, now: int) -> Awaitable[list[Row]]:
    """take_pending on the task queue p/w, for a worker never seen."""
    return tx.fetch(
        "take_pending", task_queue_id="p/w", count=count, now=now, worker_group="g", worker_id="w"
    )
