"""The scheduler's shared machinery: the `Scheduler` object and its wake-ups."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from taskyard.model import task_graph
from taskyard.model.types import LooseJSON
from taskyard.queue.service import Queue
from taskyard.storage.port import Row

DEFAULT_SCHEDULER_ID = "task-graph-scheduler"
Expand = Callable[[Iterable[str]], Awaitable[list[str]]]


class Scheduler:
    """Everything the scheduler's operations share: the queue (its storage, clock and events),
    the scheduler's id, how to role-expand a graph's scopes (`expand`), how often to sweep for
    resolutions no event told of, and the deployment's root URL (the URLs of an inspected task's
    resolution start with it; "" makes them paths).
    """

    def __init__(
        self,
        queue: Queue,
        *,
        expand: Expand,
        scheduler_id: str = DEFAULT_SCHEDULER_ID,
        sweep_interval: float = 5.0,
        root_url: str = "",
    ) -> None:
        self.queue = queue
        self.storage = queue.storage
        self.clock = queue.clock
        self.expand = expand
        self.scheduler_id = scheduler_id
        self.sweep_interval = sweep_interval
        self.root_url = root_url.rstrip("/")


def status_of(row: Row) -> LooseJSON:
    """A graph row's status structure."""
    return task_graph.status(row["task_graph_id"], row["scheduler_id"], row["state"], row["routing"])
