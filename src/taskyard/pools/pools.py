"""Worker pools: create, update, delete (hand to the null provider), read and list them.

A pool's config is checked by its provider (400 naming the field). Each change publishes its
event (`worker-pool-created`, `worker-pool-updated`) in its transaction and tells the provisioner
(`CHANNEL`). Deleting a pool hands it to the null provider; the upkeep removes it once none of
its workers is left running.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import orjson

from taskyard.model import dates
from taskyard.model.errors import InputError, RequestConflict, ResourceNotFound
from taskyard.model.messages import Message
from taskyard.model.types import JSONObject
from taskyard.pools.port import Provider, StoredPool
from taskyard.pools.service import (
    CHANNEL,
    NULL_PROVIDER,
    STATES,
    PoolRequest,
    WorkerManager,
    WorkerPool,
    present,
)
from taskyard.queue import service as queue_service
from taskyard.storage.port import Row, Session, Tx

log = logging.getLogger(__name__)


def stored_pool(row: Row) -> StoredPool:
    return StoredPool(
        worker_pool_id=row["worker_pool_id"],
        provider_id=row["provider_id"],
        previous_provider_ids=tuple(orjson.loads(row["previous_provider_ids"])),
        description=row["description"],
        config=orjson.loads(row["config"]),
        owner=row["owner"],
        email_on_error=bool(row["email_on_error"]),
        created=int(row["created"]),
        last_modified=int(row["last_modified"]),
    )


Counts = dict[str, tuple[int, int]]  # by state: (workers, their capacity)


def full(pool: StoredPool, counts: Counts) -> WorkerPool:
    """The pool as the API answers it, with its workers counted by state."""

    def count(state: str) -> int:
        return counts.get(state, (0, 0))[0]

    def capacity(state: str) -> int:
        return counts.get(state, (0, 0))[1]

    return {
        "workerPoolId": pool.worker_pool_id,
        "providerId": pool.provider_id,
        "description": pool.description,
        "config": pool.config,
        "owner": pool.owner,
        "emailOnError": pool.email_on_error,
        "created": dates.to_iso(pool.created),
        "lastModified": dates.to_iso(pool.last_modified),
        "currentCapacity": sum(capacity(s) for s in STATES if s != "stopped"),
        "requestedCount": count("requested"),
        "runningCount": count("running"),
        "stoppingCount": count("stopping"),
        "stoppedCount": count("stopped"),
        "requestedCapacity": capacity("requested"),
        "runningCapacity": capacity("running"),
        "stoppingCapacity": capacity("stopping"),
        "stoppedCapacity": capacity("stopped"),
    }


async def counts_between(session: Session | Tx, first: str, last: str) -> dict[str, Counts]:
    """Each pool's workers by state, for the pools from `first` to `last` (one statement)."""
    found: dict[str, Counts] = {}
    for row in await session.fetch("worker_pool_counts", first, last):
        found.setdefault(row["worker_pool_id"], {})[row["state"]] = (
            int(row["workers"]),
            int(row["capacity"] or 0),
        )
    return found


def _message(exchange: str, pool_id: str, provider_id: str, previous: str | None = None) -> Message:
    body: JSONObject = {"workerPoolId": pool_id, "providerId": provider_id}
    if previous is not None:
        body["previousProviderId"] = previous
    return Message(exchange, "primary._._._._._._._", body)


def checked_provider(wm: WorkerManager, provider_id: str, config: JSONObject) -> Provider:
    """The provider a pool names, its config checked by it; 400 for a provider this deployment
    does not have (naming the ones it has)."""
    provider = wm.provider(provider_id)
    if provider is None or provider_id == NULL_PROVIDER:
        valid = sorted(p for p in wm.providers if p != NULL_PROVIDER)
        raise InputError(
            f"Invalid Provider: providerId {provider_id!r} is none of this deployment's: {valid}"
        )
    provider.check_config(config)
    return provider


def _same(pool: StoredPool, body: PoolRequest) -> bool:
    mine = (pool.provider_id, pool.description, pool.config, pool.owner, pool.email_on_error)
    theirs = (body["providerId"], body["description"], body["config"], body["owner"], body["emailOnError"])
    return orjson.dumps(mine, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        theirs, option=orjson.OPT_SORT_KEYS
    )


def _columns(pool_id: str, body: PoolRequest) -> dict[str, object]:
    return {
        "worker_pool_id": pool_id,
        "provider_id": body["providerId"],
        "description": body["description"],
        "config": orjson.dumps(body["config"]).decode(),
        "owner": body["owner"],
        "email_on_error": body["emailOnError"],
    }


def _check_id(pool_id: str, body: PoolRequest) -> None:
    if body.get("workerPoolId", pool_id) != pool_id:
        raise InputError(
            f"workerPoolId in the body ({body.get('workerPoolId')!r}) differs from the URL's ({pool_id!r})"
        )


async def create_pool(wm: WorkerManager, pool_id: str, body: PoolRequest, *, client_id: str) -> WorkerPool:
    """Create a pool; the same definition again answers it (200), another is a 409."""
    _check_id(pool_id, body)
    checked_provider(wm, body["providerId"], body["config"])
    async with wm.storage.transaction() as tx:
        inserted = await tx.execute("insert_worker_pool", **_columns(pool_id, body), now=wm.clock())
        if inserted:
            message = _message("worker-pool-created", pool_id, body["providerId"])
            await queue_service.publish_tx(wm.queue, tx, [message])
            tx.notify(CHANNEL, pool_id)
        pool = stored_pool(present(await tx.fetchrow("get_worker_pool", pool_id)))
        counts = (await counts_between(tx, pool_id, pool_id)).get(pool_id, {})
    if inserted:
        log.info("worker pool %s created by %s (provider %s)", pool_id, client_id, body["providerId"])
    elif not _same(pool, body):
        raise RequestConflict(f"Worker pool {pool_id} already exists (with another definition)")
    return full(pool, counts)


