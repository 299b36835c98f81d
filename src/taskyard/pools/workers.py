"""A pool's workers: create, update, remove, read and list them; register them and hand them
credentials.

A worker registers (`registerWorker`, unauthenticated) with the secret its provider gave it and
gets temporary credentials, named `worker/<providerId>/<workerPoolId>/<workerGroup>/<workerId>`,
that hold only what a worker of that pool and id needs, and a registration secret to register
again with (`reregisterWorker`) before they expire. Secrets are stored as SHA-256 digests: a
registration only compares.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from typing import NotRequired, TypedDict

import orjson

from taskyard.auth import hawk
from taskyard.model import dates, schema, slugid
from taskyard.model.errors import InputError, RequestConflict, ResourceNotFound
from taskyard.model.messages import Message
from taskyard.model.types import JSONObject, Millis
from taskyard.pools import pools
from taskyard.pools.port import Provider, StoredPool, StoredWorker, WorkerRequest
from taskyard.pools.service import CHANNEL, Worker, WorkerManager, present
from taskyard.queue import service as queue_service
from taskyard.storage.port import Row, Tx

log = logging.getLogger(__name__)

HOUR = 3_600_000
CREDENTIALS_START_SKEW = 15 * 60_000  # credentials start this long before now (clocks differ)
EXPIRY_KEEP = 7 * 24 * HOUR  # a stopped worker's row is kept this long past the stop


class Registration(TypedDict):
    expires: str
    credentials: hawk.TemporaryCredentials
    workerConfig: JSONObject
    secret: str


class Reregistration(TypedDict):
    expires: str
    credentials: hawk.TemporaryCredentials
    secret: str


class RegisterRequest(TypedDict):
    workerPoolId: str
    providerId: str
    workerGroup: str
    workerId: str
    workerIdentityProof: JSONObject
    systemBootTime: NotRequired[str]


class ReregisterRequest(TypedDict):
    workerPoolId: str
    workerGroup: str
    workerId: str
    secret: str


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(secret: object, stored_digest: str) -> bool:
    """Whether `secret` is the one whose digest is stored (in constant time); never for none."""
    return (
        isinstance(secret, str) and bool(stored_digest) and hmac.compare_digest(digest(secret), stored_digest)
    )


def stored_worker(row: Row) -> StoredWorker:
    return StoredWorker(
        worker_pool_id=row["worker_pool_id"],
        worker_group=row["worker_group"],
        worker_id=row["worker_id"],
        provider_id=row["provider_id"],
        state=row["state"],
        capacity=int(row["capacity"]),
        created=int(row["created"]),
        expires=int(row["expires"]),
        static_secret=row["static_secret"],
        registration_secret=row["registration_secret"],
        provider_data=orjson.loads(row["provider_data"]),
    )


def shown(row: Row, *, expires: Millis | None = None) -> Worker:
    """A worker as the API answers it."""
    return {
        "workerPoolId": row["worker_pool_id"],
        "workerGroup": row["worker_group"],
        "workerId": row["worker_id"],
        "providerId": row["provider_id"],
        "created": dates.to_iso(int(row["created"])),
        "expires": dates.to_iso(int(row["expires"]) if expires is None else expires),
        "state": row["state"],
        "capacity": int(row["capacity"]),
        "lastModified": dates.to_iso(int(row["last_modified"])),
        "lastChecked": dates.to_iso(int(row["last_checked"])),
    }


def worker_message(exchange: str, worker: StoredWorker, now: Millis, **extra: object) -> Message:
    """worker-requested, -running, -stopped, -removed: keyed
    `primary.<providerId>.<provisionerId>.<workerType>.<workerGroup>.<workerId>.<launchConfigId>._`."""
    provisioner, worker_type = worker.worker_pool_id.split("/", 1)
    key = ".".join(
        [
            "primary",
            worker.provider_id,
            provisioner,
            worker_type,
            worker.worker_group,
            worker.worker_id,
            "_",
            "_",
        ]
    )
    body: JSONObject = {
        "workerPoolId": worker.worker_pool_id,
        "providerId": worker.provider_id,
        "workerId": worker.worker_id,
        "workerGroup": worker.worker_group,
        "capacity": worker.capacity,
        "timestamp": dates.to_iso(now),
        **extra,  # type: ignore[dict-item]
    }
    return Message(exchange, key, body)


async def _pool_or_404(tx: Tx, pool_id: str) -> StoredPool:
    pool = await pools.load(tx, pool_id)
    if pool is None:
        raise ResourceNotFound(f"Worker pool {pool_id} does not exist")
    return pool


def _provider_of(wm: WorkerManager, provider_id: str, pool_id: str) -> Provider:
    provider = wm.provider(provider_id)
    if provider is None:
        raise ResourceNotFound(f"Provider {provider_id} for worker pool {pool_id} does not exist")
    return provider


async def create_worker(
    wm: WorkerManager, pool_id: str, group: str, worker_id: str, request: WorkerRequest, *, client_id: str
) -> Worker:
    """Create a worker in a pool whose provider takes workers so (static); the same worker again
    (pool, group, id, provider, state and capacity) answers it, another is a 409."""
    expires = _expires(request)
    now = wm.clock()
    if expires < now:
        raise InputError("worker.expires must be in the future")
    capacity = request.get("capacity", 1)
    async with wm.storage.transaction() as tx:
        pool = await _pool_or_404(tx, pool_id)
        provider = _provider_of(wm, pool.provider_id, pool_id)
        new = provider.new_worker({**request, "capacity": capacity})
        inserted = await tx.execute(
            "insert_pool_worker",
            worker_pool_id=pool_id,
            worker_group=group,
            worker_id=worker_id,
            provider_id=pool.provider_id,
            state=new.state,
            capacity=capacity,
            expires=expires,
            static_secret=new.static_secret,
            provider_data="{}",
            now=now,
        )
        row = present(await tx.fetchrow("get_pool_worker", pool_id, group, worker_id))
        if inserted:
            tx.notify(CHANNEL, pool_id)
    existing = stored_worker(row)
    if not inserted:
        same = (existing.provider_id, existing.state, existing.capacity) == (
            pool.provider_id,
            new.state,
            capacity,
        )
        if not same:
            raise RequestConflict("Worker already exists")
        return shown(row, expires=expires)  # as TaskCluster answers a repeat: the request's expiry
    log.info("worker %s/%s of pool %s created by %s", group, worker_id, pool_id, client_id)
    return shown(row)


def _expires(request: WorkerRequest) -> Millis:
    return schema.to_millis(request["expires"])


async def update_worker(
    wm: WorkerManager, pool_id: str, group: str, worker_id: str, request: WorkerRequest, *, client_id: str
) -> Worker:
    """Change a worker's expiry, capacity or secret (its provider's rules); 404 if it is missing."""
    expires = _expires(request)
    capacity = request.get("capacity", 1)
    async with wm.storage.transaction() as tx:
        pool = await _pool_or_404(tx, pool_id)
        row = await tx.fetchrow("lock_pool_worker", pool_id, group, worker_id)
        if row is None:
            raise ResourceNotFound(f"Worker {group}/{worker_id} in worker pool {pool_id} does not exist")
        stored = stored_worker(row)
        provider = _provider_of(wm, stored.provider_id, pool.worker_pool_id)
        new = provider.updated_worker(stored, {**request, "capacity": capacity})
        await write_worker(
            tx,
            stored,
            state=new.state,
            capacity=capacity,
            expires=expires,
            static_secret=new.static_secret,
            now=wm.clock(),
        )
        tx.notify(CHANNEL, pool_id)
        row = present(await tx.fetchrow("get_pool_worker", pool_id, group, worker_id))
    log.info("worker %s/%s of pool %s updated by %s", group, worker_id, pool_id, client_id)
    return shown(row)


async def write_worker(tx: Tx, stored: StoredWorker, *, now: Millis, **changes: object) -> None:
    """Write `stored` back with `changes` (its columns by name), last modified and checked now."""
    values: dict[str, object] = {
        "state": stored.state,
        "capacity": stored.capacity,
        "expires": stored.expires,
        "static_secret": stored.static_secret,
        "registration_secret": stored.registration_secret,
        "provider_data": orjson.dumps(stored.provider_data).decode(),
    }
    values.update(changes)
    if isinstance(values["provider_data"], dict):
        values["provider_data"] = orjson.dumps(values["provider_data"]).decode()
    await tx.execute(
        "update_pool_worker",
        worker_pool_id=stored.worker_pool_id,
        worker_group=stored.worker_group,
        worker_id=stored.worker_id,
        now=now,
        **values,
    )


async def remove_worker(
    wm: WorkerManager, pool_id: str, group: str, worker_id: str, *, client_id: str
) -> None:
    """Remove a worker: a static one is stopped at once (its registration then fails); a local
    one is stopped by the provisioner, which stops its process. 404 if there is no such worker."""
    now = wm.clock()
    async with wm.storage.transaction() as tx:
        row = await tx.fetchrow("lock_pool_worker", pool_id, group, worker_id)
        if row is None:
            raise ResourceNotFound("Worker not found")
        stored = stored_worker(row)
        provider = _provider_of(wm, stored.provider_id, pool_id)
        state = provider.removed_state(stored)
        if state != stored.state:
            await write_worker(
                tx,
                stored,
                state=state,
                expires=max(stored.expires, now + EXPIRY_KEEP) if state == "stopped" else stored.expires,
                now=now,
            )
            message = worker_message(
                "worker-removed", stored, now, reason="workerManager.removeWorker API call"
            )
            await queue_service.publish_tx(wm.queue, tx, [message])
            tx.notify(CHANNEL, pool_id)
    log.info("worker %s/%s of pool %s removed by %s", group, worker_id, pool_id, client_id)


async def get_worker(wm: WorkerManager, pool_id: str, group: str, worker_id: str) -> Worker:
    async with wm.storage.reader() as session:
        row = await session.fetchrow("get_pool_worker", pool_id, group, worker_id)
    if row is None:
        raise ResourceNotFound(f"Worker {group}/{worker_id} in worker pool {pool_id} does not exist")
    return shown(row)


async def list_workers(
    wm: WorkerManager, pool_id: str, *, state: str, after: tuple[str, str], limit: int
) -> list[Row]:
    """Up to `limit + 1` workers of a pool after `after` (group, id), in that order; 404 for no pool."""
    async with wm.storage.reader() as session:
        if await pools.load(session, pool_id) is None:
            raise ResourceNotFound(f"Worker pool {pool_id} does not exist")
        return await session.fetch("list_pool_workers", pool_id, state, after[0], after[1], limit + 1)


async def list_workers_in_group(
    wm: WorkerManager, pool_id: str, group: str, *, after: str, limit: int
) -> list[Row]:
    async with wm.storage.reader() as session:
        return await session.fetch("list_pool_workers_in_group", pool_id, group, after, limit + 1)


def credentials(wm: WorkerManager, worker: StoredWorker, expires: Millis) -> hawk.TemporaryCredentials:
    """A registered worker's credentials: what a worker of its pool and id needs, no more."""
    pool_id = worker.worker_pool_id
    who = f"{worker.worker_group}/{worker.worker_id}"
    scopes = [
        f"assume:worker-type:{pool_id}",
        f"assume:worker-pool:{pool_id}",
        f"assume:worker-id:{who}",
        f"queue:worker-id:{who}",
        f"secrets:get:worker-type:{pool_id}",
        f"secrets:get:worker-pool:{pool_id}",
        f"queue:claim-work:{pool_id}",
        # A worker checks that its running tasks were not cancelled (TaskCluster's status needs
        # no scope at all; here reading a task's status does).
        "queue:status:*",
        f"worker-manager:remove-worker:{pool_id}/{who}",
        f"worker-manager:reregister-worker:{pool_id}/{who}",
        f"worker-manager:should-worker-terminate:{pool_id}/{who}",
    ]
    issuer_id, issuer_token = wm.issuer
    name = f"worker/{worker.provider_id}/{pool_id}/{who}"
    return hawk.temporary_credentials(
        issuer_id, issuer_token, scopes, wm.clock() - CREDENTIALS_START_SKEW, expires, client_id=name
    )


