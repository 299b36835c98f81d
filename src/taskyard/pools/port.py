"""Providers as a port: what the worker-manager asks of whatever starts a pool's workers.

A provider checks its pools' configs, says how a worker is created, updated, removed and
registered, and (if it starts workers itself) provisions its pools when the provisioner runs.
The adapters here: `static` (machines someone else runs, registered with a secret), `local`
(`taskyard worker` processes on the server's machine) and `null-provider` (a deleted pool).

An adapter for a cloud or a cluster (Kubernetes pods, cloud VMs) would start its workers in
`provision` (from the estimate in `estimate.py`), hand each a secret the way `local` does, verify
that secret (or the cloud's identity document) in `register`, and stop what it started in
`remove` and `release`; docs/worker-pools.md, "Another provider".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict

from taskyard.model.types import JSONObject, Millis

if TYPE_CHECKING:
    from taskyard.pools.service import WorkerManager


class WorkerRequest(TypedDict):
    """What createWorker and updateWorker take, the route's schema checked."""

    expires: str
    capacity: NotRequired[int]
    providerInfo: NotRequired[JSONObject]


@dataclass(frozen=True)
class NewWorker:
    """How a provider records a worker the API creates or updates."""

    state: str
    static_secret: str  # the secret's digest ("" for none)


@dataclass(frozen=True)
class StoredWorker:
    """A worker's row, as providers see it."""

    worker_pool_id: str
    worker_group: str
    worker_id: str
    provider_id: str
    state: str
    capacity: int
    created: Millis
    expires: Millis
    static_secret: str
    registration_secret: str
    provider_data: JSONObject


@dataclass(frozen=True)
class StoredPool:
    """A pool's row, its config parsed."""

    worker_pool_id: str
    provider_id: str
    previous_provider_ids: tuple[str, ...]
    description: str
    config: JSONObject
    owner: str
    email_on_error: bool
    created: Millis
    last_modified: Millis


class Provider(Protocol):
    provider_type: str

    def check_config(self, config: JSONObject) -> None:
        """400 (InputValidationError) naming the field of `config` this provider cannot take."""

    def new_worker(self, request: WorkerRequest) -> NewWorker:
        """createWorker's record; 400 (InputError) if this provider creates no workers so."""

    def updated_worker(self, stored: StoredWorker, request: WorkerRequest) -> NewWorker:
        """updateWorker's record; 400 if this provider's workers are not updated so."""

    def removed_state(self, stored: StoredWorker) -> str:
        """The state removeWorker leaves a worker in (`stopped`, or `stopping` while the provider
        stops it); 400 if this provider's workers are not removed so."""

    def registration_expiry(self, pool: StoredPool, now: Millis) -> Millis:
        """Until when the credentials of a worker that registers (or registers again) now last."""

    async def provision(self, wm: WorkerManager, pools: list[StoredPool]) -> None:
        """Start or stop workers for `pools` (this provider's, as they stand); the provisioner calls
        it in the one process that leads, whenever work or a change may call for it."""

    async def release(self, wm: WorkerManager, *, final: bool = False) -> None:
        """This process no longer provisions (it lost the lead, or with `final` it stops): stop
        what it started."""
