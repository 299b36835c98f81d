"""Event profiles: how one stored event becomes the messages a bus sends.

The outbox keeps each event as the queue made it (`Message`: a short exchange name such as
`task-pending`, TaskCluster's routing key, CCs and body). A profile maps one such event to zero
or more `Envelope`s, each with its full exchange name, routing key, CCs and body, at publish
time. Both buses map through `Profiles.map`, so what an in-process subscriber sees is what
RabbitMQ receives.

`tc`: TaskCluster's queue exchanges, unchanged: `exchange/taskcluster-queue/v1/<name>` for every
exchange the queue has, its routing keys, bodies and `route.<r>` CCs.

`seed`: four exchanges, `v1/queue:task-pending`, `-running`, `-completed` and `-failed`, with
routing keys `<taskId>.<runId>.<workerGroup>.<workerId>.<provisionerId>.<workerType>.<routing>`
(`_` for what a message lacks: task-pending's run id and worker, the worker of a task-failed that
no worker ran) and bodies `{"version": "0.2.0", "status": ...}` plus, by
exchange, `run_id`, `worker_group`, `worker_id`, `logs` (the run's live log URL) and `result`
(the URL of the run's artifact list). `<routing>` is `<schedulerId>.<taskGroupId>`, then the
words of the task's `taskyard:routing` tag, if it has one: a scheduler that tags its tasks
`{"taskyard:routing": "graph-7.build"}` can bind `*.*.*.*.*.*.<schedulerId>.<taskGroupId>.graph-7.#`.
task-failed carries failed runs and every exception that leaves the task resolved for good
(canceled, deadline-exceeded, an error the queue does not retry, retries used up); an exception
the queue retries says nothing there, as the new run's task-pending announces the retry.

The task-graph scheduler's events (`task-graph-*`) go to `exchange/taskcluster-scheduler/v1/<name>`
unchanged in `tc`, and in `seed` to `v1/scheduler:<name>` (running, blocked, finished) with the
status structure as body and the key `_._._._._._.<schedulerId>.<taskGraphId>.<graph routing>`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from taskyard.events.port import Envelope
from taskyard.model.errors import ConfigError
from taskyard.model.messages import (
    EXCHANGES,
    HOOK_EXCHANGES,
    SCHEDULER_EXCHANGES,
    WORKER_MANAGER_EXCHANGES,
    Message,
)
from taskyard.model.runs import MAX_RUNS, RETRY_REASONS
from taskyard.model.types import LooseJSON

log = logging.getLogger(__name__)

PROFILES = ("tc", "seed")
TC_PREFIX = "exchange/taskcluster-queue/v1/"
SEED_PREFIX = "v1/queue:"
TC_SCHEDULER_PREFIX = "exchange/taskcluster-scheduler/v1/"
TC_HOOKS_PREFIX = "exchange/taskcluster-hooks/v1/"
TC_WORKER_MANAGER_PREFIX = "exchange/taskcluster-worker-manager/v1/"
# The notify service's one exchange (pulse notifications), stored as `notification`.
NOTIFY_EXCHANGE = "notification"
TC_NOTIFY_EXCHANGE = "exchange/taskcluster-notify/v1/notification"
SEED_SCHEDULER_PREFIX = "v1/scheduler:"
# The scheduler's seed exchanges: it has no `task-graph-extended` there.
SEED_SCHEDULER_EXCHANGES = ("task-graph-running", "task-graph-blocked", "task-graph-finished")
SEED_VERSION = "0.2.0"
# A task tag whose value (dot-separated words) extends the task's seed routing key.
ROUTING_TAG = "taskyard:routing"
# The longest routing key AMQP can carry, in bytes.
MAX_KEY_BYTES = 255

# The short exchange a seed message goes to, by the stored event's exchange.
_SEED_TARGETS = {
    "task-pending": "task-pending",
    "task-running": "task-running",
    "task-completed": "task-completed",
    "task-failed": "task-failed",
    "task-exception": "task-failed",
}
# Which optional body fields each seed exchange carries.
_SEED_FIELDS = {
    "task-pending": (),
    "task-running": ("run_id", "worker", "logs"),
    "task-completed": ("run_id", "worker", "logs", "result"),
    "task-failed": ("run_id", "worker"),
}


def parse_profiles(text: str, option: str = "event-profiles") -> tuple[str, ...]:
    """`tc,seed` -> ("tc", "seed"); a ConfigError naming `option` for anything else."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in PROFILES]
    if unknown or not names:
        raise ConfigError(option, text, f"must be a comma-separated list of {', '.join(PROFILES)}")
    return names