async def register(wm: WorkerManager, request: RegisterRequest) -> Registration:
    """registerWorker: TaskCluster's checks in its order, then the provider's proof (the static
    secret), then credentials and a fresh registration secret. A local worker becomes running."""
    pool_id, provider_id = request["workerPoolId"], request["providerId"]
    group, worker_id = request["workerGroup"], request["workerId"]
    now = wm.clock()
    async with wm.storage.transaction() as tx:
        pool = await pools.load(tx, pool_id)
        if pool is None:
            raise ResourceNotFound(f"Worker pool {pool_id} does not exist")
        provider = wm.provider(provider_id)
        if provider is None:
            raise ResourceNotFound(f"Provider {provider_id} does not exist")
        if pool.provider_id != provider_id and provider_id not in pool.previous_provider_ids:
            raise InputError(f"Worker pool {pool_id} not associated with provider {provider_id}")
        row = await tx.fetchrow("lock_pool_worker", pool_id, group, worker_id)
        if row is None:
            raise ResourceNotFound(f"Worker {group}/{worker_id} in worker pool {pool_id} does not exist")
        worker = stored_worker(row)
        if worker.expires < now:
            raise InputError(f"Worker {group}/{worker_id} has expired")
        if worker.provider_id != provider_id:
            raise InputError(f"Worker {group}/{worker_id} does not have provider {provider_id}")
        if worker.state not in ("running", "requested") or (
            worker.state == "requested" and provider.provider_type == "static"
        ):
            raise InputError("worker is not running")
        proof = request["workerIdentityProof"]
        if "staticSecret" not in proof or not proof["staticSecret"]:
            raise InputError("missing staticSecret in workerIdentityProof")
        if not matches(proof["staticSecret"], worker.static_secret):
            raise InputError("bad staticSecret in workerIdentityProof")
        expires = provider.registration_expiry(pool, now)
        secret = slugid.nice() + slugid.nice()
        messages = []
        if worker.state == "requested":
            messages.append(worker_message("worker-running", worker, now))
            tx.notify(CHANNEL, pool_id)
        await write_worker(tx, worker, state="running", registration_secret=digest(secret), now=now)
        await queue_service.publish_tx(wm.queue, tx, messages)
    log.info("worker %s/%s of pool %s registered (provider %s)", group, worker_id, pool_id, provider_id)
    worker_config = pool.config.get("workerConfig", {})
    return {
        "expires": dates.to_iso(expires),
        "credentials": credentials(wm, worker, expires),
        "workerConfig": worker_config if isinstance(worker_config, dict) else {},
        "secret": secret,
    }


