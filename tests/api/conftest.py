"""In-process API tests: the app over httpx's ASGI transport, signed as TaskCluster's client signs.

`api` is the app built on the `queue` and `auth` fixtures (both backends); `ROOT` signs as the static
root client.
`Api.call` signs with `mohawk.Sender` exactly like `taskcluster.client` (sha256, payload hash, content type
`application/json` when there is a body, `ext` carrying a certificate for temporary credentials); the MAC
covers host `testserver`, port 80, which is what the server sees through the ASGI transport.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import mohawk
import pytest
import taskcluster
import uvicorn
from taskcluster import utils as tc_utils

from taskyard.api import artifacts_v1, queue_v1
from taskyard.api.app import App, Services, build_app
from taskyard.api.routing import Route
from taskyard.auth import static
from taskyard.auth.service import Auth
from taskyard.events.feed import EventFeed
from taskyard.events.memory import MemoryBus
from taskyard.events.outbox import OutboxRelay
from taskyard.events.profiles import Profiles
from taskyard.model import dates, slugid
from taskyard.queue import livelogs
from taskyard.queue.service import Queue
from taskyard.scheduler.service import Scheduler
from taskyard.secrets.service import Secrets
from taskyard.storage.counting import Tally
from taskyard.storage.port import Storage
from taskyard.ui.app import Pages
from tests.conftest import ROOT_TOKEN, SECRET_KEY, FakeClock, until

BASE = "http://testserver"
PREFIX = "/api/queue/v1"
AUTH_PREFIX = "/api/auth/v1"
TASK_QUEUE_ID = "api-prov/api-wt"
ERROR_KEYS = {"code", "message", "requestInfo"}
REQUEST_INFO_KEYS = {"method", "params", "payload", "time"}

# Valid values for every path parameter the queue's routes take.
GOOD_PARAMS = {
    "taskId": "fKz7yXv3Q0m2p9Wq1bC4dA",
    "taskGroupId": "fKz7yXv3Q0m2p9Wq1bC4dA",
    "runId": "0",
    "taskQueueId": TASK_QUEUE_ID,
    "provisionerId": "api-prov",
    "workerType": "api-wt",
    "workerGroup": "wg",
    "workerId": "wid",
    "name": "private/build/target.tar.gz",
}
_PARAM_RE = re.compile(r"\{(\w+)(?::path)?\}")


@dataclass(frozen=True)
class Credentials:
    client_id: str
    access_token: str
    certificate: str | None = None

    @classmethod
    def from_response(cls, creds: Mapping[str, str]) -> Credentials:
        return cls(creds["clientId"], creds["accessToken"], creds.get("certificate"))


ROOT = Credentials(static.ROOT_CLIENT_ID, ROOT_TOKEN)
_DEFAULT: Any = object()


def hawk_header(
    method: str, url: str, body: bytes, creds: Credentials, *, timestamp: int | None = None
) -> str:
    """The Authorization header `taskcluster.client` sends for this request (its own `ext`, too)."""
    options: dict[str, Any] = {"clientId": creds.client_id, "accessToken": creds.access_token}
    if creds.certificate:
        options["certificate"] = creds.certificate
    ext = taskcluster.Queue({"rootUrl": BASE, "credentials": options}).makeHawkExt()
    sender = mohawk.Sender(
        credentials={"id": creds.client_id, "key": creds.access_token, "algorithm": "sha256"},
        ext=ext or {},
        url=url,
        content=body if body else "",
        content_type="application/json" if body else "",
        method=method,
        _timestamp=timestamp,
    )
    return str(sender.request_header)


def encode_segment(value: str) -> str:
    """A path parameter as the clients send it: every reserved character percent-encoded."""
    return quote(value, safe="")


def route_path(route: Route, **overrides: str) -> str:
    """`route.path` with every parameter filled (GOOD_PARAMS unless overridden) and percent-encoded."""

    def fill(m: re.Match[str]) -> str:
        return encode_segment(overrides.get(m[1], GOOD_PARAMS[m[1]]))

    return _PARAM_RE.sub(fill, route.path)


def route_params(route: Route) -> list[str]:
    return _PARAM_RE.findall(route.path)


def routes(*, with_params: bool | None = None, signed: bool | None = None) -> list[Route]:
    chosen = list(queue_v1.ROUTES) + list(artifacts_v1.ROUTES)
    if with_params is not None:
        chosen = [r for r in chosen if bool(route_params(r)) == with_params]
    if signed is not None:
        chosen = [r for r in chosen if (r.scopes is not None) == signed]
    return chosen


def route(name: str) -> Route:
    (found,) = [r for r in [*queue_v1.ROUTES, *artifacts_v1.ROUTES] if r.name == name]
    return found


class Api:
    """A queue client over the ASGI app; signs with `creds` unless told otherwise."""

    def __init__(self, client: httpx.AsyncClient, services: Services, clock: FakeClock) -> None:
        self.client = client
        self.services = services
        self.clock = clock

    @property
    def queue(self) -> Queue:
        return self.services.queue

    async def call(
        self,
        method: str,
        path: str,
        body: Any = _DEFAULT,
        *,
        raw: bytes | None = None,
        creds: Credentials | None = ROOT,
        query: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        headers: Mapping[str, str] | None = None,
        timestamp: int | None = None,
        prefix: str = PREFIX,
    ) -> httpx.Response:
        """`path` is below `prefix` (the queue's) and percent-encoded; `body` is JSON, `raw` is bytes."""
        if raw is None:
            raw = b"" if body is _DEFAULT else tc_utils.dumpJson(body).encode()
        url = BASE + prefix + path + ("?" + urlencode(query) if query else "")
        sent = dict(headers or {})
        if raw:
            sent.setdefault("content-type", "application/json")
        if creds is not None:
            sent["authorization"] = hawk_header(method, url, raw, creds, timestamp=timestamp)
        return await self.client.request(method, url, content=raw, headers=sent)

    async def create_task(self, task_id: str | None = None, **overrides: Any) -> tuple[str, dict[str, Any]]:
        task_id = task_id or slugid.nice()
        response = await self.call("PUT", f"/task/{task_id}", task_definition(self.clock, **overrides))
        assert response.status_code == 200, response.text
        return task_id, response.json()

    async def task_exists(self, task_id: str) -> bool:
        response = await self.call("GET", f"/task/{encode_segment(task_id)}/status")
        assert response.status_code in (200, 400, 404), response.text
        return response.status_code == 200


def task_definition(clock: FakeClock, **overrides: Any) -> dict[str, Any]:
    """A minimal valid createTask body, dated by the queue's clock."""
    body: dict[str, Any] = {
        "taskQueueId": TASK_QUEUE_ID,
        "created": dates.to_iso(clock()),
        "deadline": dates.to_iso(clock() + dates.HOUR),
        "payload": {},
        "metadata": {
            "name": "api test",
            "description": "a task made by tests/api",
            "owner": "tests@example.com",
            "source": "https://example.com/tests/api",
        },
    }
    body.update(overrides)
    return body


def valid_body(route_name: str, now: int) -> Any:
    """A body that passes the route's schema (None for routes without one)."""
    bodies: dict[str, Any] = {
        "createTask": {
            "taskQueueId": GOOD_PARAMS["taskQueueId"],
            "created": dates.to_iso(now),
            "deadline": dates.to_iso(now + dates.HOUR),
            "payload": {},
            "metadata": {"name": "n", "description": "d", "owner": "o@example.com", "source": "https://x"},
        },
        "tasks": {"taskIds": [GOOD_PARAMS["taskId"]]},
        "statuses": {"taskIds": [GOOD_PARAMS["taskId"]]},
        "changeTaskPriority": {"newPriority": "high"},
        "changeTaskGroupPriority": {"newPriority": "high"},
        "claimWork": {"workerGroup": "wg", "workerId": "wid", "tasks": 1},
        "claimTask": {"workerGroup": "wg", "workerId": "wid"},
        "reportException": {"reason": "worker-shutdown"},
        "createArtifact": {
            "storageType": "reference",
            "expires": dates.to_iso(now + dates.HOUR),
            "url": "https://example.com/artifact",
            "contentType": "text/plain",
        },
        "finishArtifact": {"uploadId": GOOD_PARAMS["taskId"]},
        "appendLiveLog": {"offset": 0, "data": "a line of log\n"},
        "quarantineWorker": {"quarantineUntil": dates.to_iso(now + dates.HOUR)},
        "declareWorker": {"expires": dates.to_iso(now + dates.DAY)},
    }
    return bodies.get(route_name)


def assert_error(
    response: httpx.Response, status: int, code: str, *, names: Sequence[str] = ()
) -> dict[str, Any]:
    """A TaskCluster error answer: status, JSON `{code, message, requestInfo}`, message naming `names`."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert isinstance(body, dict) and set(body) >= ERROR_KEYS, body
    assert body["code"] == code, body
    assert isinstance(body["message"], str), body
    assert isinstance(body["requestInfo"], dict), body
    assert set(body["requestInfo"]) >= REQUEST_INFO_KEYS, body
    for name in names:
        assert name in body["message"], (name, body["message"])
    return body


def call_cost(tally: Tally) -> tuple[int, int]:
    """What a counted call cost, (statements, round trips), less auth's re-read of its generation
    counter: that runs in whichever call comes once a few seconds have passed since the last, so
    on a slow machine any call may meet it, and it is not that call's cost."""
    recheck = tally.trips.count("get_auth_generation")
    return tally.statements - recheck, tally.round_trips - recheck


def is_json_error(response: httpx.Response) -> bool:
    """Whether a 4xx answer carries TaskCluster's error body."""
    try:
        body = response.json()
    except ValueError:
        return False
    return (
        isinstance(body, dict)
        and set(body) >= ERROR_KEYS
        and isinstance(body["code"], str)
        and isinstance(body["requestInfo"], dict)
    )


@pytest.fixture
def live_log_urls() -> livelogs.StreamUrls:
    """The API's queue streams live logs under BASE, as `taskyard serve` does under its root URL."""
    return livelogs.StreamUrls(BASE, SECRET_KEY)


@pytest.fixture
def services(queue: Queue, auth: Auth, secrets: Secrets) -> Services:
    return Services(queue=queue, auth=auth, scheduler=Scheduler(queue, expand=auth.expand), secrets=secrets)


@pytest.fixture
async def api(services: Services, clock: FakeClock) -> AsyncIterator[Api]:
    transport = httpx.ASGITransport(app=build_app(services), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield Api(client, services, clock)


@dataclass
class Served:
    """A real server on a free port, its feed, and the relay the tests drive."""

    url: str
    feed: EventFeed
    relay: OutboxRelay
    storage: Storage
    clock: FakeClock
    app: App

    async def publish(self) -> None:
        """Relay every committed event, and let the feed hand them to the streams."""
        while await self.relay.relay_once():
            pass
        await self.feed.catch_up()

    def stream_url(self, *bindings: str, **query: str) -> str:
        params = [("binding", b) for b in bindings] + list(query.items())
        return f"{self.url}/api/events/v1/stream?{urlencode(params)}"


@pytest.fixture
async def served(
    queue: Queue, auth: Auth, secrets: Secrets, storage: Storage, clock: FakeClock
) -> AsyncIterator[Served]:
    feed = EventFeed(storage, Profiles(root_url="http://example.invalid"), buffer=20, poll_seconds=60.0)
    await feed.start()
    bus = MemoryBus()
    relay = OutboxRelay(storage, bus, clock=clock)
    services = Services(queue, auth, Scheduler(queue, expand=auth.expand), secrets, events=feed)
    app = build_app(services, Pages(services))  # with the web UI, as `taskyard serve` builds it
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    await until(lambda: server.started)
    yield Served(f"http://127.0.0.1:{port}", feed, relay, storage, clock, app)
    feed.end_streams()
    server.should_exit = True
    await serving
    await feed.close()
    await bus.close()
    sock.close()
