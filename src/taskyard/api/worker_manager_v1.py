"""The worker-manager's routes, under `/api/worker-manager/v1`: TaskCluster's worker-manager API
for a small deployment (pools, their workers and errors, worker registration).

A workerPoolId holds a `/`: clients send it as `%2F`, and the routes are matched on the path as
sent. A pool's own routes take an unencoded `/` as well; a worker's routes (three or four
segments) need it encoded, as TaskCluster's do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

from taskyard.api.queue_v1 import PING, empty, ping, version
from taskyard.api.routing import Body, Call, Route
from taskyard.model import paging, schema
from taskyard.model.errors import InvalidRequestArguments
from taskyard.model.identifiers import IDENT, TASK_QUEUE_ID
from taskyard.pools import pools, reports, workers
from taskyard.pools.port import WorkerRequest
from taskyard.pools.service import NULL_PROVIDER, STATES, PoolRequest, Worker, WorkerManager, WorkerPool
from taskyard.storage.port import Row

PROVIDER_ID = r"^([a-zA-Z0-9-_]*)$"
OWNER = r"^[^@\s]+@[^@\s]+$"
POOL_REQUEST = schema.obj(
    {
        "workerPoolId": schema.string(pattern=TASK_QUEUE_ID),
        "providerId": schema.string(pattern=PROVIDER_ID, min_length=1, max_length=38),
        "description": schema.string(max_length=10240),
        "config": schema.any_object(),
        "owner": schema.string(pattern=OWNER, max_length=1024),
        "emailOnError": schema.boolean(),
    },
    required=["providerId", "description", "config", "owner", "emailOnError"],
    additional=False,
)
_COUNT = schema.integer(minimum=0)
WORKER_POOL = schema.obj(
    {
        "workerPoolId": schema.string(),
        "providerId": schema.string(),
        "description": schema.string(),
        "config": schema.any_object(),
        "owner": schema.string(),
        "emailOnError": schema.boolean(),
        "created": schema.date_time(),
        "lastModified": schema.date_time(),
        **{
            name: _COUNT
            for name in (
                "currentCapacity",
                "requestedCount",
                "runningCount",
                "stoppingCount",
                "stoppedCount",
                "requestedCapacity",
                "runningCapacity",
                "stoppingCapacity",
                "stoppedCapacity",
            )
        },
    },
    additional=False,
)
WORKER_POOL_LIST = schema.obj(
    {"workerPools": schema.array(WORKER_POOL), "continuationToken": schema.string()},
    required=["workerPools"],
    additional=False,
)
WORKER_REQUEST = schema.obj(
    {
        "expires": schema.date_time(),
        "capacity": schema.integer(minimum=1, maximum=10**6),
        "providerInfo": schema.any_object(),
    },
    required=["expires"],
    additional=False,
)
WORKER = schema.obj(
    {
        "workerPoolId": schema.string(),
        "workerGroup": schema.string(),
        "workerId": schema.string(),
        "providerId": schema.string(),
        "created": schema.date_time(),
        "expires": schema.date_time(),
        "state": schema.enum(*STATES),
        "capacity": schema.integer(minimum=1),
        "lastModified": schema.date_time(),
        "lastChecked": schema.date_time(),
    },
    additional=False,
)
WORKER_LIST = schema.obj(
    {"workers": schema.array(WORKER), "continuationToken": schema.string()},
    required=["workers"],
    additional=False,
)
ERROR_REPORT = schema.obj(
    {
        "workerGroup": schema.string(pattern=IDENT),
        "workerId": schema.string(pattern=IDENT),
        # TaskCluster's pattern is not anchored: any text with one such character passes.
        "kind": schema.string(pattern="[-a-z0-9]+", max_length=128),
        "title": schema.string(max_length=128),
        "description": schema.string(max_length=10240),
        "extra": schema.any_object(),
    },
    required=["workerGroup", "workerId", "kind", "title", "description", "extra"],
    additional=False,
)
POOL_ERROR = schema.obj(
    {
        "errorId": schema.string(),
        "workerPoolId": schema.string(),
        "reported": schema.date_time(),
        "kind": schema.string(),
        "title": schema.string(),
        "description": schema.string(),
        "extra": schema.any_object(),
    },
    additional=False,
)
POOL_ERROR_LIST = schema.obj(
    {"workerPoolErrors": schema.array(POOL_ERROR), "continuationToken": schema.string()},
    required=["workerPoolErrors"],
    additional=False,
)
REGISTER = schema.obj(
    {
        "workerPoolId": schema.string(pattern=TASK_QUEUE_ID),
        "providerId": schema.string(pattern=PROVIDER_ID, min_length=1, max_length=38),
        "workerGroup": schema.string(pattern=IDENT),
        "workerId": schema.string(pattern=IDENT),
        "workerIdentityProof": schema.any_object(),
        "systemBootTime": schema.date_time(),
    },
    required=["workerPoolId", "providerId", "workerGroup", "workerId", "workerIdentityProof"],
    additional=False,
)
REREGISTER = schema.obj(
    {
        "workerPoolId": schema.string(pattern=TASK_QUEUE_ID),
        "workerGroup": schema.string(pattern=IDENT),
        "workerId": schema.string(pattern=IDENT),
        "secret": schema.string(pattern=r"^[a-zA-Z0-9_-]{44}$"),
    },
    required=["workerPoolId", "workerGroup", "workerId", "secret"],
    additional=False,
)
CREDENTIALS = schema.obj(
    {"clientId": schema.string(), "accessToken": schema.string(), "certificate": schema.string()},
    required=["clientId", "accessToken"],
)
REGISTRATION = schema.obj(
    {
        "expires": schema.date_time(),
        "credentials": CREDENTIALS,
        "workerConfig": schema.any_object(),
        "secret": schema.string(),
    },
    required=["expires", "credentials", "workerConfig", "secret"],
    additional=False,
)
MANAGE = {
    "AllOf": ["worker-manager:manage-worker-pool:<workerPoolId>", "worker-manager:provider:<providerId>"]
}
WHO = "<workerPoolId>/<workerGroup>/<workerId>"
ERRORS_FROM = [2**53, ""]  # the first page of errors starts before this (time, errorId) key


class ProviderEntry(TypedDict):
    providerId: str
    providerType: str


class ProviderList(paging.Page):
    providers: list[ProviderEntry]


class WorkerPoolList(paging.Page):
    workerPools: list[WorkerPool]


class WorkerList(paging.Page):
    workers: list[Worker]


class PoolErrorList(paging.Page):
    workerPoolErrors: list[reports.PoolError]


class ShouldTerminate(TypedDict):
    terminate: bool
    reason: str


def _wm(call: Call) -> WorkerManager:
    return call.services.worker_manager


def _pool_id(call: Call) -> str:
    return call.params["workerPoolId"]


def _who(call: Call) -> tuple[str, str, str]:
    return call.params["workerPoolId"], call.params["workerGroup"], call.params["workerId"]


async def list_providers(call: Call) -> ProviderList:
    query = paging.parse(call.query, max_limit=100)
    start = paging.offset(query)
    found = [
        {"providerId": pid, "providerType": p.provider_type}
        for pid, p in sorted(_wm(call).providers.items())
        if pid != NULL_PROVIDER
    ]
    page = found[start : start + query.limit + 1]
    return {
        "providers": page[: query.limit],  # type: ignore[typeddict-item]
        **paging.more(paging.offset_token(page, start, query.limit)),
    }


async def create_pool(call: Call) -> WorkerPool:
    body = call.body_as(PoolRequest)
    return await pools.create_pool(_wm(call), _pool_id(call), body, client_id=call.client_id)


async def update_pool(call: Call) -> WorkerPool:
    body = call.body_as(PoolRequest)
    return await pools.update_pool(_wm(call), _pool_id(call), body, client_id=call.client_id)


async def delete_pool(call: Call) -> WorkerPool:
    return await pools.delete_pool(_wm(call), _pool_id(call), client_id=call.client_id)


async def get_pool(call: Call) -> WorkerPool:
    return await pools.get_pool(_wm(call), _pool_id(call))


async def list_pools(call: Call) -> WorkerPoolList:
    query = paging.parse(call.query)
    (after,) = paging.after(query, 1, [""])
    found = await pools.list_pools(_wm(call), after=str(after), limit=query.limit)
    shown = found[: query.limit]
    last: list[object] | None = [shown[-1]["workerPoolId"]] if len(found) > query.limit else None
    return {"workerPools": shown, **paging.more(paging.keyset_token(found, last, query.limit))}


async def report_error(call: Call) -> reports.PoolError:
    return await reports.report(_wm(call), _pool_id(call), call.body_as(reports.ErrorReport))


async def list_errors(call: Call) -> PoolErrorList:
    query = paging.parse(call.query)
    reported, error_id = paging.after(query, 2, list(ERRORS_FROM))
    rows = await reports.list_errors(
        _wm(call),
        _pool_id(call),
        error_id=call.query.get("errorId", ""),
        before=(int(reported), str(error_id)),  # type: ignore[call-overload]
        limit=query.limit,
    )
    shown = [reports.shown(row) for row in rows[: query.limit]]
    last: list[object] | None = None
    if len(rows) > query.limit:
        row = rows[query.limit - 1]
        last = [int(row["reported"]), row["error_id"]]
    return {"workerPoolErrors": shown, **paging.more(paging.keyset_token(rows, last, query.limit))}


async def list_workers(call: Call) -> WorkerList:
    query = paging.parse(call.query)
    state = call.query.get("state", "")
    if state and state not in STATES:
        raise InvalidRequestArguments(
            f"query parameter state must be one of {', '.join(STATES)} (got {state[:40]!r})"
        )
    group, worker_id = paging.after(query, 2, ["", ""])
    rows = await workers.list_workers(
        _wm(call), _pool_id(call), state=state, after=(str(group), str(worker_id)), limit=query.limit
    )
    return _worker_page(rows, query.limit, lambda row: [row["worker_group"], row["worker_id"]])


async def list_workers_in_group(call: Call) -> WorkerList:
    query = paging.parse(call.query)
    (after,) = paging.after(query, 1, [""])
    pool_id, group = _pool_id(call), call.params["workerGroup"]
    rows = await workers.list_workers_in_group(_wm(call), pool_id, group, after=str(after), limit=query.limit)
    return _worker_page(rows, query.limit, lambda row: [row["worker_id"]])


def _worker_page(rows: list[Row], limit: int, key: Callable[[Row], list[object]]) -> WorkerList:
    """A page of workers from `limit + 1` rows, its token holding `key` of the last one shown."""
    shown = [workers.shown(row) for row in rows[:limit]]
    last: list[object] | None = key(rows[limit - 1]) if len(rows) > limit else None
    return {"workers": shown, **paging.more(paging.keyset_token(rows, last, limit))}


async def get_worker(call: Call) -> Worker:
    return await workers.get_worker(_wm(call), *_who(call))


async def create_worker(call: Call) -> Worker:
    body = call.body_as(WorkerRequest)
    return await workers.create_worker(_wm(call), *_who(call), body, client_id=call.client_id)


async def update_worker(call: Call) -> Worker:
    body = call.body_as(WorkerRequest)
    return await workers.update_worker(_wm(call), *_who(call), body, client_id=call.client_id)


async def remove_worker(call: Call) -> Body:
    await workers.remove_worker(_wm(call), *_who(call), client_id=call.client_id)
    return {}


async def should_terminate(call: Call) -> ShouldTerminate:
    found = await workers.get_worker(_wm(call), *_who(call))
    if found["state"] in ("stopping", "stopped"):
        return {"terminate": True, "reason": f"the worker is {found['state']}"}
    return {"terminate": False, "reason": "none"}


async def register(call: Call) -> workers.Registration:
    return await workers.register(_wm(call), call.body_as(workers.RegisterRequest))


async def reregister(call: Call) -> workers.Reregistration:
    return await workers.reregister(_wm(call), call.body_as(workers.ReregisterRequest))


ROUTES = [
    Route("GET", "/ping", "ping", ping, output=PING),
    Route("GET", "/__heartbeat__", "heartbeat", empty),
    Route("GET", "/__lbheartbeat__", "lbheartbeat", empty),
    Route("GET", "/__version__", "version", version),
    Route("GET", "/providers", "listProviders", list_providers, "worker-manager:list-providers"),
    Route(
        "GET",
        "/worker-pools",
        "listWorkerPools",
        list_pools,
        "worker-manager:list-worker-pools",
        output=WORKER_POOL_LIST,
    ),
    Route(
        "PUT",
        "/worker-pool/{workerPoolId:path}",
        "createWorkerPool",
        create_pool,
        MANAGE,
        POOL_REQUEST,
        scope_body=("providerId",),
        output=WORKER_POOL,
    ),
    Route(
        "POST",
        "/worker-pool/{workerPoolId:path}",
        "updateWorkerPool",
        update_pool,
        MANAGE,
        POOL_REQUEST,
        stability="experimental",
        scope_body=("providerId",),
        output=WORKER_POOL,
    ),
    Route(
        "DELETE",
        "/worker-pool/{workerPoolId:path}",
        "deleteWorkerPool",
        delete_pool,
        "worker-manager:manage-worker-pool:<workerPoolId>",
        output=WORKER_POOL,
    ),
    Route(
        "GET",
        "/worker-pool/{workerPoolId:path}",
        "workerPool",
        get_pool,
        "worker-manager:get-worker-pool:<workerPoolId>",
        output=WORKER_POOL,
    ),
    Route(
        "POST",
        "/worker-pool-errors/{workerPoolId:path}",
        "reportWorkerError",
        report_error,
        {"AllOf": ["assume:worker-pool:<workerPoolId>", "assume:worker-id:<workerGroup>/<workerId>"]},
        ERROR_REPORT,
        scope_body=("workerGroup", "workerId"),
        output=POOL_ERROR,
    ),
    Route(
        "GET",
        "/worker-pool-errors/{workerPoolId:path}",
        "listWorkerPoolErrors",
        list_errors,
        "worker-manager:list-worker-pool-errors:<workerPoolId>",
        output=POOL_ERROR_LIST,
    ),
    Route(
        "GET",
        "/workers/{workerPoolId}/{workerGroup}/{workerId}/should-terminate",
        "shouldWorkerTerminate",
        should_terminate,
        f"worker-manager:should-worker-terminate:{WHO}",
        stability="experimental",
    ),
    Route(
        "GET",
        "/workers/{workerPoolId}/{workerGroup}/{workerId}",
        "worker",
        get_worker,
        f"worker-manager:get-worker:{WHO}",
        output=WORKER,
    ),
    Route(
        "PUT",
        "/workers/{workerPoolId}/{workerGroup}/{workerId}",
        "createWorker",
        create_worker,
        f"worker-manager:create-worker:{WHO}",
        WORKER_REQUEST,
        output=WORKER,
    ),
    Route(
        "POST",
        "/workers/{workerPoolId}/{workerGroup}/{workerId}",
        "updateWorker",
        update_worker,
        f"worker-manager:update-worker:{WHO}",
        WORKER_REQUEST,
        output=WORKER,
    ),
    Route(
        "DELETE",
        "/workers/{workerPoolId}/{workerGroup}/{workerId}",
        "removeWorker",
        remove_worker,
        f"worker-manager:remove-worker:{WHO}",
    ),
    Route(
        "GET",
        "/workers/{workerPoolId}/{workerGroup}",
        "listWorkersForWorkerGroup",
        list_workers_in_group,
        "worker-manager:list-workers:<workerPoolId>/<workerGroup>",
        output=WORKER_LIST,
    ),
    Route(
        "GET",
        "/workers/{workerPoolId:path}",
        "listWorkersForWorkerPool",
        list_workers,
        "worker-manager:list-workers:<workerPoolId>",
        output=WORKER_LIST,
    ),
    Route("POST", "/worker/register", "registerWorker", register, None, REGISTER, output=REGISTRATION),
    Route(
        "POST",
        "/worker/reregister",
        "reregisterWorker",
        reregister,
        f"worker-manager:reregister-worker:{WHO}",
        REREGISTER,
        stability="experimental",
        scope_body=("workerPoolId", "workerGroup", "workerId"),
    ),
]