class Profiles:
    """The profiles a deployment publishes; `root_url` builds the seed bodies' URLs."""

    def __init__(self, names: Sequence[str] = PROFILES, *, root_url: str = "") -> None:
        self.names = parse_profiles(",".join(names))
        self._root_url = root_url.rstrip("/")
        self._mappers: list[tuple[str, Callable[[Message], list[Envelope]]]] = []
        if "tc" in self.names:
            self._mappers.append(("tc", _tc))
        if "seed" in self.names:
            self._mappers.append(("seed", self._seed))

    def exchanges(self) -> list[str]:
        """Every exchange these profiles publish to (full names)."""
        names: list[str] = []
        if "tc" in self.names:
            names += [TC_PREFIX + e for e in EXCHANGES]
            names += [TC_SCHEDULER_PREFIX + e for e in SCHEDULER_EXCHANGES]
            names += [TC_HOOKS_PREFIX + e for e in HOOK_EXCHANGES]
            names += [TC_WORKER_MANAGER_PREFIX + e for e in WORKER_MANAGER_EXCHANGES]
            names.append(TC_NOTIFY_EXCHANGE)
        if "seed" in self.names:
            names += [SEED_PREFIX + e for e in _SEED_FIELDS]
            names += [SEED_SCHEDULER_PREFIX + e for e in SEED_SCHEDULER_EXCHANGES]
        return names

    def map(self, message: Message) -> list[Envelope]:
        """The envelopes every profile makes of `message`, profile by profile.

        A profile that cannot map a message logs why and skips it: one odd event must not stop
        every later one behind it in the outbox.
        """
        envelopes: list[Envelope] = []
        for name, mapper in self._mappers:
            try:
                envelopes += mapper(message)
            except Exception:
                key = message.routing_key
                log.exception("profile %s cannot map %s %s; skipped", name, message.exchange, key)
        return envelopes

    def map_all(self, messages: Iterable[Message]) -> list[Envelope]:
        return [envelope for message in messages for envelope in self.map(message)]

    def _seed(self, message: Message) -> list[Envelope]:
        if message.exchange in SCHEDULER_EXCHANGES:
            return _seed_graph(message)
        target = _SEED_TARGETS.get(message.exchange)
        if target is None or (message.exchange == "task-exception" and not final_exception(message.body)):
            return []
        source = message.body
        status = source["status"]
        run_id = source.get("runId")
        worker = (source["workerGroup"], source["workerId"]) if "workerGroup" in source else None
        body: LooseJSON = {"version": SEED_VERSION, "status": status}
        fields = _SEED_FIELDS[target]
        if "run_id" in fields and run_id is not None:
            body["run_id"] = run_id
        if "worker" in fields and worker is not None:
            body["worker_group"], body["worker_id"] = worker
        run_url = f"{self._root_url}/api/queue/v1/task/{status['taskId']}/runs/{run_id}/artifacts"
        if "logs" in fields:
            body["logs"] = f"{run_url}/public/logs/live.log"
        if "result" in fields:
            body["result"] = run_url
        # task-pending's key has `_` for the run id, as the exchange document's own example says
        # ("for example run_id for a task_pending message"); the body's status names the run.
        key_run = None if target == "task-pending" else run_id
        key = seed_routing_key(status, key_run, worker, source.get("task", {}).get("tags", {}))
        return [Envelope(SEED_PREFIX + target, key, body)]


def _tc(message: Message) -> list[Envelope]:
    if message.exchange == NOTIFY_EXCHANGE:
        return [Envelope(TC_NOTIFY_EXCHANGE, message.routing_key, message.body, list(message.cc))]
    prefix = TC_SCHEDULER_PREFIX if message.exchange in SCHEDULER_EXCHANGES else TC_PREFIX
    if message.exchange in HOOK_EXCHANGES:
        prefix = TC_HOOKS_PREFIX
    elif message.exchange in WORKER_MANAGER_EXCHANGES:
        prefix = TC_WORKER_MANAGER_PREFIX
    return [Envelope(prefix + message.exchange, message.routing_key, message.body, list(message.cc))]


def _seed_graph(message: Message) -> list[Envelope]:
    """A task graph's event in the seed profile (docs/scheduler.md, Events): the status structure
    (and the blocking taskId) on `v1/scheduler:<name>`, keyed
    `_._._._._._.<schedulerId>.<taskGraphId>.<graph routing>`."""
    if message.exchange not in SEED_SCHEDULER_EXCHANGES:
        return []
    status = message.body["status"]
    body: LooseJSON = dict(status)
    if "taskId" in message.body:
        body["taskId"] = message.body["taskId"]
    routing = str(status.get("routing") or "_")
    key = f"_._._._._._.{status['schedulerId']}.{status['taskGraphId']}.{routing}"
    return [Envelope(SEED_SCHEDULER_PREFIX + message.exchange, key, body)]


def seed_routing_key(
    status: LooseJSON, run_id: int | None, worker: tuple[str, str] | None, tags: LooseJSON
) -> str:
    """`<taskId>.<runId>.<workerGroup>.<workerId>.<provisionerId>.<workerType>.<schedulerId>.<taskGroupId>[.<words>]`

    The words of the `taskyard:routing` tag are left out (with a warning) if they would make the
    key longer than AMQP allows; the scheduler's own part of the key always stays.
    """
    worker_group, worker_id = worker if worker else ("_", "_")
    parts = [
        status["taskId"],
        "_" if run_id is None else str(run_id),
        worker_group,
        worker_id,
        status["provisionerId"],
        status["workerType"],
        status["schedulerId"],
        status["taskGroupId"],
    ]
    key = ".".join(parts)
    words = str(tags.get(ROUTING_TAG, "")).strip(".")
    if not words:
        return key
    longer = f"{key}.{words}"
    if len(longer.encode()) > MAX_KEY_BYTES:
        log.warning("task %s: its %s tag makes a routing key too long; left out", parts[0], ROUTING_TAG)
        return key
    return longer


def final_exception(body: LooseJSON) -> bool:
    """Whether a task-exception leaves its task resolved for good: no new run retries it."""
    status = body["status"]
    runs = status["runs"]
    run_id = int(body.get("runId", len(runs) - 1))
    if run_id < len(runs) - 1:
        return False  # a later run exists: the queue retried this one
    reason = runs[run_id].get("reasonResolved")
    retried = reason in RETRY_REASONS and int(status["retriesLeft"]) > 0 and len(runs) < MAX_RUNS
    return not retried
