"""`GET /metrics`: the deployment's state and this process's counters, in Prometheus' text format.

Each app has a registry of its own (never prometheus_client's global one), holding:

- the gauges read from the database, the same in every process serving it: per task queue its
  pending runs, running tasks and oldest pending run's age (the `MAX_QUEUES` queues with the most
  pending, and with the most claimed, are reported), and the outbox's depth and relay lag. One
  grouped query each, run at most once per `CACHE_SECONDS` however often Prometheus scrapes;
- the counters of this process since it started: claims per task queue, resolutions by state and
  reason, rows the background jobs set aside, and request latency per route template, method
  and status class (`2xx`...). With `serve --processes N` each process answers its own: sum
  them in the query (`sum by (route) (rate(...))`);
- live-log followers connected to this process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as StarletteRoute

from taskyard.events.feed import EventFeed
from taskyard.model import dates
from taskyard.queue import service
from taskyard.queue.service import Queue

MAX_QUEUES = 500  # task queues reported per gauge: the ones with the most pending (or claimed)
MAX_OUTBOX_COUNTED = 1_000_000  # the outbox's depth is counted up to this
CACHE_SECONDS = 2.0
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_COUNTERS = {
    service.CLAIMS_METRIC: "Tasks claimed through this process, per task queue.",
    service.RESOLUTIONS_METRIC: "Runs resolved through this process, by state and reason.",
    service.SET_ASIDE_METRIC: "Rows a background job failed on and set aside for a while.",
}


@dataclass
class Snapshot:
    """What the database said at `taken` (monotonic seconds)."""

    taken: float
    now_ms: int
    pending: list[tuple[str, int, int]] = field(default_factory=list)  # queue, count, oldest (ms)
    claimed: list[tuple[str, int]] = field(default_factory=list)
    outbox_depth: int = 0
    outbox_oldest: int | None = None


async def read_snapshot(queue: Queue, taken: float) -> Snapshot:
    """The database's side of the metrics: three bounded queries in one read-only session."""
    async with queue.storage.reader() as session:
        pending = await session.fetch("metrics_pending", MAX_QUEUES)
        claimed = await session.fetch("metrics_claimed", MAX_QUEUES)
        outbox = await session.fetchrow("metrics_outbox", MAX_OUTBOX_COUNTED)
    return Snapshot(
        taken=taken,
        now_ms=queue.clock(),
        pending=[(r["task_queue_id"], int(r["pending"]), int(r["oldest"])) for r in pending],
        claimed=[(r["task_queue_id"], int(r["claimed"])) for r in claimed],
        outbox_depth=int(outbox["depth"]) if outbox else 0,
        outbox_oldest=None if outbox is None or outbox["oldest"] is None else int(outbox["oldest"]),
    )


class QueueCollector(Collector):
    """Turns a snapshot and the queue's counters into metric families at each scrape."""

    def __init__(self, queue: Queue, feed: EventFeed | None = None) -> None:
        self.queue = queue
        self.feed = feed
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterator[Metric]:
        if self.snapshot is not None:
            yield from _gauges(self.snapshot)
        yield from _counters(self.queue)
        followers = GaugeMetricFamily(
            "taskyard_live_log_followers", "Live-log streams this process is serving."
        )
        followers.add_metric([], self.queue.live_log_followers.count())
        yield followers
        if self.feed is not None:
            streams = GaugeMetricFamily(
                "taskyard_event_stream_subscribers",
                "Event streams (GET /api/events/v1/stream) this process serves.",
            )
            streams.add_metric([], self.feed.followers)
            dropped = CounterMetricFamily(
                "taskyard_event_stream_dropped", "Event streams dropped for not reading, since the start."
            )
            dropped.add_metric([], self.feed.dropped)
            yield from (streams, dropped)


def _gauges(snap: Snapshot) -> Iterator[Metric]:
    pending = GaugeMetricFamily(
        "taskyard_pending_tasks", "Pending runs per task queue.", labels=["task_queue_id"]
    )
    oldest = GaugeMetricFamily(
        "taskyard_oldest_pending_age_seconds",
        "Age of the oldest pending run per task queue.",
        labels=["task_queue_id"],
    )
    for queue_id, count, since in snap.pending:
        pending.add_metric([queue_id], count)
        oldest.add_metric([queue_id], max(0, snap.now_ms - since) / dates.SECOND)
    claimed = GaugeMetricFamily(
        "taskyard_claimed_tasks", "Running tasks per task queue.", labels=["task_queue_id"]
    )
    for queue_id, count in snap.claimed:
        claimed.add_metric([queue_id], count)
    depth = GaugeMetricFamily("taskyard_outbox_depth", "Events written but not yet published.")
    depth.add_metric([], snap.outbox_depth)
    lag = GaugeMetricFamily(
        "taskyard_outbox_relay_lag_seconds", "Age of the oldest event not yet published (0: none)."
    )
    lag.add_metric(
        [], 0 if snap.outbox_oldest is None else max(0, snap.now_ms - snap.outbox_oldest) / dates.SECOND
    )
    yield from (pending, oldest, claimed, depth, lag)


def _counters(queue: Queue) -> Iterator[Metric]:
    families: dict[str, CounterMetricFamily] = {}
    for sample in queue.metrics.samples():
        family = families.get(sample.name)
        if family is None:
            help_text = _COUNTERS.get(sample.name, sample.name)
            family = CounterMetricFamily("taskyard_" + sample.name, help_text, labels=sorted(sample.labels))
            families[sample.name] = family
        family.add_metric([sample.labels[k] for k in sorted(sample.labels)], sample.value)
    yield from families.values()


class Metrics:
    """The app's registry, its request-latency histogram and the cached database snapshot."""

    def __init__(
        self, queue: Queue, *, feed: EventFeed | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = QueueCollector(queue, feed)
        self.registry.register(self.collector)
        self.latency = Histogram(
            "taskyard_request_duration_seconds",
            "Time to answer an API request, by route template, method and status class.",
            ["route", "method", "status"],
            registry=self.registry,
            buckets=LATENCY_BUCKETS,
        )
        self._clock = clock
        self._timed: dict[tuple[str, str, int], Histogram] = {}  # the latency's children, by labels

    def observe(self, template: str, method: str, status: int, seconds: float) -> None:
        """One request's time to its answer's end, in the latency histogram: labelled by the route's
        template (`/api/queue/v1/task/{taskId}`), never the raw path, so that the label set stays
        bounded (`unmatched` for requests no route took), its method and its status class."""
        key = (template, method, status // 100)
        child = self._timed.get(key)
        if child is None:
            child = self._timed[key] = self.latency.labels(template, method, f"{status // 100}xx")
        child.observe(seconds)

    async def render(self) -> bytes:
        """The text exposition; the database is asked again only when the snapshot is stale."""
        snap, now = self.collector.snapshot, self._clock()
        if snap is None or now - snap.taken >= CACHE_SECONDS:
            self.collector.snapshot = await read_snapshot(self.collector.queue, now)
        return generate_latest(self.registry)

    def routes(self) -> list[StarletteRoute]:
        async def metrics(request: Request) -> Response:
            return Response(await self.render(), media_type=CONTENT_TYPE_LATEST)

        return [StarletteRoute("/metrics", metrics, methods=["GET"])]
