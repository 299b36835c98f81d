"""The worker-manager's routes in-process (both backends), with the static provider: pools,
workers, registration and errors as TaskCluster answers them, each route held to its scope, bad
input answered 400 naming the field, and the events each change publishes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from taskyard.api.app import Services
from taskyard.auth import static
from taskyard.auth.service import Auth
from taskyard.events.memory import MemoryBus
from taskyard.events.outbox import OutboxRelay
from taskyard.events.port import Envelope
from taskyard.events.profiles import TC_WORKER_MANAGER_PREFIX
from taskyard.model import dates
from taskyard.model.messages import WORKER_MANAGER_EXCHANGES
from taskyard.pools.local import LocalProvider
from taskyard.pools.service import NULL_PROVIDER, WorkerManager
from taskyard.pools.static import NullProvider, StaticProvider
from taskyard.queue.service import Queue
from taskyard.scheduler.service import Scheduler
from taskyard.secrets.service import Secrets
from taskyard.storage.port import Storage
from tests.api.conftest import ROOT, Api, Credentials, assert_error
from tests.api.helpers import create_client
from tests.conftest import ROOT_TOKEN, FakeClock

PREFIX = "/api/worker-manager/v1"
POOL = "proj/static-pool"
SECRET = "s" * 44
DAY = 86_400_000


async def call(api: Api, method: str, path: str, *args: Any, **kwargs: Any) -> httpx.Response:
    return await api.call(method, path, *args, prefix=PREFIX, **kwargs)


def enc(pool_id: str) -> str:
    return quote(pool_id, safe="")  # as TaskCluster's clients send it: `/` as %2F


def pool_body(**more: Any) -> dict[str, Any]:
    return {
        "providerId": "static",
        "description": "machines in the rack",
        "config": {"workerConfig": {"a": 1}},
        "owner": "ops@example.com",
        "emailOnError": False,
        **more,
    }


def worker_body(clock: FakeClock, **more: Any) -> dict[str, Any]:
    return {"expires": dates.to_iso(clock() + DAY), "providerInfo": {"staticSecret": SECRET}, **more}


def register_body(**more: Any) -> dict[str, Any]:
    return {
        "workerPoolId": POOL,
        "providerId": "static",
        "workerGroup": "rack",
        "workerId": "w1",
        "workerIdentityProof": {"staticSecret": SECRET},
        **more,
    }


class Events:
    def __init__(self, relay: OutboxRelay, bus: MemoryBus) -> None:
        self.relay, self.bus, self.seen = relay, bus, list[Envelope]()

    async def collect(self) -> list[tuple[str, str, dict[str, Any]]]:
        while await self.relay.relay_once():
            pass
        await self.bus.flush()
        seen = [(e.exchange.removeprefix(TC_WORKER_MANAGER_PREFIX), e.routing_key, e.body) for e in self.seen]
        self.seen.clear()
        return seen  # type: ignore[return-value]


@pytest.fixture
def services(queue: Queue, auth: Auth, secrets: Secrets, tmp_path: Path) -> Services:
    """The API's services with `serve`'s worker-manager: the static, local and null providers, and
    the worker-manager's own client signing workers' credentials (no provisioner runs here: the
    local provider starts nothing)."""
    local = LocalProvider(root_url="http://127.0.0.1:1", data_dir=str(tmp_path))
    issuer = (
        static.WORKER_MANAGER_CLIENT_ID,
        static.derived_token(ROOT_TOKEN, static.WORKER_MANAGER_CLIENT_ID),
    )
    manager = WorkerManager(
        queue,
        providers={"static": StaticProvider(), "local": local, NULL_PROVIDER: NullProvider()},
        issuer=issuer,
    )
    scheduler = Scheduler(queue, expand=auth.expand)
    return Services(
        queue=queue, auth=auth, scheduler=scheduler, secrets=secrets, worker_manager_service=manager
    )


@pytest.fixture
async def events(storage: Storage) -> AsyncIterator[Events]:
    bus = MemoryBus()
    found = Events(OutboxRelay(storage, bus), bus)
    for exchange in WORKER_MANAGER_EXCHANGES:
        bus.subscribe(TC_WORKER_MANAGER_PREFIX + exchange, "#", found.seen.append)
    yield found
    await bus.close()


async def create_pool(api: Api, pool_id: str = POOL, **more: Any) -> dict[str, Any]:
    answer = await call(api, "PUT", f"/worker-pool/{enc(pool_id)}", pool_body(**more))
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def test_a_pool_is_created_read_repeated_and_refused_when_it_differs(api: Api, events: Events) -> None:
    created = await create_pool(api)
    assert created["workerPoolId"] == POOL and created["providerId"] == "static"
    assert created["config"] == {"workerConfig": {"a": 1}}
    assert created["currentCapacity"] == 0 and created["runningCount"] == 0
    assert created["created"] == created["lastModified"]
    again = await create_pool(api)  # the same definition: 200, the pool
    assert again == created
    assert_error(
        await call(api, "PUT", f"/worker-pool/{enc(POOL)}", pool_body(description="other")),
        409,
        "RequestConflict",
        names=[POOL],
    )
    got = await call(api, "GET", f"/worker-pool/{enc(POOL)}")
    assert got.json() == created
    unencoded = await call(api, "GET", f"/worker-pool/{POOL}")  # an unencoded `/` works too
    assert unencoded.json() == created
    (event,) = await events.collect()
    assert event == (
        "worker-pool-created",
        "primary._._._._._._._",
        {"workerPoolId": POOL, "providerId": "static"},
    )


@pytest.mark.parametrize(
    ("body", "names"),
    [
        (pool_body(providerId="nope"), ["Invalid Provider", "nope", "static"]),
        (pool_body(config={"bogus": 1}), ["config", "bogus"]),
        (
            pool_body(config={"lifecycle": {"reregistrationTimeout": 0}}),
            ["config.lifecycle.reregistrationTimeout"],
        ),
        (pool_body(owner="not an address"), ["owner"]),
        (pool_body(workerPoolId="proj/other"), ["workerPoolId", "proj/other"]),
        (
            pool_body(providerId="local", config={"maxCapacity": 1, "minCapacity": 2}),
            ["minCapacity", "maxCapacity"],
        ),
        (pool_body(providerId="local", config={"minCapacity": 1}), ["maxCapacity"]),
        (pool_body(providerId="local", config={"maxCapacity": -1}), ["config.maxCapacity"]),
        (pool_body(providerId="null-provider"), ["Invalid Provider"]),
        (
            pool_body(providerId="local", config={"maxCapacity": 2, "workerConfig": {"protocol": "x"}}),
            ["protocol"],
        ),
        ({k: v for k, v in pool_body().items() if k != "owner"}, ["owner"]),
    ],
)
async def test_a_bad_pool_is_a_400_naming_the_field(api: Api, body: dict[str, Any], names: list[str]) -> None:
    answer = await call(api, "PUT", f"/worker-pool/{enc(POOL)}", body)
    assert answer.status_code == 400, answer.text
    message = answer.json()["message"]
    assert any(name in message for name in names), (names, message)


async def test_a_bad_pool_id_is_a_400(api: Api) -> None:
    assert_error(
        await call(api, "PUT", f"/worker-pool/{enc('Proj/Upper')}", pool_body()),
        400,
        "InvalidRequestArguments",
        names=["workerPoolId"],
    )


async def test_missing_pools_are_404(api: Api) -> None:
    assert_error(await call(api, "GET", f"/worker-pool/{enc('p/missing')}"), 404, "ResourceNotFound")
    assert_error(
        await call(api, "POST", f"/worker-pool/{enc('p/missing')}", pool_body()), 404, "ResourceNotFound"
    )
    assert_error(await call(api, "DELETE", f"/worker-pool/{enc('p/missing')}"), 404, "ResourceNotFound")
    assert_error(await call(api, "GET", f"/workers/{enc('p/missing')}"), 404, "ResourceNotFound")


async def test_update_and_delete_announce_and_hand_the_pool_to_the_null_provider(
    api: Api, events: Events, clock: FakeClock
) -> None:
    await create_pool(api)
    clock.advance(1)
    updated = await call(api, "POST", f"/worker-pool/{enc(POOL)}", pool_body(description="new"))
    assert updated.json()["description"] == "new"
    assert updated.json()["lastModified"] > updated.json()["created"]
    deleted = await call(api, "DELETE", f"/worker-pool/{enc(POOL)}")
    assert deleted.json()["providerId"] == "null-provider"
    assert_error(
        await call(api, "PUT", f"/workers/{enc(POOL)}/rack/w9", worker_body(clock)),
        400,
        "InputError",
        names=["not supported"],
    )
    seen = [(e[0], e[2]) for e in await events.collect()]
    assert seen == [
        ("worker-pool-created", {"workerPoolId": POOL, "providerId": "static"}),
        ("worker-pool-updated", {"workerPoolId": POOL, "providerId": "static"}),
        (
            "worker-pool-updated",
            {"workerPoolId": POOL, "providerId": "null-provider", "previousProviderId": "static"},
        ),
    ]


async def test_pools_are_listed_by_id_in_pages(api: Api) -> None:
    for name in ("p/c", "p/a", "p/b"):
        await create_pool(api, name)
    first = (await call(api, "GET", "/worker-pools", query={"limit": "2"})).json()
    assert [p["workerPoolId"] for p in first["workerPools"]] == ["p/a", "p/b"]
    second = (
        await call(
            api, "GET", "/worker-pools", query={"limit": "2", "continuationToken": first["continuationToken"]}
        )
    ).json()
    assert [p["workerPoolId"] for p in second["workerPools"]] == ["p/c"] and "continuationToken" not in second


async def test_a_static_worker_is_created_registered_and_removed(
    api: Api, clock: FakeClock, events: Events
) -> None:
    await create_pool(api)
    await events.collect()
    path = f"/workers/{enc(POOL)}/rack/w1"
    created = await call(api, "PUT", path, worker_body(clock, capacity=2))
    assert created.status_code == 200, created.text
    worker = created.json()
    assert (worker["state"], worker["capacity"], worker["providerId"]) == ("running", 2, "static")
    # The same worker again answers it, echoing the request's expiry (TaskCluster's answer); another
    # capacity is a conflict.
    later = dates.to_iso(clock() + 2 * DAY)
    repeat = await call(api, "PUT", path, worker_body(clock, capacity=2, expires=later))
    assert repeat.status_code == 200 and repeat.json()["expires"] == later
    assert_error(await call(api, "PUT", path, worker_body(clock, capacity=3)), 409, "RequestConflict")
    pool = (await call(api, "GET", f"/worker-pool/{enc(POOL)}")).json()
    assert (pool["runningCount"], pool["runningCapacity"], pool["currentCapacity"]) == (1, 2, 2)

    registered = await call(api, "POST", "/worker/register", register_body(), creds=None)
    assert registered.status_code == 200, registered.text
    answer = registered.json()
    assert answer["credentials"]["clientId"] == f"worker/static/{POOL}/rack/w1"
    assert answer["workerConfig"] == {"a": 1} and len(answer["secret"]) == 44
    assert dates.parse_iso(answer["expires"]) == clock() + 96 * 3_600_000

    removed = await call(api, "DELETE", path)
    assert (removed.status_code, removed.json()) == (200, {})
    assert (await call(api, "GET", path)).json()["state"] == "stopped"
    assert_error(
        await call(api, "POST", "/worker/register", register_body(), creds=None),
        400,
        "InputError",
        names=["worker is not running"],
    )
    (removal,) = await events.collect()
    assert removal[0] == "worker-removed"
    assert removal[1] == "primary.static.proj.static-pool.rack.w1._._"
    assert removal[2]["reason"] == "workerManager.removeWorker API call" and removal[2]["capacity"] == 2


@pytest.mark.parametrize(
    ("change", "status", "names"),
    [
        ({"workerIdentityProof": {"staticSecret": "x" * 44}}, 400, ["bad staticSecret"]),
        ({"workerIdentityProof": {}}, 400, ["missing staticSecret"]),
        ({"workerId": "nobody"}, 404, ["nobody"]),
        ({"workerPoolId": "p/missing"}, 404, ["p/missing"]),
        ({"providerId": "local2"}, 404, ["local2"]),
        ({"workerIdentityProof": "text"}, 400, ["workerIdentityProof"]),
    ],
)
async def test_registration_is_refused_without_the_secret(
    api: Api, clock: FakeClock, change: dict[str, Any], status: int, names: list[str]
) -> None:
    await create_pool(api)
    await call(api, "PUT", f"/workers/{enc(POOL)}/rack/w1", worker_body(clock))
    answer = await call(api, "POST", "/worker/register", register_body(**change), creds=None)
    assert answer.status_code == status, answer.text
    assert all(name in answer.json()["message"] for name in names), answer.json()


async def test_an_expired_worker_cannot_register(api: Api, clock: FakeClock) -> None:
    await create_pool(api)
    await call(api, "PUT", f"/workers/{enc(POOL)}/rack/w1", worker_body(clock))
    clock.advance(2 * 86400)
    assert_error(
        await call(api, "POST", "/worker/register", register_body(), creds=None),
        400,
        "InputError",
        names=["expired"],
    )


def creds_of(answer: dict[str, Any]) -> Credentials:
    c = answer["credentials"]
    return Credentials(c["clientId"], c["accessToken"], c.get("certificate"))


async def test_registered_credentials_hold_the_workers_scopes_only(api: Api, clock: FakeClock) -> None:
    await create_pool(api)
    await call(api, "PUT", f"/workers/{enc(POOL)}/rack/w1", worker_body(clock))
    answer = (await call(api, "POST", "/worker/register", register_body(), creds=None)).json()
    mine = creds_of(answer)
    claimed = await api.call(
        "POST", f"/claim-work/{enc(POOL)}", {"workerGroup": "rack", "workerId": "w1", "tasks": 1}, creds=mine
    )
    assert claimed.status_code == 200, claimed.text
    as_another = await api.call(
        "POST", f"/claim-work/{enc(POOL)}", {"workerGroup": "rack", "workerId": "w2", "tasks": 1}, creds=mine
    )
    assert_error(as_another, 403, "InsufficientScopes")
    other_pool = await api.call(
        "POST", "/claim-work/proj/other", {"workerGroup": "rack", "workerId": "w1", "tasks": 1}, creds=mine
    )
    assert_error(other_pool, 403, "InsufficientScopes")
    assert_error(await call(api, "GET", "/worker-pools", creds=mine), 403, "InsufficientScopes")


async def test_reregistration_rotates_the_secret(api: Api, clock: FakeClock) -> None:
    await create_pool(api, config={"lifecycle": {"reregistrationTimeout": 3600}})
    await call(api, "PUT", f"/workers/{enc(POOL)}/rack/w1", worker_body(clock))
    first = (await call(api, "POST", "/worker/register", register_body(), creds=None)).json()
    assert dates.parse_iso(first["expires"]) == clock() + 3_600_000
    body = {"workerPoolId": POOL, "workerGroup": "rack", "workerId": "w1", "secret": first["secret"]}
    again = await call(api, "POST", "/worker/reregister", body, creds=creds_of(first))
    assert again.status_code == 200, again.text
    second = again.json()
    assert second["secret"] != first["secret"] and set(second) == {"expires", "credentials", "secret"}
    stale = await call(api, "POST", "/worker/reregister", body, creds=creds_of(second))
    assert_error(stale, 400, "InputError", names=["Could not generate credentials"])
    someone_else = await call(
        api, "POST", "/worker/reregister", {**body, "workerId": "w2"}, creds=creds_of(second)
    )
    assert_error(someone_else, 403, "InsufficientScopes")


async def test_workers_are_listed_in_pages_and_by_state(api: Api, clock: FakeClock) -> None:
    await create_pool(api)
    for worker_id in ("w3", "w1", "w2"):
        await call(api, "PUT", f"/workers/{enc(POOL)}/rack/{worker_id}", worker_body(clock))
    await call(api, "DELETE", f"/workers/{enc(POOL)}/rack/w2")
    first = (await call(api, "GET", f"/workers/{enc(POOL)}", query={"limit": "2"})).json()
    assert [w["workerId"] for w in first["workers"]] == ["w1", "w2"]
    rest = (
        await call(
            api, "GET", f"/workers/{enc(POOL)}", query={"continuationToken": first["continuationToken"]}
        )
    ).json()
    assert [w["workerId"] for w in rest["workers"]] == ["w3"]
    stopped = (await call(api, "GET", f"/workers/{enc(POOL)}", query={"state": "stopped"})).json()
    assert [w["workerId"] for w in stopped["workers"]] == ["w2"]
    in_group = (await call(api, "GET", f"/workers/{enc(POOL)}/rack")).json()
    assert [w["workerId"] for w in in_group["workers"]] == ["w1", "w2", "w3"]
    assert_error(
        await call(api, "GET", f"/workers/{enc(POOL)}", query={"state": "asleep"}),
        400,
        "InvalidRequestArguments",
        names=["state"],
    )


async def test_a_worker_needs_a_secret_and_a_future_expiry(api: Api, clock: FakeClock) -> None:
    await create_pool(api)
    path = f"/workers/{enc(POOL)}/rack/w1"
    assert_error(
        await call(api, "PUT", path, {"expires": dates.to_iso(clock() + DAY)}),
        400,
        "InputError",
        names=["staticSecret"],
    )
    assert_error(
        await call(api, "PUT", path, worker_body(clock, expires=dates.to_iso(clock() - 1000))),
        400,
        "InputError",
        names=["future"],
    )
    assert_error(await call(api, "PUT", path, worker_body(clock, capacity=0)), 400, "InputValidationError")
    assert_error(await call(api, "GET", path), 404, "ResourceNotFound")
    assert_error(await call(api, "DELETE", path), 404, "ResourceNotFound")


async def test_errors_are_reported_with_the_workers_scopes_and_listed_newest_first(
    api: Api, clock: FakeClock, events: Events
) -> None:
    await create_pool(api)
    await events.collect()
    report = {
        "workerGroup": "rack",
        "workerId": "w1",
        "kind": "disk-full",
        "title": "no room",
        "description": "/ is full",
        "extra": {"free": 0},
    }
    who = await create_client(api, "rack-w1", f"assume:worker-pool:{POOL}", "assume:worker-id:rack/w1")
    first = await call(api, "POST", f"/worker-pool-errors/{enc(POOL)}", report, creds=who)
    assert first.status_code == 200, first.text
    assert first.json()["kind"] == "disk-full" and first.json()["extra"] == {"free": 0}
    clock.advance(1)
    # TaskCluster's kind pattern is not anchored: text holding one such character passes.
    await call(api, "POST", f"/worker-pool-errors/{enc(POOL)}", {**report, "kind": "Not A Kind"}, creds=who)
    assert_error(
        await call(api, "POST", f"/worker-pool-errors/{enc(POOL)}", {**report, "workerId": "w2"}, creds=who),
        403,
        "InsufficientScopes",
    )
    listed = (await call(api, "GET", f"/worker-pool-errors/{enc(POOL)}", query={"limit": "1"})).json()
    assert [e["kind"] for e in listed["workerPoolErrors"]] == ["Not A Kind"]
    rest = (
        await call(
            api,
            "GET",
            f"/worker-pool-errors/{enc(POOL)}",
            query={"continuationToken": listed["continuationToken"]},
        )
    ).json()
    assert [e["kind"] for e in rest["workerPoolErrors"]] == ["disk-full"]
    one = (
        await call(api, "GET", f"/worker-pool-errors/{enc(POOL)}", query={"errorId": first.json()["errorId"]})
    ).json()
    assert [e["errorId"] for e in one["workerPoolErrors"]] == [first.json()["errorId"]]
    exchanges = [(e[0], e[1]) for e in await events.collect()]
    assert exchanges[0] == ("worker-pool-error", "primary.static.proj.static-pool.rack.w1._._")
    assert len(exchanges) == 2


async def test_each_route_is_held_to_its_scope(api: Api, clock: FakeClock) -> None:
    await create_pool(api)
    nobody = await create_client(api, "nobody")
    for method, path, body in [
        ("PUT", f"/worker-pool/{enc('p/x')}", pool_body()),
        ("GET", f"/worker-pool/{enc(POOL)}", None),
        ("GET", "/worker-pools", None),
        ("GET", f"/workers/{enc(POOL)}", None),
        ("PUT", f"/workers/{enc(POOL)}/rack/w1", worker_body(clock)),
        ("GET", f"/worker-pool-errors/{enc(POOL)}", None),
        ("GET", "/providers", None),
    ]:
        answer = await call(api, method, path, *([body] if body is not None else []), creds=nobody)
        assert_error(answer, 403, "InsufficientScopes")
    manager = await create_client(api, "manager", "worker-manager:manage-worker-pool:p/*")
    no_provider = await call(api, "PUT", f"/worker-pool/{enc('p/x')}", pool_body(), creds=manager)
    body = assert_error(no_provider, 403, "InsufficientScopes")
    assert "worker-manager:provider:static" in str(body)
    assert ROOT.client_id.startswith("static/")
