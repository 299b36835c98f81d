"""What taskyard takes from its dependencies' internals (`src/taskyard/internals/`) is still there
and does what it is used for; and the installed versions are those it was checked against.

On a failure here after an upgrade: the message names the use; mend it in `internals/` (or its
caller), then widen `CHECKED` and pyproject.toml's bound together."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import re
import tomllib
from collections.abc import AsyncIterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import aiormq
import orjson
import pytest
from aiormq import spec
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from taskyard.events.frames import Frames
from taskyard.internals import CHECKED, amqp, locks, server, web
from tests.conftest import RABBITMQ_URL, need_rabbitmq

ROOT = Path(__file__).parent.parent


def minor(text: str) -> tuple[int, int]:
    found = re.match(r"(\d+)\.(\d+)", text)
    assert found, f"not a version: {text!r}"
    return int(found[1]), int(found[2])


def release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


@pytest.mark.parametrize("package", sorted(CHECKED))
def test_the_installed_version_is_one_the_internals_were_checked_against(package: str) -> None:
    oldest, newest = CHECKED[package]
    installed = version(package)
    assert release(oldest) <= release(installed) and minor(installed) <= minor(newest), (
        f"src/taskyard/internals/ was checked against {package} {oldest} to {newest}, and {installed} is "
        f"installed: check its uses of {package} (this file's tests name them) and widen the range "
        "(CHECKED in internals/__init__.py, and pyproject.toml's bound)"
    )


@pytest.mark.parametrize("package", sorted(CHECKED))
def test_pyproject_bounds_the_package_to_the_checked_versions(package: str) -> None:
    oldest, newest = CHECKED[package]
    major, last = minor(newest)
    wanted = f"{package}>={oldest},<{major}.{last + 1}"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert wanted in declared, f"pyproject.toml should declare {wanted!r}, as CHECKED says"


# starlette (internals/web.py)


def test_get_route_path_is_the_path_below_the_root_path() -> None:
    assert web.get_route_path({"path": "/api/queue/v1/ping", "root_path": ""}) == "/api/queue/v1/ping"
    assert web.get_route_path({"path": "/tc/api/queue/v1/ping", "root_path": "/tc"}) == "/api/queue/v1/ping"


async def sent(response: Response) -> list[Message]:
    messages: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        messages.append(message)

    scope: Scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    await response(scope, receive, send)
    return messages


@pytest.mark.parametrize(
    ("body", "status", "headers"),
    [
        ({"taskId": "x"}, 200, None),
        (None, 200, None),
        (None, 204, None),
        ({"a": 1}, 304, None),
        ({"code": "ResourceNotFound"}, 404, {"x-taskcluster-endpoint": "e"}),
        ([1, 2], 200, {"content-type": "application/json; charset=utf-8", "content-length": "5"}),
    ],
)
async def test_json_response_sends_what_a_starlette_response_sends(
    body: Any, status: int, headers: dict[str, str] | None
) -> None:
    """`json_response` skips `Response.__init__` (`Response.__new__`): what it sends must be what
    the constructed one sends."""
    content = None if body is None else orjson.dumps(body)
    media_type = None if body is None else "application/json"
    built = Response(content, status, headers, media_type)
    assert await sent(web.json_response(body, status, headers)) == await sent(built)


def test_parse_range_reads_a_range_as_file_response_does() -> None:
    """`FileResponse._parse_range_header`: the ranges, end exclusive; its two refusals."""
    assert web.parse_range("bytes=0-9", 100) == [(0, 10)]
    assert web.parse_range("bytes=90-", 100) == [(90, 100)]
    with pytest.raises(web.MalformedRangeHeader):
        web.parse_range("lines=1-2", 100)
    with pytest.raises(web.RangeNotSatisfiable):
        web.parse_range("bytes=200-300", 100)


# asyncio (internals/locks.py)


async def test_queued_says_whether_a_task_waits_for_the_lock() -> None:
    """`asyncio.Lock._waiters`: nobody at first; a task waiting; still queued, the lock free, once
    woken by a release and not yet running; nobody once it has it."""
    lock = asyncio.Lock()
    assert not locks.queued(lock)
    await lock.acquire()
    waiter = asyncio.create_task(lock.acquire())
    await asyncio.sleep(0)
    assert locks.queued(lock)
    lock.release()
    assert not lock.locked() and locks.queued(lock)
    await waiter
    assert lock.locked() and not locks.queued(lock)
    lock.release()


# uvicorn (internals/server.py)


class Recording(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.0.0.7", 4321) if name == "peername" else default

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


async def test_the_httptools_protocol_has_the_hooks_and_attributes_the_subclass_uses() -> None:
    """`HttpToolsProtocol` (cli/connections.py subclasses it): each hook it overrides, and, through
    one request, each attribute of the protocol and of the request's cycle that it reads."""
    import uvicorn
    from uvicorn.server import ServerState

    for hook in server.PROTOCOL_HOOKS:
        assert callable(getattr(server.HttpToolsProtocol, hook, None)), f"HttpToolsProtocol.{hook} is gone"

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    config = uvicorn.Config(app, http="httptools", lifespan="off", log_level="warning")
    protocol = server.HttpToolsProtocol(config=config, server_state=ServerState(), app_state={})
    transport = Recording()
    protocol.connection_made(transport)
    protocol.data_received(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
    for attribute in server.PROTOCOL_ATTRIBUTES:
        assert hasattr(protocol, attribute), f"HttpToolsProtocol has no {attribute} any more"
    assert protocol.loop is asyncio.get_running_loop()
    assert protocol.client == ("10.0.0.7", 4321)
    assert protocol.transport is transport
    assert protocol.scope["path"] == "/x"
    cycle = protocol.cycle
    assert isinstance(cycle, server.RequestResponseCycle)
    for attribute in server.CYCLE_ATTRIBUTES:
        assert hasattr(cycle, attribute), f"RequestResponseCycle has no {attribute} any more"
    assert isinstance(cycle.message_event, asyncio.Event)
    assert (cycle.response_started, cycle.response_complete, cycle.disconnected) == (False, False, False)
    for _ in range(10):
        await asyncio.sleep(0)
    assert cycle.response_started and cycle.response_complete
    assert transport.written.startswith(b"HTTP/1.1 204 ")  # what the head-with-body transport holds
    protocol.connection_lost(None)


def test_trusted_hosts_takes_addresses_and_networks_as_forwarded_allow_ips_does() -> None:
    trusted = server.TrustedHosts("127.0.0.1,::1,10.0.0.0/8")
    assert "127.0.0.1" in trusted and "::1" in trusted and "10.1.2.3" in trusted
    assert "192.0.2.1" not in trusted
    assert "192.0.2.1" in server.TrustedHosts("*")
    assert "10.1.2.3" in server.TrustedHosts(["10.1.2.3"])


def test_the_server_has_what_serve_overrides_and_reads() -> None:
    """cli/serve.py's `_Server` overrides `handle_exit` and `shutdown`, and reads `started` and
    `should_exit`."""
    import uvicorn

    assert callable(uvicorn.Server.handle_exit) and callable(uvicorn.Server.shutdown)
    served = uvicorn.Server(uvicorn.Config(lambda *_: None))
    assert served.started is False and served.should_exit is False


# aiormq (internals/amqp.py): on the shared RabbitMQ


@contextlib.asynccontextmanager
async def confirming_channel() -> AsyncIterator[aiormq.Channel]:
    need_rabbitmq()
    connection = await aiormq.connect(RABBITMQ_URL)
    try:
        channel = await connection.channel(publisher_confirms=True)
        assert isinstance(channel, aiormq.Channel)
        yield channel
    finally:
        await connection.close()


def batch(channel: aiormq.Channel, queue: str, ids: list[str]) -> Frames:
    """Publishes of `ids` to `queue` through the default exchange."""
    frames = Frames(channel.number, channel.max_content_size, content_type="text/plain", delivery_mode=1)
    for message_id in ids:
        frames.add("", queue, message_id.encode(), cc=[], message_id=message_id)
    return frames


async def drained(channel: aiormq.Channel, queue: str) -> list[str]:
    bodies = []
    while True:
        got = await channel.basic_get(queue, no_ack=True)
        if got.body == b"" and isinstance(got.delivery, spec.Basic.GetEmpty):
            return bodies
        bodies.append(got.body.decode())


async def test_the_channel_has_what_publish_frames_uses() -> None:
    async with confirming_channel() as channel:
        assert amqp.usable(channel) is None
    assert callable(aiormq.Channel.basic_publish)


def test_usable_says_why_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the bus logs when it falls back to a message at a time."""
    assert amqp.usable(object()) == (  # type: ignore[arg-type]
        "its channel has no usable delivery_tag, confirmations, write_queue, number, max_content_size, "
        "publisher_confirms, lock, create_future"
    )
    monkeypatch.setitem(CHECKED, "aiormq", ("7.3", "7.4"))
    assert amqp.usable(object()) == (  # type: ignore[arg-type]
        f"aiormq {version('aiormq')} is not one this was checked against (7.3 to 7.4.x)"
    )


async def test_batches_among_basic_publishes_take_the_next_delivery_tags_and_get_their_own_confirms() -> None:
    """`publish_frames` numbers its messages as `basic_publish` does, under the channel's lock: with
    both publishing at once on one channel, every message gets its own tag and its own confirm, and
    the broker gets them in the order of their tags."""
    async with confirming_channel() as channel:
        queue = (await channel.queue_declare("", exclusive=True, auto_delete=True)).queue
        assert queue is not None

        async def single(message_id: str) -> object:
            properties = spec.Basic.Properties(message_id=message_id)
            return await channel.basic_publish(
                message_id.encode(), routing_key=queue, properties=properties, wait=False
            )

        async def batched(n: int) -> list[object]:
            ids = [f"b{n}-{i}" for i in range(7)]
            frames = batch(channel, queue, ids)
            sent = await amqp.publish_frames(channel, frames.payload(), frames.count)
            # Still unconfirmed (nothing was written yet): filed under consecutive tags, in order.
            tags = {id(future): tag for tag, future in channel.confirmations.items()}
            first = tags[id(sent.futures[0])]
            assert [tags[id(f)] for f in sent.futures] == list(range(first, first + 7))
            acks = await sent.confirmed()
            for tag, ack in enumerate(acks, first):  # each its own tag's ack (or a multiple one)
                assert isinstance(ack, spec.Basic.Ack)
                assert ack.delivery_tag == tag or (ack.multiple and ack.delivery_tag >= tag)
            return acks

        work: list[Any] = []
        for n in range(5):
            work += [single(f"s{n}-{i}") for i in range(3)] + [batched(n)]
        results = await asyncio.gather(*work)
        assert all(isinstance(r, spec.Basic.Ack) for r in results[::4] + results[1::4] + results[2::4])
        assert channel.delivery_tag == 5 * (3 + 7)
        assert channel.confirmations == {}
        received = await drained(channel, queue)
        assert sorted(received) == sorted(
            [f"s{n}-{i}" for n in range(5) for i in range(3)]
            + [f"b{n}-{i}" for n in range(5) for i in range(7)]
        )
        for n in range(5):  # a batch arrives whole, in order
            start = received.index(f"b{n}-0")
            assert received[start : start + 7] == [f"b{n}-{i}" for i in range(7)]


async def test_a_nack_fails_the_future_of_its_own_message() -> None:
    """A queue that refuses what it has no room for (`reject-publish`) makes the broker nack: the
    futures of those messages fail with aiormq's DeliveryError, the others' resolve to an ack, and
    the batch's `confirmed()` raises the DeliveryError."""
    async with confirming_channel() as channel:
        ok = (await channel.queue_declare("", exclusive=True, auto_delete=True)).queue
        full = (
            await channel.queue_declare(
                "",
                exclusive=True,
                auto_delete=True,
                arguments={"x-max-length": 0, "x-overflow": "reject-publish"},
            )
        ).queue
        assert ok is not None and full is not None
        frames = batch(channel, ok, ["a"])
        frames.add("", full, b"b", cc=[], message_id="b")
        frames.add("", ok, b"c", cc=[], message_id="c")
        sent = await amqp.publish_frames(channel, frames.payload(), frames.count)
        results = await asyncio.gather(*sent.futures, return_exceptions=True)
        assert isinstance(results[0], spec.Basic.Ack) and isinstance(results[2], spec.Basic.Ack)
        assert isinstance(results[1], aiormq.exceptions.DeliveryError)
        assert isinstance(results[1].frame, spec.Basic.Nack)
        with pytest.raises(aiormq.exceptions.DeliveryError):
            await sent.confirmed()
        assert await drained(channel, ok) == ["a", "c"]
        assert channel.confirmations == {}


async def test_a_channel_the_broker_closes_fails_the_futures_at_once() -> None:
    """A publish to an exchange that does not exist closes the channel (404): the batch's
    `confirmed()` fails then, as `basic_publish` would, not at the caller's timeout."""
    async with confirming_channel() as channel:
        frames = Frames(channel.number, channel.max_content_size, content_type="text/plain", delivery_mode=1)
        frames.add("no-such-exchange-" + os.urandom(6).hex(), "k", b"x", cc=[], message_id="m")
        sent = await amqp.publish_frames(channel, frames.payload(), frames.count)
        async with asyncio.timeout(10):
            with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity):
                await sent.confirmed()
        assert sent.closed.done()
        with pytest.raises(aiormq.exceptions.ChannelInvalidStateError):
            await amqp.publish_frames(channel, frames.payload(), frames.count)


