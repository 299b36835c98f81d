"""The API while PostgreSQL is down or restarting: 503 with Retry-After, never a 500.

These run on a private cluster (the shared test server is never stopped): `db_url` is overridden
so that the `api` fixture's storage lives there.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import pytest

from taskyard.model import slugid
from taskyard.queue import livelogs
from tests.api.conftest import AUTH_PREFIX, TASK_QUEUE_ID, Api, assert_error, task_definition
from tests.api.helpers import append, running_task
from tests.conftest import until
from tests.pgcluster import PgCluster

pytestmark = pytest.mark.postgres
WORKER = {"workerGroup": "wg", "workerId": "w1", "tasks": 1}


@pytest.fixture
def db_url(pg_cluster: PgCluster) -> str:
    return pg_cluster.url()


def assert_unavailable(response: httpx.Response) -> None:
    assert_error(response, 503, "ServiceUnavailable")
    assert response.headers.get("retry-after", "").isdigit(), response.headers
    assert 1 <= int(response.headers["retry-after"]) <= 10


async def test_a_stopped_database_answers_503_with_retry_after(api: Api, pg_cluster: PgCluster) -> None:
    task_id, _ = await api.create_task()
    log_url = livelogs.stream_url(api.queue, task_id, 0, api.clock() + 60_000)
    await asyncio.to_thread(pg_cluster.stop)

    assert_unavailable(await api.call("GET", f"/task/{task_id}/status"))  # a read
    assert_unavailable(await api.call("PUT", f"/task/{slugid.nice()}", task_definition(api.clock)))  # a write
    assert_unavailable(await api.call("POST", f"/task/{task_id}/cancel"))  # a transition
    assert_unavailable(await api.call("POST", f"/claim-work/{TASK_QUEUE_ID}", WORKER))
    assert_unavailable(await api.call("GET", "/clients/", prefix=AUTH_PREFIX))
    assert_unavailable(await api.client.get(log_url))  # the live-log stream renders its own errors

    await asyncio.to_thread(pg_cluster.start)
    for _ in range(100):  # back as soon as the pool has reconnected
        response = await api.call("GET", f"/task/{task_id}/status")
        if response.status_code == 200:
            break
        assert_unavailable(response)
        await asyncio.sleep(0.05)
    assert response.status_code == 200, response.text


@pytest.mark.slow
async def test_requests_during_a_restart_answer_200_or_503_never_500(api: Api, pg_cluster: PgCluster) -> None:
    task_id, _ = await api.create_task()
    statuses: Counter[int] = Counter()
    restarted = asyncio.Event()

    async def client(call: Any) -> None:
        settled = 0  # requests answered 200 since the restart ended
        while settled < 3:
            response = await call()
            statuses[response.status_code] += 1
            if response.status_code == 200:
                settled += restarted.is_set()
            else:
                assert_unavailable(response)
                await asyncio.sleep(0.01)

    calls = [
        lambda: api.call("GET", f"/task/{task_id}/status"),
        lambda: api.call("PUT", f"/task/{slugid.nice()}", task_definition(api.clock)),
        lambda: api.call("POST", f"/claim-work/{TASK_QUEUE_ID}", WORKER),
        lambda: api.call("GET", "/clients/", prefix=AUTH_PREFIX),
    ]
    clients = [asyncio.create_task(client(call)) for call in calls for _ in range(2)]
    try:
        await asyncio.sleep(0.2)  # under load before the restart begins
        for mode in ("fast", "immediate"):  # clients told (57P01), or just cut off
            await asyncio.to_thread(pg_cluster.restart, mode)
        restarted.set()
        await asyncio.wait_for(asyncio.gather(*clients), 60)
    finally:
        for task in clients:
            task.cancel()
    assert set(statuses) == {200, 503}, statuses  # the restarts were seen, and never as a 500


@pytest.mark.slow
async def test_a_live_log_follower_waits_the_database_out(
    api: Api, pg_cluster: PgCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its answer has begun (200): it can't turn into a 503, so it goes on once the database is back."""
    monkeypatch.setattr(livelogs, "RECHECK_SECONDS", 0.02)
    task_id, creds = await running_task(api)
    url = (await append(api, task_id, creds, {"offset": 0, "data": "one\n"})).json()["url"]
    reading = asyncio.create_task(api.client.get(url))
    await until(lambda: api.queue.live_log_followers.watching(f"{task_id}/0") == 1)
    await asyncio.to_thread(pg_cluster.stop)
    await asyncio.sleep(0.2)  # the follower looks again every 20 ms, and finds the database gone
    assert not reading.done()
    await asyncio.to_thread(pg_cluster.start)
    for _ in range(100):
        response = await append(api, task_id, creds, {"offset": 4, "data": "two\n", "final": True})
        if response.status_code == 200:
            break
        assert_unavailable(response)
        await asyncio.sleep(0.05)
    response = await asyncio.wait_for(reading, 30)
    assert (response.status_code, response.text) == (200, "one\ntwo\n")
