"""A pool's errors: what its workers report (`reportWorkerError`) and what its provider met
(a local worker that crashed); listed newest first, kept a week, each announced on
`worker-pool-error`."""

from __future__ import annotations

import logging
from typing import TypedDict

import orjson

from taskyard.model import dates, slugid
from taskyard.model.errors import ResourceNotFound
from taskyard.model.messages import Message
from taskyard.model.types import JSONObject, Millis
from taskyard.pools import pools
from taskyard.pools.service import WorkerManager, present
from taskyard.queue import service as queue_service
from taskyard.storage.port import Row

log = logging.getLogger(__name__)

KEEP = 7 * 24 * 3_600_000  # errors are kept this long
SWEEP_BATCH = 500


class ErrorReport(TypedDict):
    workerGroup: str
    workerId: str
    kind: str
    title: str
    description: str
    extra: JSONObject


class PoolError(TypedDict):
    errorId: str
    workerPoolId: str
    reported: str
    kind: str
    title: str
    description: str
    extra: JSONObject


def shown(row: Row) -> PoolError:
    return {
        "errorId": row["error_id"],
        "workerPoolId": row["worker_pool_id"],
        "reported": dates.to_iso(int(row["reported"])),
        "kind": row["kind"],
        "title": row["title"],
        "description": row["description"],
        "extra": orjson.loads(row["extra"]),
    }


async def record(wm: WorkerManager, pool_id: str, report: ErrorReport, *, provider_id: str) -> PoolError:
    """Store an error of `pool_id` and announce it; 404 if there is no such pool."""
    now: Millis = wm.clock()
    error_id = slugid.nice()
    async with wm.storage.transaction() as tx:
        pool = await pools.load(tx, pool_id)
        if pool is None:
            raise ResourceNotFound(f"Worker pool {pool_id} does not exist")
        await tx.execute(
            "insert_pool_error",
            error_id=error_id,
            worker_pool_id=pool_id,
            reported=now,
            kind=report["kind"],
            title=report["title"],
            description=report["description"],
            extra=orjson.dumps(report["extra"]).decode(),
            worker_group=report["workerGroup"],
            worker_id=report["workerId"],
        )
        provisioner, worker_type = pool_id.split("/", 1)
        group, worker_id = report["workerGroup"] or "_", report["workerId"] or "_"
        key = ".".join(["primary", provider_id, provisioner, worker_type, group, worker_id, "_", "_"])
        body: JSONObject = {
            "workerPoolId": pool_id,
            "providerId": provider_id,
            "errorId": error_id,
            "kind": report["kind"],
            "title": report["title"],
            "timestamp": dates.to_iso(now),
        }
        if report["workerGroup"]:
            body["workerGroup"], body["workerId"] = report["workerGroup"], report["workerId"]
        await queue_service.publish_tx(wm.queue, tx, [Message("worker-pool-error", key, body)])
        row = present(await tx.fetchrow("list_pool_errors", pool_id, error_id, now + 1, "", 1))
    log.warning("worker pool %s: %s (%s)", pool_id, report["title"], report["kind"])
    if pool.email_on_error:
        who = f" (worker {report['workerGroup']}/{report['workerId']})" if report["workerGroup"] else ""
        content = (
            f"Worker pool `{pool_id}` reported an error{who}:\n\n**{report['title']}** "
            f"(`{report['kind']}`)\n\n{report['description'][:4000]}\n\nThe pool's errors are in "
            "`listWorkerPoolErrors`. This mail is sent because the pool's `emailOnError` is true."
        )
        wm.mail(pool.owner, f"Worker pool {pool_id}: {report['title']}", content)
    return shown(row)


async def report(wm: WorkerManager, pool_id: str, body: ErrorReport) -> PoolError:
    """reportWorkerError: the pool's provider (as it is now) is the one named in the event."""
    async with wm.storage.reader() as session:
        pool = await pools.load(session, pool_id)
    if pool is None:
        raise ResourceNotFound(f"Worker pool {pool_id} does not exist")
    return await record(wm, pool_id, body, provider_id=pool.provider_id)


async def list_errors(
    wm: WorkerManager, pool_id: str, *, error_id: str, before: tuple[int, str], limit: int
) -> list[Row]:
    """Up to `limit + 1` errors of a pool reported before `before` (time, id), newest first."""
    async with wm.storage.reader() as session:
        if await pools.load(session, pool_id) is None:
            raise ResourceNotFound(f"Worker pool {pool_id} does not exist")
        return await session.fetch("list_pool_errors", pool_id, error_id, before[0], before[1], limit + 1)


async def sweep(wm: WorkerManager) -> int:
    """Delete one batch of errors older than a week; how many went."""
    async with wm.storage.transaction() as tx:
        return await tx.execute("expire_pool_errors", wm.clock() - KEEP, SWEEP_BATCH)
