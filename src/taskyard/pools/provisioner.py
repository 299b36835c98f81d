"""The provisioner: one loop per server process; the process that leads it (`Storage.lead`) asks
each provider to provision its pools whenever something may call for it, and no other does.

The leading process wakes on work made pending in any task queue (the queue's own
notifications, from every process), on a pool or worker changed, and on a local worker's exit; a
wake-up for a task queue that is no local pool costs a set lookup. A process that does not lead
sleeps, and asks to lead again every `LEAD_RECHECK` seconds (taking over when the leader is
gone); one that stops leading stops the workers it started. The upkeep (expired errors and
workers, deleted pools) runs on the expiry interval, in the leading process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from taskyard.model.errors import Unavailable
from taskyard.model.outages import Outage
from taskyard.pools import pools, reports
from taskyard.pools.local import PROVIDER_ID as LOCAL
from taskyard.pools.local import LocalProvider
from taskyard.pools.service import NULL_PROVIDER, PROVISIONER, WorkerManager

log = logging.getLogger(__name__)

LEAD_RECHECK = 5.0  # seconds between a non-leading process's asks to lead
RETRY_AFTER = 5.0  # seconds before trying again after provisioning failed (the database was down)


async def run_forever(wm: WorkerManager) -> None:
    leading = False
    known: set[str] = set()  # the local pools, as last read
    outage = Outage()
    try:
        while True:
            wm.changed.clear()
            pending, wm.pending = wm.pending, set()
            dirty, wm.dirty = wm.dirty, False
            timeout: float | None = None
            waking = True  # wake on a change (a non-leading process only asks again in time)
            try:
                if await wm.storage.lead(PROVISIONER):
                    if not leading:
                        log.info("this process provisions the worker pools")
                        leading = dirty = True
                    if dirty or pending & known or _paused_due(wm):
                        known = await provision_all(wm)
                    timeout = _until_unpaused(wm)
                else:
                    if leading:
                        log.warning("this process no longer provisions the worker pools")
                        leading = False
                        await release_all(wm)
                    # Not on every wake-up: work made pending anywhere wakes this loop, and each
                    # ask is a round trip to PostgreSQL (createTask's hot path, in every process).
                    timeout, waking = LEAD_RECHECK, False
            except Exception as exc:
                if not isinstance(exc, Unavailable):
                    log.exception("provisioning failed; trying again in %.0f s", RETRY_AFTER)
                elif outage.begins(time.monotonic()):  # the database is down or restarting: an outage
                    log.warning("provisioning: %s; trying again every %g s", exc, RETRY_AFTER)
                timeout = RETRY_AFTER
                wm.dirty = True
            else:
                _, lasted = outage.ends(time.monotonic())
                if lasted is not None:
                    log.info("provisioning: the database is back after %.1f s", lasted)
            if not waking:
                await asyncio.sleep(LEAD_RECHECK)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await wm.changed.wait()
    finally:
        with contextlib.suppress(Exception):
            await release_all(wm)


async def provision_all(wm: WorkerManager) -> set[str]:
    """Ask each provider to provision its pools; the ids of the local pools."""
    local: set[str] = set()
    for provider_id, provider in wm.providers.items():
        if provider_id == NULL_PROVIDER:
            continue
        found = await pools.pools_of(wm, provider_id)
        if provider_id == LOCAL:
            local = {p.worker_pool_id for p in found}
        await provider.provision(wm, found)
    return local


async def release_all(wm: WorkerManager, *, final: bool = False) -> None:
    """Stop the workers this process started; `final`: and start none again (the server stops)."""
    for provider in wm.providers.values():
        await provider.release(wm, final=final)


def workers_running(wm: WorkerManager) -> int:
    """Worker processes this process started that are still alive."""
    local = _local(wm)
    return local.running() if local else 0


def _local(wm: WorkerManager) -> LocalProvider | None:
    provider = wm.providers.get(LOCAL)
    return provider if isinstance(provider, LocalProvider) else None


def _paused_due(wm: WorkerManager) -> bool:
    local = _local(wm)
    start = local.next_start() if local else None
    return start is not None and start <= time.monotonic()


def _until_unpaused(wm: WorkerManager) -> float | None:
    """Seconds until a pool paused after a crash may start again (None: no pool is paused)."""
    local = _local(wm)
    start = local.next_start() if local else None
    return None if start is None else max(0.05, start - time.monotonic())


async def upkeep(wm: WorkerManager) -> int:
    """One round of the worker-manager's upkeep: errors older than a week, stopped workers past
    their expiry, deleted pools none of whose workers is left; how many rows went."""
    swept = await reports.sweep(wm)
    async with wm.storage.transaction() as tx:
        swept += await tx.execute("expire_pool_workers", wm.clock(), reports.SWEEP_BATCH)
    swept += await pools.remove_deleted(wm)
    return swept