async def test_a_batch_given_up_on_ignores_its_late_confirms() -> None:
    """`confirmed()` cancelled (the bus's confirm timeout) stops waiting: each message's future is
    cancelled, the confirms that come later are dropped, and the channel goes on publishing."""
    async with confirming_channel() as channel:
        queue = (await channel.queue_declare("", exclusive=True, auto_delete=True)).queue
        assert queue is not None
        sent = await amqp.publish_frames(channel, *payload_and_count(batch(channel, queue, ["a", "b"])))
        waiting = asyncio.create_task(sent.confirmed())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert all(f.cancelled() for f in sent.futures) and sent.closed.cancelled()
        async with asyncio.timeout(10):
            while channel.confirmations:  # the late acks, dropped
                await asyncio.sleep(0.01)
        again = await amqp.publish_frames(channel, *payload_and_count(batch(channel, queue, ["c"])))
        assert [type(r) for r in await again.confirmed()] == [spec.Basic.Ack]
        assert await drained(channel, queue) == ["a", "b", "c"]


def payload_and_count(frames: Frames) -> tuple[bytes, int]:
    return frames.payload(), frames.count


async def test_a_closed_channel_leaves_no_batch_outcome_unretrieved() -> None:
    """The channel closes: aiormq fails the batch's `closed` future, `confirmed()` raises that, and
    the messages' futures are cancelled (by it, or later by aiormq). The gathering of them ends
    with a CancelledError nobody reads; asyncio logs such an outcome as an ERROR when it is
    collected, which a loaded full run met in a broker restart."""
    loop = asyncio.get_running_loop()
    logged: list[str] = []
    loop.set_exception_handler(lambda _loop, context: logged.append(context["message"]))
    futures: list[asyncio.Future[object]] = [loop.create_future() for _ in range(2)]
    closed: asyncio.Future[object] = loop.create_future()
    closed.set_exception(aiormq.exceptions.ChannelInvalidStateError("the broker closed it"))
    with pytest.raises(aiormq.exceptions.ChannelInvalidStateError, match="the broker closed it"):
        await amqp.Batch(futures, closed).confirmed()
    for future in futures:
        future.cancel()
    del futures, closed
    for _ in range(3):
        await asyncio.sleep(0)
    gc.collect()
    assert logged == []


async def test_message_futures_cancelled_as_the_channel_closes_are_a_broker_error() -> None:
    """aiormq may cancel the messages' futures in the same step of the loop as it fails `closed`:
    `confirmed()` raises a broker error then, never the CancelledError, which would have ended the
    outbox relay as if it were cancelled."""
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future[object]] = [loop.create_future() for _ in range(2)]
    closed: asyncio.Future[object] = loop.create_future()
    waiting = asyncio.ensure_future(amqp.Batch(futures, closed).confirmed())
    await asyncio.sleep(0)
    closed.set_exception(aiormq.exceptions.ChannelInvalidStateError("the broker closed it"))
    for future in futures:
        future.cancel()
    with pytest.raises(aiormq.exceptions.ChannelInvalidStateError):
        await waiting
