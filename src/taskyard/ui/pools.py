"""`GET /pools`: the worker-manager's pools; `GET /pools/{provisionerId}/{workerType}`: one pool.

Each pool shows its provider, its capacity (the workers' capacity now, and a local pool's
`minCapacity` and `maxCapacity`), its task queue's pending tasks, its workers by state and its
recent errors; a pool's page lists its workers and errors too, and its config.

Every read goes through the API's call pipeline as the viewer (`ui/access.py`), with the
worker-manager's own scopes: the list is `listWorkerPools` (`worker-manager:list-worker-pools`), a
pool `workerPool` (`worker-manager:get-worker-pool:<id>`); without them the page is the refusal
page. What a pool's entry adds is shown only to a viewer holding that read's scopes, else the
scope it needs is named: the pending tasks are `taskQueueCounts`' (`queue:pending-count:<id>` and
`queue:claimed-count:<id>`), the workers `listWorkersForWorkerPool`'s
(`worker-manager:list-workers:<id>`), the errors `listWorkerPoolErrors`'
(`worker-manager:list-worker-pool-errors:<id>`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from taskyard.api import calls
from taskyard.api.routing import check_params
from taskyard.model import paging
from taskyard.pools.service import NULL_PROVIDER, STATES
from taskyard.ui import access
from taskyard.ui.render import UI, view

SERVICE = "worker-manager"
MAX_POOLS = paging.MAX_LIMIT  # pools listed on the page
MAX_WORKERS = paging.MAX_LIMIT  # workers listed on a pool's page
ERRORS_SHOWN = 20  # a pool's newest errors on its page
LIST_ERRORS_SHOWN = 1  # ... and on the list: the newest


@dataclass
class PoolView:
    """A pool as the pages show it: the API's pool, and what the viewer may read besides."""

    pool: dict[str, Any]
    local: bool
    deleted: bool
    min_capacity: int | None
    max_capacity: int | None
    by_state: list[tuple[str, int, int]]  # (state, workers, their capacity), states that have some
    pending: int | None  # None: the viewer may not count the queue's tasks
    pending_need: str
    errors: list[dict[str, Any]] | None  # None: the viewer may not list them
    errors_need: str
    more_errors: bool = False
    workers: list[dict[str, Any]] | None = None
    workers_need: str = ""
    more_workers: bool = False

    @property
    def pool_id(self) -> str:
        return str(self.pool["workerPoolId"])


def _params(pool_id: str) -> dict[str, str]:
    return check_params({"workerPoolId": pool_id})


async def _view(ui: UI, request: Request, pool: dict[str, Any], errors_shown: int) -> PoolView:
    """`pool` with its queue's pending tasks and its newest errors, each if the viewer may read it."""
    params = _params(pool["workerPoolId"])
    counts_step = calls.route("taskQueueCounts")
    counts_params = {"taskQueueId": pool["workerPoolId"]}
    counts = await access.attempt(ui, request, counts_step, counts_params)
    errors_step = calls.route("listWorkerPoolErrors", SERVICE)
    page = await access.attempt(ui, request, errors_step, params, {"limit": str(errors_shown)})
    config = pool.get("config") or {}
    local = pool["providerId"] == "local"
    return PoolView(
        pool=pool,
        local=local,
        deleted=pool["providerId"] == NULL_PROVIDER,
        min_capacity=int(config.get("minCapacity", 0)) if local else None,
        max_capacity=int(config["maxCapacity"]) if local and "maxCapacity" in config else None,
        by_state=[
            (s, int(pool.get(f"{s}Count", 0)), int(pool.get(f"{s}Capacity", 0)))
            for s in STATES
            if pool.get(f"{s}Count")
        ],
        pending=None if counts is None else int(cast(Mapping[str, Any], counts)["pendingTasks"]),
        pending_need=access.needs(counts_step, counts_params),
        errors=None if page is None else list(cast(Mapping[str, Any], page)["workerPoolErrors"]),
        errors_need=access.needs(errors_step, params),
        more_errors=page is not None and bool(cast(Mapping[str, Any], page).get("continuationToken")),
    )


async def pools_page(ui: UI, request: Request) -> Response:
    """Every pool (the first `MAX_POOLS`), each with its capacity, pending tasks, workers by state
    and newest error."""
    found = cast(
        Mapping[str, Any],
        await access.read(
            ui, request, calls.route("listWorkerPools", SERVICE), {}, {"limit": str(MAX_POOLS)}
        ),
    )
    shown = [await _view(ui, request, dict(pool), LIST_ERRORS_SHOWN) for pool in found["workerPools"]]
    return await ui.page(
        request,
        "pools.html",
        pools=shown,
        capped=bool(found.get("continuationToken")),
        max_pools=MAX_POOLS,
    )


async def pool_page(ui: UI, request: Request) -> Response:
    """One pool: its state and config, its workers and its newest errors."""
    pool_id = f"{request.path_params['provisionerId']}/{request.path_params['workerType']}"
    params = _params(pool_id)
    pool = cast(dict[str, Any], await access.read(ui, request, calls.route("workerPool", SERVICE), params))
    shown = await _view(ui, request, pool, ERRORS_SHOWN)
    workers_step = calls.route("listWorkersForWorkerPool", SERVICE)
    page = await access.attempt(ui, request, workers_step, params, {"limit": str(MAX_WORKERS)})
    if page is not None:
        shown.workers = list(cast(Mapping[str, Any], page)["workers"])
        shown.more_workers = bool(cast(Mapping[str, Any], page).get("continuationToken"))
    shown.workers_need = access.needs(workers_step, params)
    return await ui.page(
        request,
        "pool.html",
        p=shown,
        config=json.dumps(pool.get("config") or {}, indent=2, sort_keys=True),
        max_workers=MAX_WORKERS,
    )


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/pools", view(pools_page)(ui), methods=["GET"]),
        Route("/pools/{provisionerId}/{workerType}", view(pool_page)(ui), methods=["GET"]),
    ]
