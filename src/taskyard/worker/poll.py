"""`taskyard worker --protocol poll`: find work through pollTaskUrls and the poll queues instead of
claimWork, following the worker's round of docs/poll.md.

pollTaskUrls gives one queue per priority, highest first (asked again before its URLs expire).
One round polls them in that order with `numofmessages` up to the free capacity and stops at the
first queue that has messages; the worker's claim loop sleeps about a second after a round that
found none. Each message's task is claimed with claimTask, quoting the message (messageId, pop
receipt, signature); the message is deleted when the claim succeeded or was refused with a 4xx,
and kept (it comes back after its visibility timeout) after a 5xx or a network failure. Every
failed delete is logged; a message dequeued more than MAX_DEQUEUES times is reported to the
operator and deleted. Everything after a claim is the claimWork worker's.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson

from taskyard.config import WorkerConfig
from taskyard.model.client_errors import Refused, Unreachable
from taskyard.worker.client import Credentials, QueueClient

log = logging.getLogger(__name__)
MAX_DEQUEUES = 10
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
        if message.dequeue_count > MAX_DEQUEUES:
            log.warning(
                "message %s was dequeued %d times and never deleted: deleting it; "
                "check the workers of %s for failing deletes",
                message.message_id,
                message.dequeue_count,
                self.config.task_queue_id,
            )
            await self._delete(entry, message)
            return None
        try:
            task_id, run_id, signature = decode_text(message.text)
        except ValueError as exc:
            log.error("message %s: %s; deleting it", message.message_id, exc)
            await self._delete(entry, message)
            return None
        c = self.config
        proof = {"messageId": message.message_id, "receipt": message.pop_receipt}
        if signature is not None:
            proof["signature"] = signature
        try:
            claim = await self.client.claim_task(
                task_id, run_id, c.worker_group, c.worker_id, proof, self.creds
            )
        except Refused as exc:
            if exc.status >= 500:
                log.warning("claimTask %s/%d failed (%s); keeping its message", task_id, run_id, exc)
                return None
            log.info("claimTask %s/%d refused (%s); deleting its message", task_id, run_id, exc)
            await self._delete(entry, message)
            return None
        except Unreachable as exc:
            log.warning("claimTask %s/%d failed (%s); keeping its message", task_id, run_id, exc)
            return None
        if not claim:  # quarantined: `{}`, nothing claimed; the message comes back later
            return None
        await self._delete(entry, message)
        return claim

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
