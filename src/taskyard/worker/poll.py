"""`taskyard worker --protocol poll`: find work through pollTaskUrls and the poll queues instead of
claimWork, following the worker's round of docs/poll.md.

pollTaskUrls gives one queue per priority, highest first (asked again before its URLs expire).
One round polls them in that order with `numofmessages` up to the free capacity and stops at the
first queue that has messages; the worker's claim loop sleeps about a second after a round that
found none. Each message's task is claimed with claimTask, quoting the message (messageId, pop
receipt, signature). The message is deleted only once its run is settled: claimed, or refused
because no one can claim it any more (404: gone; 409: no longer pending, or past its deadline).
After any other refusal (401/403: this worker's credentials or scopes; 429: a busy queue; 400) and
after a 5xx or a network failure it is kept, and comes back after its visibility timeout: the
message is the only way a poll-only worker ever learns of its run. Every failed delete is logged.

A message dequeued more than MAX_DEQUEUES times is received again and again and never settled:
workers failing to delete, or to claim, what they receive. The worker alerts the operator with
an ERROR line (once per message) naming the queue, the task and run and what to check, and
still claims it, so that the run is not stranded. Everything after a claim is the claimWork
worker's.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
import xml.etree.ElementTree as ElementTree
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import orjson

from taskyard.config import WorkerConfig
from taskyard.model.client_errors import Refused, Unreachable
from taskyard.worker.client import Credentials, QueueClient

log = logging.getLogger(__name__)
MAX_DEQUEUES = 10
SETTLED = (404, 409)  # claimTask refusals that mean no one can claim the run: its message can go
ALERTED_KEPT = 4096  # message ids remembered as already reported (oldest forgotten first)
REFRESH_BEFORE = 5 * 60.0  # ask pollTaskUrls again this long before its URLs expire


@dataclass(frozen=True)
class Message:
    """One `QueueMessage` of a Get Messages answer."""

    message_id: str
    pop_receipt: str
    dequeue_count: int
    text: str


def parse_messages(content: bytes) -> list[Message]:
    """The messages of a `QueueMessagesList`; ValueError if it is not one."""
    try:
        root = ElementTree.fromstring(content)
    except ElementTree.ParseError as exc:
        raise ValueError(f"the queue's answer is not XML: {exc}") from None
    if root.tag != "QueueMessagesList":
        raise ValueError(f"the queue answered <{root.tag}>, not a QueueMessagesList")
    return [
        Message(
            m.findtext("MessageId") or "",
            m.findtext("PopReceipt") or "",
            int(m.findtext("DequeueCount") or "0"),
            m.findtext("MessageText") or "",
        )
        for m in root.findall("QueueMessage")
    ]


def decode_text(text: str) -> tuple[str, int, str | None]:
    """(taskId, runId, signature) of a message text (base64 JSON); ValueError if it is not one."""
    try:
        body = orjson.loads(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"the message text is not base64 JSON: {exc}") from None
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("taskId"), str)
        or type(body.get("runId")) is not int
    ):
        raise ValueError("the message text has no taskId and runId")
    signature = body.get("signature")
    return body["taskId"], body["runId"], signature if isinstance(signature, str) else None


class Poller:
    """Claims from the poll queues of the worker's task queue; one `claim()` is one round."""

    def __init__(self, config: WorkerConfig, client: QueueClient, creds: Credentials) -> None:
        self.config = config
        self.client = client
        self.creds = creds
        self._queues: list[Any] = []
        self._refresh_at = 0.0  # monotonic time to ask pollTaskUrls again
        self._alerted: OrderedDict[str, None] = OrderedDict()  # much-dequeued messages reported

    async def _urls(self) -> list[Any]:
        if time.monotonic() >= self._refresh_at:
            answer = await self.client.poll_task_urls(self.config.task_queue_id, self.creds)
            remaining = answer["expires_in"]
            self._queues = answer["queues"]
            self._refresh_at = time.monotonic() + max(remaining - REFRESH_BEFORE, remaining / 2)
        return self._queues

    async def claim(self, count: int) -> list[Any]:
        """Poll the queues in order, claim what the first non-empty one holds (at most `count`)."""
        for entry in await self._urls():
            status, content = await self.client.unsigned(
                "GET", f"{entry['signedPollUrl']}&numofmessages={count}"
            )
            if status == 403:  # our URLs expired early (a clock jump, a new key): ask again next time
                self._refresh_at = 0.0
            if status != 200:
                raise Refused(status, "", f"polling a queue answered {status}: {content[:200]!r}")
            messages = parse_messages(content)
            if messages:
                return [c for m in messages if (c := await self._claim_message(entry, m)) is not None]
        return []

    async def _claim_message(self, entry: Any, message: Message) -> Any | None:
        try:
            task_id, run_id, signature = decode_text(message.text)
        except ValueError as exc:  # not a message the queue wrote: no run to strand
            log.error("message %s on %s: %s; deleting it", message.message_id, _queue_of(entry), exc)
            await self._delete(entry, message)
            return None
        if message.dequeue_count > MAX_DEQUEUES:
            self._alert(entry, message, task_id, run_id)
        c = self.config
        proof = {"messageId": message.message_id, "receipt": message.pop_receipt}
        if signature is not None:
            proof["signature"] = signature
        try:
            claim = await self.client.claim_task(
                task_id, run_id, c.worker_group, c.worker_id, proof, self.creds
            )
        except Refused as exc:
            if exc.status in SETTLED:
                log.info("claimTask %s/%d refused (%s); deleting its message", task_id, run_id, exc)
                await self._delete(entry, message)
            else:
                log.warning(
                    "claimTask %s/%d refused (%s); keeping its message, which comes back later",
                    task_id,
                    run_id,
                    exc,
                )
            return None
        except Unreachable as exc:
            log.warning("claimTask %s/%d failed (%s); keeping its message", task_id, run_id, exc)
            return None
        if not claim:  # quarantined: `{}`, nothing claimed; the message comes back later
            return None
        await self._delete(entry, message)
        return claim

    def _alert(self, entry: Any, message: Message, task_id: str, run_id: int) -> None:
        """Tell the operator, once per message, that it keeps coming back (docs/poll.md)."""
        if message.message_id in self._alerted:
            return
        self._alerted[message.message_id] = None
        if len(self._alerted) > ALERTED_KEPT:
            self._alerted.popitem(last=False)
        log.error(
            "message %s on poll queue %s (task %s, run %d) was dequeued %d times and never deleted; "
            "claiming it anyway so that its run is not stranded. Check the workers of %s: failed "
            "deletes ('could not delete message' in their logs), claims refused for their "
            "credentials or scopes (queue:claim-task:%s), or workers stopping between poll and claim",
            message.message_id,
            _queue_of(entry),
            task_id,
            run_id,
            message.dequeue_count,
            self.config.task_queue_id,
            self.config.task_queue_id,
        )

    async def _delete(self, entry: Any, message: Message) -> None:
        url = entry["signedDeleteUrl"].replace("{{messageId}}", quote(message.message_id, safe=""))
        url = url.replace("{{popReceipt}}", quote(message.pop_receipt, safe=""))
        try:
            status, content = await self.client.unsigned("DELETE", url)
        except Unreachable as exc:
            log.warning("could not delete message %s: %s", message.message_id, exc)
            return
        if status != 204:
            log.warning(
                "could not delete message %s: %d %s",
                message.message_id,
                status,
                content[:300].decode(errors="replace"),
            )


def _queue_of(entry: Any) -> str:
    """The poll queue's name, from its URL (`.../<queue>/messages?...`)."""
    parts = urlsplit(str(entry.get("signedPollUrl", ""))).path.rstrip("/").split("/")
    return parts[-2] if len(parts) >= 2 else "?"
