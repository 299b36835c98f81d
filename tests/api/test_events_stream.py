"""The HTTP event stream (`GET /api/events/v1/stream`) on both backends, served by a real uvicorn in
this process: server-sent events need a server that streams (httpx's ASGI transport buffers the
whole answer), and a client that stops reading needs real sockets.

The relay is driven by the tests (`relay_once`), as `Published` does, so each event is logged
exactly when a test says; the feed then wakes on the relay's notification, as in `taskyard serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from urllib.parse import urlencode

import httpx
import mohawk
import orjson
import pytest

from taskyard.api import events_v1, streams
from taskyard.api.shedding import Limits
from taskyard.events import log as event_log
from taskyard.events import outbox
from taskyard.events.memory import MemoryBus
from taskyard.events.outbox import OutboxRelay
from taskyard.model.messages import Message
from taskyard.storage.port import Storage
from tests.api.conftest import ROOT, Api, Credentials, Served, assert_error, hawk_header
from tests.api.helpers import create_client, following
from tests.conftest import FakeClock, until

TC = "exchange/taskcluster-queue/v1/"
SEED = "v1/queue:"


async def get(url: str, creds: Credentials | None) -> httpx.Response:
    headers = {"authorization": hawk_header("GET", url, b"", creds)} if creds is not None else {}
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.get(url, headers=headers)


async def test_a_task_s_life_arrives_in_order_with_ids_to_resume_from(served: Served, api: Api) -> None:
    url = served.stream_url(f"{TC}task-defined:#", f"{TC}task-pending:#", f"{SEED}task-pending:#")
    async with following(url, ROOT) as reader:
        task_id, _ = await api.create_task()
        await served.publish()
        defined, pending, seed = [await reader.message() for _ in range(3)]
    assert [defined["exchange"], pending["exchange"], seed["exchange"]] == [
        f"{TC}task-defined",
        f"{TC}task-pending",
        f"{SEED}task-pending",
    ]
    assert defined["routingKey"].startswith(f"primary.{task_id}.")
    assert defined["body"]["status"]["taskId"] == task_id
    assert seed["body"]["version"] == "0.2.0"
    # The ids are the log's: the seed message is the second message of the pending event.
    seq = int(defined["id"].split(".")[0])
    assert [defined["id"], pending["id"], seed["id"]] == [f"{seq}.0", f"{seq + 1}.0", f"{seq + 1}.1"]


async def test_patterns_and_cc_routes_choose_what_is_sent(served: Served, api: Api) -> None:
    url = served.stream_url(f"{TC}task-defined:route.watched.#")
    async with following(url, ROOT) as reader:
        await api.create_task()  # no route: not sent
        watched, _ = await api.create_task(routes=["watched.here"])
        await served.publish()
        message = await reader.message()
    assert message["body"]["status"]["taskId"] == watched
    assert message["cc"] == ["route.watched.here"]


async def test_last_event_id_resumes_without_a_gap(served: Served, api: Api) -> None:
    url = served.stream_url(f"{TC}task-pending:#", f"{SEED}task-pending:#")
    async with following(url, ROOT) as reader:
        first, _ = await api.create_task()
        await served.publish()
        tc_message = await reader.message()
        assert tc_message["body"]["status"]["taskId"] == first
        # Gone after the tc message of the event, before its seed message.
    missed = [(await api.create_task())[0] for _ in range(3)]
    await served.publish()
    for header in (True, False):
        given = {"last-event-id": tc_message["id"]} if header else {}
        query = {} if header else {"lastEventId": tc_message["id"]}
        async with following(served.stream_url(*_bindings(url), **query), ROOT, given) as again:
            seed = await again.message()
            assert (seed["exchange"], seed["body"]["status"]["taskId"]) == (f"{SEED}task-pending", first)
            replayed = [await again.message() for _ in range(2 * len(missed))]
            assert [m["body"]["status"]["taskId"] for m in replayed] == [t for t in missed for _ in "ts"]
            # Live events follow the replayed ones.
            later, _ = await api.create_task()
            await served.publish()
            assert (await again.message())["body"]["status"]["taskId"] == later
            assert (await again.message())["body"]["status"]["taskId"] == later
        missed.append(later)  # the next reconnect, from the same id, is sent it too


def _bindings(url: str) -> list[str]:
    return [v for k, v in httpx.URL(url).params.multi_items() if k == "binding"]


async def test_a_fresh_stream_s_opening_id_resumes_what_came_after_it(served: Served, api: Api) -> None:
    url = served.stream_url(f"{TC}task-pending:#")
    async with following(url, ROOT) as reader:
        start = reader.last_id
    assert start == str(served.feed.position)
    task_id, _ = await api.create_task()  # while nobody follows
    await served.publish()
    async with following(url, ROOT, {"last-event-id": start}) as again:
        assert (await again.message())["body"]["status"]["taskId"] == task_id


async def test_an_id_the_log_no_longer_holds_says_what_was_missed(served: Served, api: Api) -> None:
    await api.create_task()
    await served.publish()
    async with served.storage.reader() as session:
        end = await event_log.end(session)
    served.clock.advance(3600)
    assert await event_log.prune_once(served.storage, served.clock() - 600_000) == end.newest
    later, _ = await api.create_task()
    await served.publish()
    url = served.stream_url(f"{TC}task-defined:#")
    async with following(url, ROOT, {"last-event-id": "0"}) as reader:
        missed = await reader.event()
        assert missed["event"] == "missed"
        assert orjson.loads(missed["data"])["through"] == str(end.newest)
        assert missed["id"] == str(end.newest)
        assert (await reader.message())["body"]["status"]["taskId"] == later


async def test_a_caller_sees_only_the_exchanges_its_scopes_name(served: Served, api: Api) -> None:
    reader_creds = await create_client(api, "events/pending", f"events:stream:{TC}task-pending")
    allowed = served.stream_url(f"{TC}task-pending:#")
    refused = await get(served.stream_url(f"{TC}task-pending:#", f"{SEED}task-completed:#"), reader_creds)
    assert_error(refused, 403, "InsufficientScopes", names=[f"events:stream:{SEED}task-completed"])
    assert_error(
        await get(allowed, None), 403, "InsufficientScopes", names=[f"events:stream:{TC}task-pending"]
    )
    async with following(allowed, reader_creds) as reader:
        task_id, _ = await api.create_task()
        await served.publish()
        message = await reader.message()
    assert (message["exchange"], message["body"]["status"]["taskId"]) == (f"{TC}task-pending", task_id)


async def test_a_bewit_signs_the_stream_for_clients_that_cannot_send_headers(
    served: Served, api: Api
) -> None:
    url = served.stream_url(f"{TC}task-pending:#")
    resource = mohawk.base.Resource(
        credentials={"id": ROOT.client_id, "key": ROOT.access_token, "algorithm": "sha256"},
        method="GET",
        ext="e30=",
        url=url,
        timestamp=int(time.time()) + 600,
        nonce="",
    )
    signed = f"{url}&bewit={mohawk.bewit.get_bewit(resource).rstrip('=')}"
    async with following(signed, None) as reader:
        task_id, _ = await api.create_task()
        await served.publish()
        assert (await reader.message())["body"]["status"]["taskId"] == task_id


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ({}, ["binding is required"]),
        ({"binding": f"{TC}task-pending:a..b"}, ["a..b", "word 2 is empty"]),
        ({"binding": f"{TC}task-pending:a#"}, ["'a#'", "mixes a wildcard"]),
        ({"binding": f"{TC}task-pending:**"}, ["'**'", "mixes a wildcard"]),
        ({"binding": f"{TC}task-pending:"}, ["it is empty"]),
        ({"binding": f"{TC}no-such-exchange:#"}, [f"'{TC}no-such-exchange'", "is not an exchange"]),
        ({"binding": "v1/queue:task-defined:#"}, ["'v1/queue:task-defined'", "is not an exchange"]),
        ({"binding": f"{TC}task-pending:#", "lastEventId": "x1"}, ["lastEventId", "'x1'"]),
        ({"binding": f"{TC}task-pending:#", "colour": "red"}, ["'colour'", "is not known"]),
        ({"binding": f"{TC}task-pending:a.\x00"}, ["word 2 holds a control character"]),
        ({"binding": f"{TC}task-pending:" + "a." * 200}, ["longer than 255 bytes"]),
        ({"binding": "é" * 5000}, ["is not an exchange"]),
        ({"binding": ""}, ["'' is not an exchange"]),
        ({"binding": f"{TC}task-pending:#", "lastEventId": "9" * 40}, ["lastEventId"]),
        ({"binding": f"{TC}task-pending:#", "lastEventId": "-1"}, ["lastEventId", "'-1'"]),
    ],
)
async def test_bad_input_is_a_400_naming_the_binding_and_rule(
    served: Served, query: dict[str, str], names: list[str]
) -> None:
    url = f"{served.url}/api/events/v1/stream?{urlencode(query)}"
    assert_error(await get(url, ROOT), 400, "InvalidRequestArguments", names=names)


async def test_a_bad_last_event_id_header_is_a_400(served: Served) -> None:
    url = served.stream_url(f"{TC}task-pending:#")
    headers = {"authorization": hawk_header("GET", url, b"", ROOT), "last-event-id": "12.x"}
    async with httpx.AsyncClient() as client:
        response = await client.get(url, headers=headers)
    assert_error(response, 400, "InvalidRequestArguments", names=["Last-Event-ID", "'12.x'"])


async def test_too_many_bindings_are_refused(served: Served) -> None:
    url = served.stream_url(*[f"{TC}task-pending:a{i}" for i in range(33)])
    assert_error(await get(url, ROOT), 400, "InvalidRequestArguments", names=["at most 32"])


async def test_an_idle_stream_sends_heartbeats(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_v1, "HEARTBEAT_SECONDS", 0.05)
    async with following(served.stream_url(f"{TC}task-pending:#"), ROOT) as reader:
        while not reader.comments:
            line = await asyncio.wait_for(anext(reader.lines), 10)
            assert line in ("", ": heartbeat"), line
            if line:
                reader.comments.append(line)
    assert reader.comments == [": heartbeat"]


async def test_stopping_ends_the_streams_even_of_clients_that_do_not_read(served: Served) -> None:
    url = served.stream_url(f"{TC}task-pending:#")
    with contextlib.closing(await stuck_client(url)):
        await until(lambda: served.feed.followers == 1)
        async with following(url, ROOT) as reader:
            served.feed.end_streams(grace=0.1)
            rest = [line async for line in reader.lines]  # ends: the server closed the stream
        assert rest == []
        await until(lambda: served.feed.followers == 0)


async def test_ping_and_index(served: Served) -> None:
    async with httpx.AsyncClient() as client:
        ping = (await client.get(f"{served.url}/api/events/v1/ping")).json()
        index = (await client.get(f"{served.url}/api/events/v1/")).json()
    assert ping["alive"] is True
    assert index["service"] == "events"
    assert [r["name"] for r in index["routes"]] == ["ping", "stream"]


async def test_a_client_that_stops_reading_is_dropped_and_the_server_goes_on(
    served: Served, api: Api, storage: Storage, caplog: pytest.LogCaptureFixture
) -> None:
    url = served.stream_url(f"{TC}task-defined:#")
    with contextlib.closing(await stuck_client(url)):
        await until(lambda: served.feed.followers == 1)
        async with following(url, ROOT) as healthy:
            big = {"status": {"taskId": "x"}, "padding": "x" * 50_000}
            held = []
            with caplog.at_level(logging.WARNING, "taskyard.events.feed"):
                for round_ in range(200):  # up to 10 MB: far beyond every socket buffer on the way
                    async with storage.transaction() as tx:
                        await outbox.append_tx(
                            tx, [Message("task-defined", f"k{round_}", big, [])], now=served.clock()
                        )
                    await served.publish()
                    held.append(max((f.held for f in served.feed._followers), default=0))
                    assert (await healthy.message())["routingKey"] == f"k{round_}"
                    if served.feed.dropped:
                        break
            assert served.feed.dropped == 1, "the stuck client was never dropped"
            assert max(held) <= served.feed.buffer  # never more than its buffer, however long it stalls
            assert "dropped an event stream" in caplog.text
            assert served.feed.followers == 1  # the healthy one goes on
            await api.create_task()
            await served.publish()
            assert (await healthy.message())["exchange"] == f"{TC}task-defined"
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{served.url}/api/events/v1/ping")).status_code == 200


async def stuck_client(url: str) -> socket.socket:
    """A client that asks for `url` with a small receive buffer, and then never reads."""
    parts = httpx.URL(url)
    stuck = socket.socket()
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.setblocking(False)
    await asyncio.get_running_loop().sock_connect(stuck, (parts.host, parts.port))
    target = url.removeprefix(f"http://{parts.host}:{parts.port}")
    head = f"GET {target} HTTP/1.1\r\nHost: {parts.host}:{parts.port}\r\n"
    stuck.send(f"{head}Authorization: {hawk_header('GET', url, b'', ROOT)}\r\n\r\n".encode())
    return stuck


async def test_relayed_events_are_logged_and_pruned_by_age(storage: Storage, clock: FakeClock) -> None:
    bus = MemoryBus()
    relay = OutboxRelay(storage, bus, clock=clock)
    for n in range(3):
        async with storage.transaction() as tx:
            await outbox.append_tx(tx, [Message("task-defined", f"k{n}", {"n": n}, [])], now=clock())
        await relay.relay_once()
        clock.advance(60)
    async with storage.reader() as session:
        logged = await event_log.read(session, 0, 2**62, 10)
        assert [e.message.routing_key for e in logged] == ["k0", "k1", "k2"]
    # Older than 90 s: the first two.
    assert await event_log.prune_once(storage, clock() - 90_000) == 2
    async with storage.reader() as session:
        end = await event_log.end(session)
        assert [e.message.routing_key for e in await event_log.read(session, 0, 2**62, 10)] == ["k2"]
    assert (end.pruned, end.newest) == (logged[1].id, logged[2].id)
    assert await event_log.prune_once(storage, clock() - 90_000) == 0
    await bus.close()


async def test_metrics_count_the_streams_served(served: Served) -> None:
    async def subscribers() -> str:
        async with httpx.AsyncClient() as client:
            text = (await client.get(f"{served.url}/metrics")).text
        return next(
            line for line in text.splitlines() if line.startswith("taskyard_event_stream_subscribers")
        )

    assert await subscribers() == "taskyard_event_stream_subscribers 0.0"
    async with following(served.stream_url(f"{TC}task-defined:#"), ROOT):
        await until(lambda: served.feed.followers == 1)
        assert await subscribers() == "taskyard_event_stream_subscribers 1.0"


async def test_streams_beyond_the_bound_get_503_with_retry_after(served: Served) -> None:
    served.app.shedding.limits = Limits(max_streams=1)
    url = served.stream_url(f"{TC}task-defined:#")
    async with following(url, ROOT):
        refused = await get(url, ROOT)
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "5"
        assert refused.json()["code"] == "ServiceUnavailable"
        assert "streams" in refused.json()["message"]
        async with httpx.AsyncClient() as client:  # other requests are not streams: answered
            assert (await client.get(f"{served.url}/api/events/v1/ping")).status_code == 200
    async with following(url, ROOT) as again:  # the one that ended left room for another
        await served.publish()
        assert again.response.status_code == 200


async def test_a_dropped_client_that_reads_again_is_told_and_the_stream_ends(
    served: Served, storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streams, "FAREWELL_SECONDS", 60.0)  # however slowly this test reads again
    url = served.stream_url(f"{TC}task-defined:#")
    with contextlib.closing(await stuck_client(url)) as stuck:
        await until(lambda: served.feed.followers == 1)
        big = {"status": {"taskId": "x"}, "padding": "x" * 50_000}
        for round_ in range(400):  # up to 20 MB: far beyond every socket buffer on the way
            async with storage.transaction() as tx:
                await outbox.append_tx(
                    tx, [Message("task-defined", f"k{round_}", big, [])], now=served.clock()
                )
            await served.publish()
            if served.feed.dropped:
                break
        assert served.feed.dropped == 1
        received = bytearray()
        loop = asyncio.get_running_loop()
        while not received.endswith(b"\r\n0\r\n\r\n"):  # the end of a chunked response
            data = await asyncio.wait_for(loop.sock_recv(stuck, 1 << 16), 30)
            assert data, f"closed before the end of the response: {bytes(received[-300:])!r}"
            received += data
    farewell = bytes(received[-1000:])
    assert b"event: dropped\ndata: " in farewell
    assert b"Last-Event-ID" in farewell


async def test_a_client_that_takes_nothing_for_a_while_is_given_up_on(
    served: Served, storage: Storage, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(streams, "SEND_TIMEOUT", 0.2)
    url = served.stream_url(f"{TC}task-defined:#")
    big = {"status": {"taskId": "x"}, "padding": "x" * 500_000}
    with (
        contextlib.closing(await stuck_client(url)),
        caplog.at_level(logging.WARNING, "taskyard.api.streams"),
    ):
        await until(lambda: served.feed.followers == 1)
        # 8 MB, beyond the socket buffers on the way, in fewer events than the feed's buffer holds:
        # the stream is not dropped for its buffer, but for a send that waits too long.
        for round_ in range(served.feed.buffer - 4):
            async with storage.transaction() as tx:
                await outbox.append_tx(
                    tx, [Message("task-defined", f"k{round_}", big, [])], now=served.clock()
                )
            await served.publish()
        await until(lambda: served.feed.followers == 0)
    assert served.feed.dropped == 0
    assert "gave up on a stream: its client took no data" in caplog.text
