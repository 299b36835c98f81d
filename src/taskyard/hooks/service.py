"""The hooks service's shared machinery: the `Hooks` object."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from taskyard.events.port import EventBus
from taskyard.model.owner_mail import OwnerMail, no_mail
from taskyard.queue.service import Queue
from taskyard.secrets.crypto import Sealer

SCHEDULER = "hooks-scheduler"  # the job's name, in logs and for `Storage.lead`
EXPIRY_SWEEPER = "hooks-last-fires-expiry"
Expand = Callable[[Iterable[str]], Awaitable[list[str]]]


class Hooks:
    """Everything the hooks operations share: the queue (its storage, clock and outbox), how to
    expand a hook's role (`expand`, the auth service's), the sealer that keeps trigger tokens
    encrypted at rest (the secrets service's: AES-256-GCM under the deployment's secret key), the
    event bus its bindings consume (None:
    bindings fire nothing, as in a test without a bus), and how often the scheduler looks for due
    fires. `changed` is set when this process changes a hook, which wakes the scheduler and the
    bindings' reconciliation at once.
    """

    def __init__(
        self,
        queue: Queue,
        *,
        expand: Expand,
        sealer: Sealer,
        bus: EventBus | None = None,
        tick: float = 0.5,
        mail: OwnerMail = no_mail,
    ) -> None:
        self.queue = queue
        self.storage = queue.storage
        self.clock = queue.clock
        self.expand = expand
        self.sealer = sealer
        self.bus = bus
        self.tick = tick
        self.mail = mail  # to a hook's owner when a fire no caller hears of fails (emailOnError)
        self.changed = asyncio.Event()
        self.bindings_changed = asyncio.Event()
        # The bindings consumed now, by hook: (its bindings, the function that stops consuming).
        self.consumers: dict[tuple[str, str], tuple[tuple[tuple[str, str], ...], Callable[[], None]]] = {}

    def hook_changed(self) -> None:
        self.changed.set()
        self.bindings_changed.set()