async def update_pool(wm: WorkerManager, pool_id: str, body: PoolRequest, *, client_id: str) -> WorkerPool:
    """Replace a pool's definition (404 if there is none). A change of provider keeps the old one
    in charge of the workers it started, until they stop."""
    _check_id(pool_id, body)
    checked_provider(wm, body["providerId"], body["config"])
    async with wm.storage.transaction() as tx:
        row = await tx.fetchrow("lock_worker_pool", pool_id)
        if row is None:
            raise ResourceNotFound(f"Worker pool {pool_id} does not exist")
        old = stored_pool(row)
        previous = list(old.previous_provider_ids)
        if old.provider_id != body["providerId"] and old.provider_id != NULL_PROVIDER:
            previous = [p for p in previous if p != old.provider_id] + [old.provider_id]
        previous = [p for p in previous if p != body["providerId"]]
        await tx.execute(
            "update_worker_pool",
            **_columns(pool_id, body),
            previous_provider_ids=orjson.dumps(previous).decode(),
            now=wm.clock(),
        )
        was = old.provider_id if old.provider_id != body["providerId"] else None
        message = _message("worker-pool-updated", pool_id, body["providerId"], was)
        await queue_service.publish_tx(wm.queue, tx, [message])
        tx.notify(CHANNEL, pool_id)
        pool = stored_pool(present(await tx.fetchrow("get_worker_pool", pool_id)))
        counts = (await counts_between(tx, pool_id, pool_id)).get(pool_id, {})
    log.info("worker pool %s updated by %s (provider %s)", pool_id, client_id, body["providerId"])
    return full(pool, counts)


async def delete_pool(wm: WorkerManager, pool_id: str, *, client_id: str) -> WorkerPool:
    """Hand a pool to the null provider: its provider stops its workers, and the upkeep removes
    the pool once none is left. 404 if there is no such pool."""
    async with wm.storage.transaction() as tx:
        row = await tx.fetchrow("lock_worker_pool", pool_id)
        if row is None:
            raise ResourceNotFound(f"Worker pool {pool_id} does not exist")
        old = stored_pool(row)
        if old.provider_id != NULL_PROVIDER:
            previous = [p for p in old.previous_provider_ids if p != old.provider_id] + [old.provider_id]
            await tx.execute(
                "update_worker_pool",
                worker_pool_id=pool_id,
                provider_id=NULL_PROVIDER,
                previous_provider_ids=orjson.dumps(previous).decode(),
                description=old.description,
                config=orjson.dumps(old.config).decode(),
                owner=old.owner,
                email_on_error=old.email_on_error,
                now=wm.clock(),
            )
            message = _message("worker-pool-updated", pool_id, NULL_PROVIDER, old.provider_id)
            await queue_service.publish_tx(wm.queue, tx, [message])
            tx.notify(CHANNEL, pool_id)
        pool = stored_pool(present(await tx.fetchrow("get_worker_pool", pool_id)))
        counts = (await counts_between(tx, pool_id, pool_id)).get(pool_id, {})
    log.info("worker pool %s deleted by %s", pool_id, client_id)
    return full(pool, counts)


async def load(session: Session | Tx, pool_id: str) -> StoredPool | None:
    row = await session.fetchrow("get_worker_pool", pool_id)
    return None if row is None else stored_pool(row)


async def get_pool(wm: WorkerManager, pool_id: str) -> WorkerPool:
    async with wm.storage.reader() as session:
        pool = await load(session, pool_id)
        if pool is None:
            raise ResourceNotFound(f"Worker pool {pool_id} does not exist")
        counts = (await counts_between(session, pool_id, pool_id)).get(pool_id, {})
    return full(pool, counts)


async def list_pools(wm: WorkerManager, *, after: str, limit: int) -> list[WorkerPool]:
    """Up to `limit + 1` pools after `after`, by id (the extra one says there are more); two
    statements, whatever the page's size."""
    async with wm.storage.reader() as session:
        pools = [stored_pool(row) for row in await session.fetch("list_worker_pools", after, limit + 1)]
        counts = (
            await counts_between(session, pools[0].worker_pool_id, pools[-1].worker_pool_id) if pools else {}
        )
    return [full(pool, counts.get(pool.worker_pool_id, {})) for pool in pools]


async def pools_of(wm: WorkerManager, provider_id: str) -> list[StoredPool]:
    """The pools `provider_id` runs."""
    async with wm.storage.reader() as session:
        return [stored_pool(row) for row in await session.fetch("worker_pools_of_provider", provider_id)]


async def remove_deleted(wm: WorkerManager, pool_ids: Iterable[str] | None = None) -> int:
    """Remove the deleted pools none of whose workers is left but stopped ones; how many went."""
    removed = 0
    async with wm.storage.transaction() as tx:
        ids = (
            pool_ids
            if pool_ids is not None
            else [r["worker_pool_id"] for r in await tx.fetch("deleted_worker_pools")]
        )
        for pool_id in ids:
            if await tx.execute("delete_worker_pool", pool_id):
                await tx.execute("delete_stopped_workers_of_pool", pool_id)
                removed += 1
                log.info("worker pool %s removed: deleted, and none of its workers is left", pool_id)
    return removed
