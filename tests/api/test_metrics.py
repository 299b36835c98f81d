"""`GET /metrics`: the queue's gauges from the database, this process's counters, request latency."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from taskyard.api import metrics
from taskyard.api.app import Services, build_app
from tests.api.conftest import TASK_QUEUE_ID, Api

OTHER_QUEUE = "api-prov/other"
QUEUE = TASK_QUEUE_ID.replace("/", "%2F")


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of a Prometheus text exposition."""
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


async def scrape(api: Api) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = await api.client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return samples(response.text)


async def test_queue_gauges_and_counters(api: Api) -> None:
    for _ in range(3):
        await api.create_task()
    await api.create_task(taskQueueId=OTHER_QUEUE)
    worker = {"workerGroup": "wg", "workerId": "wid", "tasks": 2}
    api.clock.advance(90)
    claimed = await api.call("POST", f"/claim-work/{QUEUE}", worker)
    assert len(claimed.json()["tasks"]) == 2
    first = claimed.json()["tasks"][0]["status"]["taskId"]
    assert (await api.call("POST", f"/task/{first}/runs/0/completed")).status_code == 200

    found = await scrape(api)
    q = (("task_queue_id", TASK_QUEUE_ID),)
    other = (("task_queue_id", OTHER_QUEUE),)
    assert found[("taskyard_pending_tasks", q)] == 1
    assert found[("taskyard_pending_tasks", other)] == 1
    assert found[("taskyard_claimed_tasks", q)] == 1
    assert ("taskyard_claimed_tasks", other) not in found
    assert found[("taskyard_oldest_pending_age_seconds", other)] == 90
    assert found[("taskyard_claims_total", q)] == 2
    resolved = (("reason", "completed"), ("state", "completed"))
    assert found[("taskyard_resolutions_total", resolved)] == 1
    assert found[("taskyard_outbox_depth", ())] >= 0
    assert ("taskyard_outbox_relay_lag_seconds", ()) in found
    assert found[("taskyard_live_log_followers", ())] == 0


async def test_latency_is_labelled_by_route_template(api: Api) -> None:
    task_id, _ = await api.create_task()
    await api.call("GET", f"/task/{task_id}/status")
    await api.call("GET", "/task/nosuchtaskZZZZZZZZZZZZ/status")  # 404: a different status class
    await api.client.get("/no/such/route")
    found = await scrape(api)
    route = "/api/queue/v1/task/{taskId}/status"
    ok = (("method", "GET"), ("route", route), ("status", "2xx"))
    missing = (("method", "GET"), ("route", route), ("status", "4xx"))
    assert found[("taskyard_request_duration_seconds_count", ok)] == 1
    assert found[("taskyard_request_duration_seconds_count", missing)] == 1
    unmatched = (("method", "GET"), ("route", "unmatched"), ("status", "4xx"))
    assert found[("taskyard_request_duration_seconds_count", unmatched)] == 1
    assert not any(task_id in str(labels) for _, labels in found)


async def test_outbox_lag_is_the_oldest_unpublished_event(api: Api) -> None:
    """Nothing relays in these tests: the events wait in the outbox, aging with the clock."""
    await api.create_task()
    api.clock.advance(5)
    found = await scrape(api)
    assert found[("taskyard_outbox_depth", ())] == 2  # task-defined and task-pending
    assert found[("taskyard_outbox_relay_lag_seconds", ())] == 5


async def test_the_database_is_asked_at_most_once_per_cache_period(api: Api) -> None:
    now = [1000.0]
    measured = metrics.Metrics(api.queue, clock=lambda: now[0])
    await api.create_task()
    first = samples((await measured.render()).decode())
    await api.create_task()
    now[0] += metrics.CACHE_SECONDS / 2
    cached = samples((await measured.render()).decode())
    now[0] += metrics.CACHE_SECONDS
    fresh = samples((await measured.render()).decode())
    key = ("taskyard_pending_tasks", (("task_queue_id", TASK_QUEUE_ID),))
    assert (first[key], cached[key], fresh[key]) == (1, 1, 2)


async def test_each_app_has_its_own_registry(services: Services) -> None:
    """Two apps in one process (tests, `serve --processes` in one interpreter) don't collide."""
    one, two = build_app(services), build_app(services)
    assert one.state.metrics.registry is not two.state.metrics.registry


async def test_queues_reported_are_capped(api: Api) -> None:
    for i in range(3):
        await api.create_task(taskQueueId=f"api-prov/q{i}")
    await api.create_task(taskQueueId="api-prov/q0")
    snap = await _snapshot_capped(api, 2)
    assert [name for name, _, _ in snap.pending] == ["api-prov/q0", "api-prov/q1"]


async def _snapshot_capped(api: Api, cap: int) -> metrics.Snapshot:
    async with api.queue.storage.reader() as session:
        rows = await session.fetch("metrics_pending", cap)
    return metrics.Snapshot(0.0, 0, pending=[(r["task_queue_id"], int(r["pending"]), 0) for r in rows])
