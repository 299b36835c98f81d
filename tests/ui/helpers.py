"""Helpers the web UI's tests share: pages fetched, tasks made, claimed and resolved, refusals read."""

from __future__ import annotations

import gzip
import html
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from taskyard.artifacts.local import LocalStore
from taskyard.model import dates, slugid
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims, tasks
from taskyard.storage.counting import counting
from tests.api.conftest import TASK_QUEUE_ID, Api, Credentials, call_cost, task_definition
from tests.conftest import SECRET_KEY, FakeClock

OTHER_QUEUE = "ui-prov/other-queue"
WORKER = ("wg-1", "worker-7")
SECRET = "s3cret-in-the-payload"


async def get(api: Api, path: str) -> httpx.Response:
    return await api.client.get(path, headers={"accept": "text/html"})


async def claim(api: Api, task_queue_id: str = TASK_QUEUE_ID, worker: str = "w1", count: int = 1) -> Any:
    body = {"workerGroup": "wg", "workerId": worker, "tasks": count}
    answer = await api.call("POST", f"/claim-work/{task_queue_id}", body)
    assert answer.status_code == 200, answer.text
    return answer.json()["tasks"]


async def statements_of(api: Api, path: str) -> tuple[int, httpx.Response]:
    """The SQL statements a page runs: this request's alone (background loops are not counted),
    as `call_cost` counts them."""
    with counting() as tally:
        answer = await get(api, path)
    assert answer.status_code == 200, answer.text
    return call_cost(tally)[0], answer


async def create_many(api: Api, count: int, **overrides: Any) -> None:
    """`count` tasks in one transaction (as createTask makes them, without a request each)."""
    items = [
        (task_id, tasks.define(api.queue, task_id, task_definition(api.clock, **overrides)))
        for task_id in (slugid.nice() for _ in range(count))
    ]
    async with api.queue.storage.transaction() as tx:
        await tasks.create_tasks_tx(api.queue, tx, items)


async def make_group(api: Api, names: list[str], **overrides: Any) -> tuple[str, list[str]]:
    group = slugid.nice()
    made = []
    for name in names:
        metadata = {"name": name, "description": "d", "owner": "o@example.com", "source": "https://x"}
        task_id, _ = await api.create_task(taskGroupId=group, metadata=metadata, **overrides)
        made.append(task_id)
    return group, made


async def resolve(api: Api, task_id: str, state: str, took: float = 0) -> None:
    """Claim the task's run 0 for WORKER and resolve it `state`, `took` seconds later."""
    await claims.claim_task(api.queue, task_id, 0, WORKER, guard=ALLOW_ALL)
    api.clock.advance(took)
    reason = "worker-shutdown" if state == "exception" else state
    await claims.report(api.queue, task_id, 0, state, reason)  # type: ignore[arg-type]


def assert_refused(answer: httpx.Response, status: int, *scopes: str) -> None:
    assert answer.status_code == status, answer.text
    assert SECRET not in answer.text
    for scope in scopes:
        assert html.escape(scope) in answer.text, scope


QUEUE = TASK_QUEUE_ID.replace("/", "%2F")
LIVE = "public/logs/live.log"
BACKING = "public/logs/live_backing.log"


def blob_store(tmp_path: Path, clock: FakeClock) -> LocalStore:
    """A blob store for s3 artifacts (the `blobs` fixture of the modules that upload)."""
    return LocalStore(
        str(tmp_path / "blobs"), "http://testserver", SECRET_KEY, max_bytes=64 << 20, clock=clock
    )


async def claimed(api: Api, **overrides: Any) -> tuple[str, Credentials]:
    task_id, _ = await api.create_task(**overrides)
    answer = await api.call("POST", f"/claim-work/{QUEUE}", {"workerGroup": "wg", "workerId": "w1"})
    (claim,) = answer.json()["tasks"]
    return task_id, Credentials.from_response(claim["credentials"])


async def artifact(
    api: Api, task_id: str, name: str, body: dict[str, Any], creds: Credentials
) -> httpx.Response:
    body = {"expires": dates.to_iso(api.clock() + dates.HOUR), **body}
    answer = await api.call(
        "POST", f"/task/{task_id}/runs/0/artifacts/{quote(name, safe='')}", body, creds=creds
    )
    assert answer.status_code == 200, answer.text
    return answer


async def upload_log(api: Api, task_id: str, data: bytes, creds: Credentials) -> None:
    """As the worker ends a run: the backing log gzipped, then the live log a link to it."""
    created = await artifact(
        api,
        task_id,
        BACKING,
        {"storageType": "s3", "contentType": "text/plain", "contentEncoding": "gzip"},
        creds,
    )
    put = await api.client.put(
        created.json()["putUrl"],
        content=gzip.compress(data),
        headers={"content-type": "text/plain", "content-encoding": "gzip"},
    )
    assert put.status_code in (200, 201, 204), put.text
    await artifact(
        api, task_id, LIVE, {"storageType": "link", "artifact": BACKING, "contentType": "text/plain"}, creds
    )


async def complete(api: Api, task_id: str, creds: Credentials) -> None:
    done = await api.call("POST", f"/task/{task_id}/runs/0/completed", creds=creds)
    assert done.status_code == 200, done.text
