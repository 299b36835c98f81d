"""aiormq's internals that the RabbitMQ bus uses (see the package's docstring): each with why.

Only `events/` imports this module, as only it may import aiormq.

`publish_frames` writes a whole batch of publishes (frames encoded by `events/frames.py`) to the
socket at once; `Batch.confirmed()` then waits for every message's confirm. aiormq's
`basic_publish` does the same for one message, with much more per-message work (objects per
frame, pamqp's marshalling, a lock, a timeout, a queue item and a socket write per message): the
relay publishes every event, and with one `basic_publish` per message its CPU went mostly there.

It does what `basic_publish` does, for `count` messages at once, under the channel's lock (so a
`basic_publish` of anyone else on the channel takes its delivery tags before or after the batch,
never among them): it numbers the messages with the channel's next delivery tags
(`Channel.delivery_tag`, the last one used), files a future per tag in `Channel.confirmations`
(where the channel's reader settles it on the broker's ack, also a `multiple` one, and fails it
with `DeliveryError` on a nack), and queues the bytes as one `ChannelFrame` on the connection's
`write_queue`, whose writer task writes each item with one `StreamWriter.write`. If the batch
cannot be queued (cancelled while the queue is full, the channel closed), nothing of it was sent:
its tags are given back, as `basic_publish` does.

A message's future is a plain one, not `Channel.create_future()`'s as `basic_publish`'s: that
one registers in the channel's and the connection's stores of futures (three callbacks more per
message, a third of the bus's CPU per message in a batch of 500), so that a closing channel fails
it. Here one such future per batch (`Batch.closed`) stands for the batch: `Batch.confirmed`
fails when it does, as `basic_publish` would.

`usable` says, once per channel, whether what this relies on is there; the bus publishes one
`basic_publish` at a time (aiormq's public path) otherwise, and logs why.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import aiormq
from aiormq.abc import ChannelFrame

from taskyard.internals import CHECKED


def usable(channel: aiormq.Channel) -> str | None:
    """None if `publish_frames` may be used on `channel`, else why not."""
    try:
        installed = version("aiormq")
    except PackageNotFoundError:
        return "aiormq's version is unknown (no package metadata)"
    oldest, newest = CHECKED["aiormq"]
    if not (_release(oldest) <= _release(installed) and _release(installed)[:2] <= _release(newest)[:2]):
        return f"aiormq {installed} is not one this was checked against ({oldest} to {newest}.x)"
    checks = {
        "delivery_tag": isinstance(getattr(channel, "delivery_tag", None), int),
        "confirmations": isinstance(getattr(channel, "confirmations", None), dict),
        "write_queue": isinstance(getattr(channel, "write_queue", None), asyncio.Queue),
        "number": isinstance(getattr(channel, "number", None), int),
        "max_content_size": isinstance(getattr(channel, "max_content_size", None), int),
        "publisher_confirms": getattr(channel, "publisher_confirms", None) is True,
        "lock": hasattr(type(channel), "lock"),
        "create_future": callable(getattr(channel, "create_future", None)),
    }
    missing = [name for name, ok in checks.items() if not ok]
    return f"its channel has no usable {', '.join(missing)}" if missing else None


@dataclass(frozen=True)
class Batch:
    """The confirms of a batch queued by `publish_frames`."""

    futures: list[asyncio.Future[object]]  # a message's, in order: the channel's reader settles it
    closed: asyncio.Future[object]  # failed by aiormq when the channel or its connection closes

    async def confirmed(self) -> list[object]:
        """The broker's answer to each message, in order (Basic.Ack); aiormq's DeliveryError if it
        nacked one, or what closed the channel if it closed first. Cancelled (a timeout): stops
        waiting, and a late confirm is ignored (aiormq logs it at DEBUG)."""
        every = asyncio.gather(*self.futures)
        try:
            await asyncio.wait((every, self.closed), return_when=asyncio.FIRST_COMPLETED)
            if every.done():
                failure = every.exception()
                if failure is None:
                    return every.result()
                if not isinstance(failure, asyncio.CancelledError):
                    raise failure  # a nack: aiormq's DeliveryError
                # aiormq cancelled the messages' futures: the channel closed, in the same step
            if self.closed.done() and not self.closed.cancelled():
                self.closed.result()  # raises what closed the channel
            raise aiormq.exceptions.ChannelInvalidStateError("the channel closed")
        finally:
            for future in (every, self.closed):
                future.cancel()  # if still waiting (`every`: and so each message's future)
                # An outcome nobody reads (the gathering ends with CancelledError once its messages'
                # futures are cancelled, here or by aiormq) is retrieved, or asyncio logs it as an
                # error when it is collected ("exception was never retrieved").
                future.add_done_callback(_retrieve)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def publish_frames(channel: aiormq.Channel, payload: bytes, count: int) -> Batch:
    """Queue `payload`, the frames of `count` publishes on `channel`, for one write; answer their
    confirms (`Batch.confirmed()`)."""
    loop = asyncio.get_running_loop()
    async with channel.lock:  # raises ChannelInvalidStateError if the channel is closed
        first = channel.delivery_tag + 1
        tags = range(first, first + count)
        futures: list[asyncio.Future[object]] = [loop.create_future() for _ in tags]
        closed = channel.create_future()
        confirmations = channel.confirmations
        for tag, future in zip(tags, futures, strict=True):
            confirmations[tag] = future
        channel.delivery_tag = tags.stop - 1
        try:
            await channel.write_queue.put(ChannelFrame(payload=payload, should_close=False))
        except BaseException:
            # Not queued: the broker never sees these, so their tags are the next publish's.
            channel.delivery_tag = first - 1
            for tag in tags:
                confirmations.pop(tag, None)
            closed.cancel()
            raise
    return Batch(futures, closed)


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])
