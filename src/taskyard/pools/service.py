"""The worker-manager's shared machinery: the `WorkerManager` object, and the records its
operations read and answer."""

from __future__ import annotations

import asyncio
from typing import NotRequired, TypedDict

from taskyard.model.owner_mail import OwnerMail, no_mail
from taskyard.model.types import JSONObject
from taskyard.pools.port import Provider
from taskyard.queue.service import PENDING_CHANNEL, Queue
from taskyard.storage.port import Row

PROVISIONER = "worker-manager-provisioner"  # the job's name, in logs and for `Storage.lead`
UPKEEP = "worker-manager-upkeep"
# A change to a pool or a worker that the provisioner must act on (in whichever process leads).
CHANNEL = "taskyard_pools"
NULL_PROVIDER = "null-provider"
STATES = ("requested", "running", "stopping", "stopped")


def present(row: Row | None) -> Row:
    """A row the same transaction wrote or locked: there, or the database broke its word."""
    if row is None:
        raise RuntimeError("a row this transaction wrote is not there")
    return row


class WorkerPool(TypedDict):
    """A pool as the API answers it (TaskCluster's worker-pool-full)."""

    workerPoolId: str
    providerId: str
    description: str
    config: JSONObject
    owner: str
    emailOnError: bool
    created: str
    lastModified: str
    currentCapacity: int
    requestedCount: int
    runningCount: int
    stoppingCount: int
    stoppedCount: int
    requestedCapacity: int
    runningCapacity: int
    stoppingCapacity: int
    stoppedCapacity: int


class PoolRequest(TypedDict):
    """What createWorkerPool and updateWorkerPool take, the route's schema checked."""

    workerPoolId: NotRequired[str]
    providerId: str
    description: str
    config: JSONObject
    owner: str
    emailOnError: bool


class Worker(TypedDict):
    """A worker as the API answers it (TaskCluster's worker-full)."""

    workerPoolId: str
    workerGroup: str
    workerId: str
    providerId: str
    created: str
    expires: str
    state: str
    capacity: int
    lastModified: str
    lastChecked: str


class WorkerManager:
    """Everything the worker-manager's operations share: the queue (its storage, clock and outbox),
    the providers by id, and the client that signs the credentials registered workers get.

    `changed` wakes the provisioner (which acts only in the process that leads it): `dirty` says
    a pool or a worker changed in some process (heard on `CHANNEL`) or a local worker exited,
    and `pending` collects the task queues that had work made pending since it last looked.
    """

    def __init__(
        self,
        queue: Queue,
        *,
        providers: dict[str, Provider],
        issuer: tuple[str, str],
        mail: OwnerMail = no_mail,
    ) -> None:
        self.queue = queue
        self.storage = queue.storage
        self.clock = queue.clock
        self.providers = providers
        self.issuer = issuer
        self.mail = mail  # to a pool's owner about its errors (emailOnError)
        self.changed = asyncio.Event()
        self.dirty = True  # a pool or worker changed: the provisioner reads every pool again
        self.pending: set[str] = set()

    async def start(self) -> None:
        """Hear of pool and worker changes, and of work made pending, from every process."""
        await self.storage.listen(CHANNEL, self._heard)
        await self.storage.listen(PENDING_CHANNEL, self._heard_pending)

    def _heard(self, payload: str | None) -> None:
        self.poke()

    def poke(self) -> None:
        """Have the provisioner look at every pool again, at once."""
        self.dirty = True
        self.changed.set()

    def _heard_pending(self, task_queue_id: str | None) -> None:
        if task_queue_id is not None:
            self.pending.add(task_queue_id)
        self.changed.set()

    def provider(self, provider_id: str) -> Provider | None:
        return self.providers.get(provider_id)

    def __repr__(self) -> str:
        return f"WorkerManager(providers={sorted(self.providers)})"


def static_only(queue: Queue) -> WorkerManager:
    """A worker-manager with the static provider alone, signing with the queue's client: what an
    app built without `serve` (a test's) has."""
    from taskyard.pools.static import NullProvider, StaticProvider

    providers: dict[str, Provider] = {"static": StaticProvider(), NULL_PROVIDER: NullProvider()}
    return WorkerManager(queue, providers=providers, issuer=queue.credentials_issuer)
