"""The notify service's shared machinery: the `Notify` object."""

from __future__ import annotations

import asyncio
import collections

from taskyard.events import log as event_log
from taskyard.notify.mail import Smtp
from taskyard.queue.service import Queue

NOTIFIER = "notifier"  # the job's name, in logs and for `Storage.lead`
SENDER = "notify-sender"
RECENT = 1000  # send keys remembered per process, as TaskCluster's duplicate suppression
RATE_COUNT = 50  # emails per address per RATE_SECONDS, as TaskCluster's default
RATE_SECONDS = 600.0


class Notify:
    """Everything the notify operations share: the queue (storage, clock, the outbox relay's
    kick), the SMTP server (None: none configured, so no email is sent), the UI's base URL for
    links, and `published`, set when the relay logs a batch holding a task event with a notify
    route (in any process), which wakes the notifier (events/log.py, `concerns`). `recent` and
    `sent_at` are this process's duplicate suppression and rate limit."""

    def __init__(
        self,
        queue: Queue,
        smtp: Smtp | None,
        *,
        ui_url: str = "",
        poll_interval: float = 1.0,
        max_attempts: int = 20,
    ) -> None:
        self.queue = queue
        self.storage = queue.storage
        self.clock = queue.clock
        self.smtp = smtp
        self.ui_url = ui_url.rstrip("/")
        self.poll_interval = poll_interval
        self.max_attempts = max_attempts
        self.published = asyncio.Event()
        self.recorded = asyncio.Event()  # set when the notifier records notifications: the sender's wake-up
        self.recent: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.sent_at: dict[str, collections.deque[float]] = {}

    async def start(self) -> None:
        """Hear of the batches the relay logs, so that the notifier reads one it has events in at once."""
        await self.storage.listen(event_log.CHANNEL, self._heard)

    def _heard(self, payload: str | None) -> None:
        if event_log.concerns(payload, "notify"):  # else nothing for the notifier in the batch
            self.published.set()

    def seen(self, key: str) -> bool:
        """True if `key` was sent recently by this process; remembers it otherwise."""
        if key in self.recent:
            return True
        self.recent[key] = None
        while len(self.recent) > RECENT:
            self.recent.popitem(last=False)
        return False

    def over_rate(self, address: str) -> bool:
        """True when `address` had RATE_COUNT emails in the last RATE_SECONDS; counts this one otherwise."""
        now = self.clock() / 1000
        times = self.sent_at.setdefault(address, collections.deque())
        while times and times[0] <= now - RATE_SECONDS:
            times.popleft()
        if len(times) >= RATE_COUNT:
            return True
        times.append(now)
        return False