REREGISTER_REFUSED = "Could not generate credentials for this secret"


async def reregister(wm: WorkerManager, request: ReregisterRequest) -> Reregistration:
    """reregisterWorker: new credentials and a rotated secret for a running worker that holds the
    secret of its last registration."""
    pool_id, group, worker_id = request["workerPoolId"], request["workerGroup"], request["workerId"]
    now = wm.clock()
    async with wm.storage.transaction() as tx:
        row = await tx.fetchrow("lock_pool_worker", pool_id, group, worker_id)
        if row is None:
            raise InputError(REREGISTER_REFUSED)
        worker = stored_worker(row)
        if not matches(request["secret"], worker.registration_secret):
            raise InputError(REREGISTER_REFUSED)
        if worker.state != "running":
            raise InputError(f"Worker {group}/{worker_id} is not running")
        if worker.expires < now:
            raise InputError(f"Worker {group}/{worker_id} has expired")
        pool = await _pool_or_404(tx, pool_id)
        provider = _provider_of(wm, worker.provider_id, pool_id)
        expires = provider.registration_expiry(pool, now)
        secret = slugid.nice() + slugid.nice()
        await write_worker(tx, worker, registration_secret=digest(secret), now=now)
    return {
        "expires": dates.to_iso(expires),
        "credentials": credentials(wm, worker, expires),
        "secret": secret,
    }
