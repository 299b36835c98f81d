"""asyncio's internals that storage uses (see the package's docstring): each with why."""

from __future__ import annotations

import asyncio


def queued(lock: asyncio.Lock) -> bool:
    """Whether a task waits for `lock`, free or not (a task woken by a release holds no lock yet
    but is still queued). `asyncio.Lock._waiters`, private: the SQLite writer takes a free lock at
    once, without the timer its wait bound would cost, only if nobody is queued for it (taking it
    then would jump the queue)."""
    return bool(lock._waiters)
