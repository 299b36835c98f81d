"""The events API: `GET /api/events/v1/stream`, the deployment's events as server-sent events.

For browsers and tools without AMQP access. `binding=<exchange>:<pattern>` (repeatable) says
which: a full exchange name the deployment publishes and an AMQP topic pattern, matched against
the routing key and the CC keys. Each message is one SSE event whose id is its place in the event
log; a client that reconnects with `Last-Event-ID` (the header, or the `lastEventId` parameter) is
sent what came after it, from the log, with no gap, while the log still holds it (otherwise it
first gets a `missed` event). Reading an exchange takes the scope `events:stream:<exchange>`.
docs/protocol.md has the whole contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TypedDict

import orjson

from taskyard.api import queue_v1
from taskyard.api.routing import Call, Route, Stream
from taskyard.events.feed import Binding, Dropped, EventFeed, Follower, Item, Missed, Position
from taskyard.events.port import BadPattern, check_pattern
from taskyard.model.errors import InvalidRequestArguments, Unavailable

HEARTBEAT_SECONDS = 15.0
MAX_BINDINGS = 32
RETRY_MS = 2000  # how long a browser waits before reconnecting
QUERY_KEYS = ("binding", "lastEventId", "bewit")
HEADERS = {"cache-control": "no-store", "x-accel-buffering": "no"}  # no proxy may hold events back
MEDIA_TYPE = "text/event-stream"
# Sent to a stream the server gives up on (its client did not keep up, or the server is stopping).
FAREWELL = b"event: dropped\ndata: %s\n\n" % orjson.dumps(
    {
        "message": "the server ended this stream: its client did not read its events fast enough, "
        "or the server is stopping; reconnect with the last event id received (Last-Event-ID) "
        "to go on without a gap"
    }
)
SCOPES = {"AllOf": [{"for": "exchange", "in": "exchanges", "each": "events:stream:<exchange>"}]}


class Message(TypedDict):
    """The data of one SSE event: a message as a bus consumer would get it."""

    exchange: str
    routingKey: str
    cc: list[str]
    body: object


def parse_bindings(values: Sequence[str], known: Sequence[str]) -> list[Binding]:
    """The `binding` parameters as (exchange, pattern); 400 naming the binding and the rule."""
    if not values:
        raise InvalidRequestArguments(
            "query parameter binding is required: give one or more, each `<exchange>:<pattern>` "
            "(e.g. binding=exchange/taskcluster-queue/v1/task-completed:%23)"
        )
    if len(values) > MAX_BINDINGS:
        raise InvalidRequestArguments(
            f"query parameter binding is given {len(values)} times; at most {MAX_BINDINGS}"
        )
    return list(dict.fromkeys(parse_binding(value, known) for value in values))


def parse_binding(value: str, known: Sequence[str]) -> Binding:
    if value in known:
        return value, "#"
    exchange = next((e for e in known if value.startswith(e + ":")), None)
    if exchange is None:
        named = value.rpartition(":")[0] or value
        raise InvalidRequestArguments(
            f"query parameter binding {value[:300]!r}: {named[:200]!r} is not an exchange this deployment "
            f"publishes; a binding is `<exchange>:<pattern>`, the exchange one of {', '.join(known)}"
        )
    try:
        return exchange, check_pattern(value[len(exchange) + 1 :])
    except BadPattern as exc:
        raise InvalidRequestArguments(f"query parameter binding {value[:300]!r}: {exc.message}") from None


def resume_from(call: Call) -> Position | None:
    """Where the client left off: the Last-Event-ID header, else the lastEventId parameter."""
    header = call.headers.get("last-event-id")
    given, where = (
        (header, "header Last-Event-ID")
        if header is not None
        else (call.query.get("lastEventId"), "query parameter lastEventId")
    )
    if given is None or given == "":
        return None
    position = Position.parse(given.strip())
    if position is None:
        raise InvalidRequestArguments(
            f"{where} {given[:40]!r} is not an event id of this stream: `<number>` or `<number>.<number>`"
        )
    return position


def check_query(call: Call) -> None:
    unknown = sorted({k for k, _ in call.query_items} - set(QUERY_KEYS))
    if unknown:
        raise InvalidRequestArguments(
            f"query parameter {unknown[0][:40]!r} is not known here; this route takes {', '.join(QUERY_KEYS)}"
        )
    repeated = [k for k in ("lastEventId", "bewit") if sum(1 for q, _ in call.query_items if q == k) > 1]
    if repeated:
        raise InvalidRequestArguments(f"query parameter {repeated[0]} is given more than once")


async def stream(call: Call) -> Stream:
    """Follow the events the bindings take; see the module's docstring."""
    feed = call.services.events
    if feed is None:
        raise Unavailable("this server does not serve the event stream")
    check_query(call)
    bindings = parse_bindings([v for k, v in call.query_items if k == "binding"], feed.profiles.exchanges())
    after = resume_from(call)
    call.authorize(exchanges=sorted({exchange for exchange, _ in bindings}))
    follower = feed.follow(bindings)
    chunks = _events(feed, follower, after)
    return Stream(chunks, MEDIA_TYPE, follower.dropped, dict(HEADERS), lambda: feed.leave(follower), FAREWELL)


async def _events(feed: EventFeed, follower: Follower, after: Position | None) -> AsyncIterator[bytes]:
    opening = f": taskyard event stream\nretry: {RETRY_MS}\n"
    if after is None:
        # An id alone: the client's Last-Event-ID from now on, so a reconnect misses nothing.
        yield f"{opening}id: {follower.start}\n\n".encode()
        after = Position(follower.start)
    else:
        yield f"{opening}\n".encode()
        async for replayed in feed.replay(after, follower.start, follower.bindings):
            yield render(replayed)
    while True:
        try:
            items = await follower.next(HEARTBEAT_SECONDS)
        except Dropped:
            return
        fresh = [i for i in items if after.before(i.position.seq, i.position.index or 0)]
        yield b"".join(render(item) for item in fresh) if fresh else b": heartbeat\n\n"


def render(event: Item | Missed) -> bytes:
    """One SSE event: a message (default type), or `missed`."""
    if isinstance(event, Missed):
        data = {
            "lastEventId": str(event.after),
            "through": str(event.through),
            "message": f"the events after {event.after} up to {event.through} are no longer kept; "
            "what follows comes after them",
        }
        return b"event: missed\nid: %d\ndata: %s\n\n" % (event.through, orjson.dumps(data))
    envelope = event.envelope
    message: Message = {
        "exchange": envelope.exchange,
        "routingKey": envelope.routing_key,
        "cc": list(envelope.cc),
        "body": envelope.body,
    }
    return b"id: %s\ndata: %s\n\n" % (str(event.position).encode(), orjson.dumps(message))


ROUTES = [
    Route("GET", "/ping", "ping", queue_v1.ping),
    Route("GET", "/stream", "stream", stream, scopes=SCOPES, loads=("exchanges",), stability="experimental"),
]
