"""The `static` provider (machines someone else runs, each created by an admin with a secret it
registers with) and the `null-provider` (a deleted pool's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskyard.model import schema
from taskyard.model.errors import InputError
from taskyard.model.types import JSONObject, Millis
from taskyard.pools.port import NewWorker, StoredPool, StoredWorker, WorkerRequest
from taskyard.pools.workers import digest

if TYPE_CHECKING:
    from taskyard.pools.service import WorkerManager

REREGISTRATION_DEFAULT_S = 4 * 24 * 3600  # 96 hours
REREGISTRATION_MAX_S = 30 * 24 * 3600
STATIC_CONFIG = schema.obj(
    {
        "lifecycle": schema.obj(
            {"reregistrationTimeout": schema.integer(minimum=1, maximum=REREGISTRATION_MAX_S)},
            additional=False,
        ),
        "workerConfig": schema.any_object(),
    },
    additional=False,
)
NOT_SUPPORTED = "not supported for this provider"


def secret_digest(request: WorkerRequest, *, required: bool, old: str = "") -> str:
    """The digest of `providerInfo.staticSecret`; 400 if it is missing and `required`."""
    info = request.get("providerInfo", {})
    secret = info.get("staticSecret") if isinstance(info, dict) else None
    if secret is None or secret == "":
        if required:
            raise InputError("no worker staticSecret provided (providerInfo.staticSecret)")
        return old
    if not isinstance(secret, str):
        raise InputError("providerInfo.staticSecret must be a string")
    return digest(secret)


class StaticProvider:
    provider_type = "static"

    def check_config(self, config: JSONObject) -> None:
        schema.validate(STATIC_CONFIG, config, where="config")

    def new_worker(self, request: WorkerRequest) -> NewWorker:
        return NewWorker("running", secret_digest(request, required=True))

    def updated_worker(self, stored: StoredWorker, request: WorkerRequest) -> NewWorker:
        return NewWorker(stored.state, secret_digest(request, required=False, old=stored.static_secret))

    def removed_state(self, stored: StoredWorker) -> str:
        return "stopped"

    def registration_expiry(self, pool: StoredPool, now: Millis) -> Millis:
        lifecycle = pool.config.get("lifecycle")
        seconds = REREGISTRATION_DEFAULT_S
        if isinstance(lifecycle, dict) and isinstance(lifecycle.get("reregistrationTimeout"), int):
            seconds = int(lifecycle["reregistrationTimeout"])  # type: ignore[arg-type]
        return now + seconds * 1000

    async def provision(self, wm: WorkerManager, pools: list[StoredPool]) -> None:
        return None  # static workers are started by whoever runs their machines

    async def release(self, wm: WorkerManager, *, final: bool = False) -> None:
        return None


class NullProvider:
    """A deleted pool's provider: it creates nothing, and its workers can only stop."""

    provider_type = "null"

    def check_config(self, config: JSONObject) -> None:
        return None

    def new_worker(self, request: WorkerRequest) -> NewWorker:
        raise InputError(NOT_SUPPORTED)

    def updated_worker(self, stored: StoredWorker, request: WorkerRequest) -> NewWorker:
        raise InputError(NOT_SUPPORTED)

    def removed_state(self, stored: StoredWorker) -> str:
        return "stopped"

    def registration_expiry(self, pool: StoredPool, now: Millis) -> Millis:
        raise InputError(NOT_SUPPORTED)

    async def provision(self, wm: WorkerManager, pools: list[StoredPool]) -> None:
        return None

    async def release(self, wm: WorkerManager, *, final: bool = False) -> None:
        return None
