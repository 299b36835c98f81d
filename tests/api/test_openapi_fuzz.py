"""schemathesis against each service's OpenAPI document: generated requests, signed as root, sent
to the app in-process on real storage. No answer may be a 5xx, and every answer must match the
schema its document gives (the answer's, or the error's).

hypothesis' tests are synchronous; the app runs on an event loop of its own in a thread (`Server`),
and each generated request is signed and sent there. Examples are bounded per operation and the
seed is fixed (`derandomize`), so a run is the same every time.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from taskyard.api import openapi
from taskyard.api.app import Services, build_app, service_tables
from taskyard.auth import static
from taskyard.auth.service import Auth
from taskyard.config import QueueConfig
from taskyard.queue import livelogs
from taskyard.queue.poll import PollKeys
from taskyard.queue.service import Queue
from taskyard.scheduler.service import Scheduler
from taskyard.secrets.service import Secrets
from taskyard.storage import open_storage
from tests.api.conftest import BASE, ROOT, hawk_header
from tests.conftest import QUEUE_ISSUER, ROOT_TOKEN, SECRET_KEY

T = TypeVar("T")
EXAMPLES = 30  # per operation and backend: about 2,000 requests per backend across both services


def load(service: str) -> schemathesis.BaseSchema:
    """The service's document as schemathesis reads it, without its coverage phase (which builds
    its boundary cases at collection, among them arrays of a thousand patterned strings: minutes)."""
    loaded = schemathesis.openapi.from_dict(openapi.document(service, service_tables()[service]))
    loaded.config.phases.update(phases=["examples", "fuzzing"])
    return loaded


SCHEMAS = {service: load(service) for service in service_tables()}
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


class Server:
    """The app on storage at `db_url`, served by an event loop in a thread of its own."""

    def __init__(self, db_url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client: httpx.AsyncClient = self.run(self._open(db_url))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _open(self, db_url: str) -> httpx.AsyncClient:
        self.storage = await open_storage(db_url)
        auth = Auth(self.storage, secret_key=SECRET_KEY, static_clients=static.static_clients(ROOT_TOKEN))
        await auth.start()
        # claimWork long-polls: a short wait keeps each of its examples quick.
        config = QueueConfig(claim_timeout=60, claim_work_timeout=0.01, resolver_interval=0.05)
        queue = Queue(
            self.storage,
            config,
            credentials_issuer=QUEUE_ISSUER,
            live_log_urls=livelogs.StreamUrls(BASE, SECRET_KEY),
            poll_keys=PollKeys(BASE, SECRET_KEY),
        )
        await queue.start()
        scheduler = Scheduler(queue, expand=auth.expand)
        secrets = Secrets(self.storage, secret_key=SECRET_KEY)
        app = build_app(Services(queue=queue, auth=auth, scheduler=scheduler, secrets=secrets))
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        return httpx.AsyncClient(transport=transport, base_url=BASE)

    def send(self, case: schemathesis.Case, service: str) -> httpx.Response:
        """`case` as a request, signed with the root credentials as TaskCluster's clients sign."""
        sent = case.as_transport_kwargs(base_url=f"{BASE}/api/{service}/v1")
        raw = json.dumps(sent["json"]).encode() if "json" in sent else sent.get("data") or b""
        headers = {k: v for k, v in sent.get("headers", {}).items() if k.lower() != "authorization"}
        request = self.client.build_request(
            sent["method"], sent["url"], params=sent.get("params"), content=raw, headers=headers
        )
        request.headers["authorization"] = hawk_header(request.method, str(request.url), raw, ROOT)
        return self.run(self.client.send(request))

    def close(self) -> None:
        async def stop() -> None:
            await self.client.aclose()
            await self.storage.close()

        self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


@pytest.fixture
def server(db_url: str) -> Iterator[Server]:
    running = Server(db_url)
    yield running
    running.close()


def check(case: schemathesis.Case, response: httpx.Response) -> None:
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])


@SCHEMAS["queue"].parametrize()
@FUZZ
def test_queue_api(case: schemathesis.Case, server: Server) -> None:
    check(case, server.send(case, "queue"))


@SCHEMAS["auth"].parametrize()
@FUZZ
def test_auth_api(case: schemathesis.Case, server: Server) -> None:
    check(case, server.send(case, "auth"))


@SCHEMAS["scheduler"].parametrize()
@FUZZ
def test_scheduler_api(case: schemathesis.Case, server: Server) -> None:
    check(case, server.send(case, "scheduler"))


@SCHEMAS["secrets"].parametrize()
@FUZZ
def test_secrets_api(case: schemathesis.Case, server: Server) -> None:
    check(case, server.send(case, "secrets"))


@SCHEMAS["hooks"].parametrize()
@FUZZ
def test_hooks_api(case: schemathesis.Case, server: Server) -> None:
    check(case, server.send(case, "hooks"))


@SCHEMAS["index"].parametrize()
@FUZZ
def test_index_api(case: schemathesis.Case, server: Server) -> None:
    check(case, server.send(case, "index"))


@SCHEMAS["notify"].parametrize()
@FUZZ
def test_notify_api(case: schemathesis.Case, server: Server) -> None:
    check(case, server.send(case, "notify"))


def test_every_service_is_fuzzed() -> None:
    """A service added to the route tables gets a test above, or this fails naming it."""
    fuzzed = {
        name.removeprefix("test_").removesuffix("_api").replace("_", "-")
        for name in globals()
        if name.endswith("_api")
    }
    assert set(SCHEMAS) <= fuzzed


@SCHEMAS["worker-manager"].parametrize()
@FUZZ
def test_worker_manager_api(case: schemathesis.Case, server: Server) -> None:
    check(case, server.send(case, "worker-manager"))
