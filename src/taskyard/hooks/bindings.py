"""Bindings: a hook bound to exchanges and routing-key patterns fires on each matching event.

Every process keeps one consumer per hook with bindings (`reconcile`): on RabbitMQ
(`--events amqp://...`) a durable queue of the hook's own, bound to its (exchange, pattern)
pairs, whose messages the processes share, so an event fires the hook once and waits in the queue
while no process runs; in process, a subscription to the events this process relays. The queue's
name holds a digest of the bindings: a hook whose bindings change consumes a new queue, bound
exactly as it now says. Reconciliation runs at start, when this process changes a hook, when any
process announces a change (the hooks exchanges), and every `interval` as a safety net.

A message's body is the fire's payload: one the hook's triggerSchema refuses is dropped, as
TaskCluster drops it (with the default schema, any non-empty body).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging

import orjson

from taskyard.events.port import BadPattern, Envelope, check_pattern
from taskyard.events.profiles import TC_HOOKS_PREFIX
from taskyard.hooks import definitions, firing
from taskyard.hooks.service import Hooks
from taskyard.model.errors import Unavailable
from taskyard.model.messages import HOOK_EXCHANGES

log = logging.getLogger(__name__)
RECONCILE_INTERVAL = 5.0


def queue_name(group: str, hook: str, bindings: tuple[tuple[str, str], ...]) -> str:
    digest = hashlib.sha256(orjson.dumps([group, hook, bindings])).hexdigest()[:16]
    return f"hooks/{group}/{hook}"[:200] + f"/{digest}"


async def reconcile(h: Hooks) -> None:
    """Consume exactly the bindings the stored hooks have now."""
    if h.bus is None:
        return
    async with h.storage.reader() as session:
        rows = await session.fetch("hooks_with_bindings")
    wanted: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}
    for row in rows:
        stored = definitions.stored_of(row)
        pairs = tuple((b["exchange"], b["routingKeyPattern"]) for b in stored["definition"]["bindings"])
        wanted[(row["hook_group_id"], row["hook_id"])] = pairs
    for key, (pairs, stop) in list(h.consumers.items()):
        if wanted.get(key) != pairs:
            stop()
            del h.consumers[key]
    for key, pairs in wanted.items():
        if key not in h.consumers:
            _consume(h, key, pairs)


def _consume(h: Hooks, key: tuple[str, str], pairs: tuple[tuple[str, str], ...]) -> None:
    assert h.bus is not None
    group, hook = key

    async def handle(envelope: Envelope) -> None:
        await firing.fire_message(h, group, hook, envelope.body)

    usable = []
    for exchange, pattern in pairs:
        try:
            usable.append((exchange, check_pattern(pattern)))
        except BadPattern as exc:
            log.warning("hook %s/%s: binding to %s skipped: %s", group, hook, exchange, exc.message)
    stop = h.bus.consume(queue_name(group, hook, pairs), usable, handle) if usable else _nothing
    h.consumers[key] = (pairs, stop)
    log.info("hook %s/%s consumes %d binding(s)", group, hook, len(usable))


def _nothing() -> None:
    pass


def stop_all(h: Hooks) -> None:
    for _, stop in h.consumers.values():
        stop()
    h.consumers.clear()


async def run_forever(h: Hooks, interval: float = RECONCILE_INTERVAL) -> None:
    """Reconcile until cancelled: at start, on any hook's change, and every `interval`."""
    unsubscribes = []
    if h.bus is not None:
        for exchange in HOOK_EXCHANGES:
            unsubscribes.append(
                h.bus.subscribe(TC_HOOKS_PREFIX + exchange, "#", lambda _: h.bindings_changed.set())
            )
    try:
        while True:
            h.bindings_changed.clear()
            try:
                await reconcile(h)
            except Unavailable as exc:
                log.warning("hook bindings: %s; trying again", exc)
            except Exception:
                log.exception("hook bindings: reconciling failed; trying again")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await h.bindings_changed.wait()
    finally:
        for unsubscribe in unsubscribes:
            unsubscribe()
        stop_all(h)
