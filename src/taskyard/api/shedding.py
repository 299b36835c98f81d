"""Load shedding: what one API process takes at once, and how it refuses the rest cheaply.

`Shedding` is asked first, by the app's front (`api/app.py`). It sorts each HTTP request into
one of four kinds by its method and path alone, before the body is read or the caller
authenticated:

- ping and the heartbeats (`GET /api/<service>/v1/ping`, `__heartbeat__`, `__lbheartbeat__`):
  never counted, never refused, so a health check answers as long as the process is alive;
- streams (the live-log stream, the event stream, the UI's live updates): long-lived by design; at most
  `max_streams` at once, one beyond that answered 503 `ServiceUnavailable` with `Retry-After`
  (`StreamsFull`). Each holds a connection, a task and its buffers for as long as its client
  follows; what a slow client may make one hold is bounded by the stream itself (`api/streams.py`);
- claimWork: a long poll. At most `max_long_polls` wait at once; one beyond that is answered at
  once `200 {"tasks": []}`, which TaskCluster's claimWork may always answer, and which every worker
  already handles (taskyard's waits a second before it asks again). A 429 or 503 would instead be
  retried at once by clients that retry errors, or counted as a failure by workers that give up.
  Long polls are not counted as requests in flight: a waiting one costs a connection and a little
  memory, no work. (Counting their arrival, and turning away a storm of reconnecting workers a
  bound at a time, was measured worse: those turned away come back every second, and answering
  them costs more than letting them wait);
- everything else: at most `max_in_flight` at once; one beyond that is answered 503
  `ServiceUnavailable` with `Retry-After: 1` and TaskCluster's JSON error body. Nothing of it
  was done, so sending it again is safe (createTask with the same body is idempotent anyway).
  A request is counted in flight only once its body has arrived: one whose body is still on its
  way when it comes in (the server says so, `BODY_PENDING`) is counted `receiving` instead, and
  its `Arrival` counts it in flight (or answers it 503, as above) when the app receives the
  body's last part. Counting it from its head on let 256 connections trickling a byte every 2 s
  hold every slot for the whole body timeout, and every createTask and worker report was
  answered 503 meanwhile. What a body on its way costs is bounded elsewhere: the body timeout
  (`cli/connections.py`: 30 s plus 1 s per 64 KiB, so a body held long must keep coming), the
  body limit, and the connections one address may hold (`--max-connections-per-client`).
  A request whose body arrives with its head (most: ping, every GET, a createTask sent at once)
  is counted, or refused, as it comes in.
  One let in waits at most `db_wait_timeout` seconds for a database connection (storage's
  `WAIT_TIMEOUT`), then is answered 503 `Retry-After: 1` (`DatabaseBusy`), its transaction
  never begun. A long poll waits as long as it takes: it is a wait by design, and a worker told
  503 would only come back sooner, with its checks to do again.

Of the requests let in, at most `max_running` are worked on at once (`Turns`): an API call takes
its turn once its body has arrived, before it is authenticated, and holds it until its answer is
computed. claimWork long polls have as many turns of their own (2,000 arriving at once, each with
its claim to try, would otherwise hold every other call up for seconds on PostgreSQL); one hands
its turn back when it begins to wait (`queue.signals.BEFORE_WAITING`).
The others wait for a turn in the order they came, costing the event loop nothing. Without it,
every request in flight takes a step in each turn of the loop, so each turn lasts as long as a
step of all of them, and a ping (a few steps) waits behind a few such turns: with 200 createTask
callers that was 0.3 to 0.5 s, and the arrival of 2,000 long polls at once several seconds. A
request that waits longer than `db_wait_timeout` for its turn is answered 503 `Retry-After: 1`
(`Overloaded`), nothing of it done; a long poll waits as long as it takes. A turn given back
while nobody waits is free again from the loop's next turn on: on SQLite a call may be worked on
whole in one step of the loop (its writer runs on the loop), giving its turn back before the next
arrival asks, so that every call arriving at once was worked on in the same turn of the loop
(200 createTasks, some 200 ms, every ping waiting behind them).

Streams are also bounded per client (`StreamSlot`), so that one client can't take them all:
1,001 anonymous follows of one public live log once filled the process's 1,000, and the event
stream and every other follower were answered 503 for as long as the task ran. A stream is
counted as its client's: the authenticated clientId for an event stream that carries credentials
(Hawk or a bewit), counted once the endpoint has authenticated it (`hold_as()`), at most
`max_streams_per_client` at once; anything else (a live log, whose signed URL names nobody; the
UI's live updates; an event stream without credentials) as its address's (the peer's, or the
client's a trusted proxy names in `X-Forwarded-For`), at most `max_anonymous_streams_per_client`.
One beyond is answered 429 `TooManyRequests` with `Retry-After: 5` (`TooManyStreams`): it is the
client's own streams that must end first, a client that retries a 5xx at once has no reason to
retry it, and a load balancer does not take it for a failing backend.

The bounds are per process (`serve --processes N` takes N times as many).
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import orjson
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from taskyard.api.errors import CallInfo, render
from taskyard.model.errors import TaskyardError, Unavailable

_PING = re.compile(r"/api/[a-z]+/v1/(ping|__heartbeat__|__lbheartbeat__)/?")
_CLAIM_WORK = "/api/queue/v1/claim-work/"
_STREAMS = ("/api/queue/v1/_livelog/", "/api/events/v1/stream", "/ui/live/")
_EMPTY_CLAIM = orjson.dumps({"tasks": []})


class Overloaded(Unavailable):
    """This process has as many requests in flight as it takes at once; try again in a second."""

    retry_after = 1


class StreamsFull(Unavailable):
    """This process serves as many streams as it takes at once; try again in a few seconds."""

    retry_after = 5


class TooManyStreams(TaskyardError):
    """This client holds as many streams as one client may; close one, or try again later."""

    code = "TooManyRequests"
    status = 429
    retry_after = 5


@dataclass(frozen=True)
class Limits:
    """How much one API process takes at once; 0 means no bound."""

    max_in_flight: int = 256
    max_long_polls: int = 4000
    db_wait_timeout: float | None = 5.0  # seconds a request waits for a database connection, or a turn
    max_running: int = 16  # requests worked on at once; the rest of those let in wait their turn
    max_streams: int = 1000  # event and live-log streams at once
    max_streams_per_client: int = 100  # of those, one authenticated client's event streams
    max_anonymous_streams_per_client: int = 25  # of those, one address's other streams


@dataclass
class Counts:
    """What one process has in flight now, and how many it refused since it started."""

    in_flight: int = 0
    long_polls: int = 0
    streams: int = 0
    waiting: int = 0  # requests let in, waiting for their turn (`Turns`)
    receiving: int = 0  # requests let in whose body is on its way (`Arrival`)
    refused: int = 0
    refused_client: int = 0  # streams refused 429: their client held its share (`StreamSlot`)
    refused_connections: int = 0  # connections refused: their address held its share (cli/connections.py)
    emptied: int = 0  # claimWork answered at once with no task


def kind_of(method: str, path: str) -> str:
    """`ping`, `stream`, `long_poll` or `request`."""
    if method in ("GET", "HEAD") and _PING.fullmatch(path):
        return "ping"
    if method == "GET" and path.startswith(_STREAMS):
        return "stream"
    if method == "POST" and path.startswith(_CLAIM_WORK):
        return "long_poll"
    return "request"


class CountsCollector(Collector):
    """The counts, for `GET /metrics`."""

    def __init__(self, counts: Counts) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        c = self.counts
        yield GaugeMetricFamily(
            "taskyard_requests_in_flight",
            "Requests this process is answering (claimWork, streams, ping aside).",
            c.in_flight,
        )
        yield GaugeMetricFamily(
            "taskyard_long_polls", "claimWork long polls this process holds.", c.long_polls
        )
        yield GaugeMetricFamily(
            "taskyard_streams", "Event and live-log streams this process serves.", c.streams
        )
        yield GaugeMetricFamily(
            "taskyard_requests_receiving",
            "Requests let in whose body is on its way; counted in flight once it has arrived.",
            c.receiving,
        )
        yield GaugeMetricFamily(
            "taskyard_requests_waiting",
            "Requests (and long polls) let in and waiting for their turn to be worked on.",
            c.waiting,
        )
        shed = CounterMetricFamily(
            "taskyard_requests_shed",
            "Requests this process shed: refused 503, refused 429 past their client's share of the "
            "streams (client_streams), connections refused past their address's share "
            "(client_connections), or claimWork answered at once with no task (no_task).",
            labels=["how"],
        )
        shed.add_metric(["refused"], c.refused)
        shed.add_metric(["client_streams"], c.refused_client)
        shed.add_metric(["client_connections"], c.refused_connections)
        shed.add_metric(["no_task"], c.emptied)
        yield shed


class Shedding:
    """The bounds on what one process has in flight (see the module's docstring). The app's front
    (`api/app.py`'s `App`) asks `admit()` of every HTTP request, before anything else is done
    with it, hands the app `receiving()`'s receive, and calls `leave()` once it is answered."""

    def __init__(self, limits: Limits, counts: Counts) -> None:
        self.limits = limits
        self.counts = counts
        # claimWork has turns of its own: a burst of long polls arriving (each with its claim to
        # try) must not hold up every other call behind it, nor these wait behind the others.
        self.turns = Turns(limits.max_running, counts)
        self.long_poll_turns = Turns(limits.max_running, counts)
        self.streams_held: dict[str, int] = {}  # streams per client (`StreamSlot`); none held: no key

    def admit(self, kind: str, scope: Scope | None = None) -> ASGIApp | None:
        """Count a request of `kind` (`kind_of()`) in: None, or the answer that turns it away.
        With its `scope`, a request whose body is on its way is counted in flight only once the
        body has arrived (`receiving()`), and a stream is counted as its client's too."""
        counts = self.counts
        if kind == "request":
            if scope is not None and body_pending(scope):
                scope[ARRIVAL_KEY] = Arrival(self)
                counts.receiving += 1
                return None
            try:
                self._enter()
            except Overloaded as error:
                return render(error, CallInfo(""))
        elif kind == "long_poll":
            bound = self.limits.max_long_polls
            if bound and counts.long_polls >= bound:
                counts.emptied += 1
                return _answer_empty
            counts.long_polls += 1
        elif kind == "stream":
            bound = self.limits.max_streams
            if bound and counts.streams >= bound:
                counts.refused += 1
                full = StreamsFull(
                    f"this server serves {counts.streams} streams, the most it takes at once; "
                    "open the stream again after Retry-After seconds"
                )
                return render(full, CallInfo(""))
            if scope is not None:
                slot = scope[STREAM_KEY] = StreamSlot(self, _address(scope))
                if not _names_its_client(scope):  # else counted once authenticated (`hold_as()`)
                    try:
                        slot.hold_as(None)
                    except TooManyStreams as error:
                        del scope[STREAM_KEY]
                        return render(error, CallInfo(""))
            counts.streams += 1
        return None

    def receiving(self, scope: Scope, receive: Receive) -> Receive:
        """The receive to hand the app: for a request whose body is on its way (`admit()`), one
        that counts it in flight once the body's last part is received, or raises `Overloaded`
        (503) then if the process has as many as it takes."""
        arrival: Arrival | None = scope.get(ARRIVAL_KEY)
        return receive if arrival is None else arrival.watching(receive)

    def leave(self, kind: str, scope: Scope | None = None) -> None:
        """A request `admit()` let in has been answered."""
        if kind == "request":
            arrival: Arrival | None = None if scope is None else scope.get(ARRIVAL_KEY)
            if arrival is None or arrival.state == _IN_FLIGHT:
                self.counts.in_flight -= 1
            elif arrival.state == _RECEIVING:
                self.counts.receiving -= 1
        elif kind == "long_poll":
            self.counts.long_polls -= 1
        elif kind == "stream":
            self.counts.streams -= 1
            slot: StreamSlot | None = None if scope is None else scope.get(STREAM_KEY)
            if slot is not None:
                slot.release()

    def _enter(self) -> None:
        """Count a request in flight, or raise `Overloaded` if the process has as many as it takes."""
        counts = self.counts
        bound = self.limits.max_in_flight
        if bound and counts.in_flight >= bound:
            counts.refused += 1
            raise Overloaded(
                f"this server has {counts.in_flight} requests in flight, the most it takes at once; "
                "nothing was done: send the request again after Retry-After seconds"
            )
        counts.in_flight += 1


BODY_PENDING = "taskyard.body_pending"  # in a request's scope: the server says its body is on its way
ARRIVAL_KEY = "taskyard.arrival"  # a request's `Arrival`, put in its scope by `Shedding.admit()`
STREAM_KEY = "taskyard.stream_slot"  # a stream's `StreamSlot`, put in its scope by `Shedding.admit()`
_EVENT_STREAM = "/api/events/v1/stream"
_RECEIVING, _IN_FLIGHT, _REFUSED = "receiving", "in flight", "refused"


def body_pending(scope: Scope) -> bool:
    """Whether the request's body is still on its way. The server says so (`BODY_PENDING`, set
    by `cli/connections.py` from a head's end to its body's); an app served otherwise (a test's)
    counts any request that declares a body."""
    said = scope.get(BODY_PENDING)
    if said is not None:
        return bool(said)
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


class Arrival:
    """A request whose body was on its way when it came in: `receiving` until the app receives the
    body's last part, then in flight like any other, or refused (`Overloaded`, raised from that
    receive: the route answers it 503, nothing of the request done)."""

    __slots__ = ("_shedding", "state")

    def __init__(self, shedding: Shedding) -> None:
        self._shedding = shedding
        self.state = _RECEIVING

    def watching(self, receive: Receive) -> Receive:
        async def arriving() -> Message:
            message = await receive()
            last = message["type"] == "http.request" and not message.get("more_body")
            if last and self.state == _RECEIVING:
                self._arrived()
            return message

        return arriving

    def _arrived(self) -> None:
        shedding = self._shedding
        shedding.counts.receiving -= 1
        try:
            shedding._enter()
        except Overloaded:
            self.state = _REFUSED
            raise
        self.state = _IN_FLIGHT


def _address(scope: Scope) -> str:
    """The client's address: the peer's, or the one a trusted proxy named (`App.trust_proxies()`)."""
    client = scope.get("client")
    return f"address {client[0] if client else ''}"


def _names_its_client(scope: Scope) -> bool:
    """An event stream carrying credentials (Hawk, or a bewit): counted as the clientId they
    authenticate, once they do. A request whose credentials fail is answered 401 at once."""
    if scope["path"] != _EVENT_STREAM and not scope["path"].startswith(_EVENT_STREAM + "/"):
        return False
    if b"bewit=" in scope.get("query_string", b""):
        return True
    return any(name == b"authorization" for name, _ in scope["headers"])


class StreamSlot:
    """A stream's share of its client's (see the module's docstring): held as the address's, or,
    once an event stream's credentials are checked, as the clientId's; given back once."""

    __slots__ = ("_address", "_key", "_shedding")

    def __init__(self, shedding: Shedding, address: str) -> None:
        self._shedding = shedding
        self._address = address
        self._key: str | None = None

    def hold_as(self, client_id: str | None) -> None:
        """Hold the stream as `client_id`'s (None: anonymous, its address's); `TooManyStreams`
        (429) if that client holds its share already. A slot held already stays as it is."""
        if self._key is not None:
            return
        limits, held = self._shedding.limits, self._shedding.streams_held
        if client_id is None:
            key, bound, who = self._address, limits.max_anonymous_streams_per_client, "anonymous streams"
        else:
            key, bound, who = f"client {client_id}", limits.max_streams_per_client, "streams"
        count = held.get(key, 0)
        if bound and count >= bound:
            self._shedding.counts.refused_client += 1
            raise TooManyStreams(
                f"this client ({key}) holds {count} {who}, the most one client may hold at once; "
                "close one, or open the stream again after Retry-After seconds"
            )
        held[key] = count + 1
        self._key = key

    def release(self) -> None:
        key, self._key = self._key, None
        if key is not None:
            held = self._shedding.streams_held
            if held[key] <= 1:
                del held[key]
            else:
                held[key] -= 1


def hold_stream_as(scope: Scope, client_id: str | None) -> None:
    """An API endpoint has authenticated the request: if it is a stream, hold it as that client's
    (`StreamSlot.hold_as()`; `TooManyStreams` beyond its share)."""
    slot: StreamSlot | None = scope.get(STREAM_KEY)
    if slot is not None:
        slot.hold_as(client_id)


async def _answer_empty(scope: Scope, receive: Receive, send: Send) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(_EMPTY_CLAIM)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": _EMPTY_CLAIM})


class Turns:
    """At most `bound` requests worked on at once (0: no bound); the others wait in the order they
    asked (see the module's docstring). A turn is a `Turn`, given back once."""

    def __init__(self, bound: int, counts: Counts) -> None:
        self.bound = bound
        self.counts = counts
        self.running = 0  # turns taken and not yet free again
        self._releasing = 0  # of those, given back in this turn of the loop, with nobody waiting
        self._queue: deque[asyncio.Future[None]] = deque()

    def turn(self) -> Turn:
        return Turn(self)

    async def _take(self, timeout: float | None) -> bool:
        """Wait for a turn, at most `timeout` seconds (None: as long as it takes); False if none came."""
        if not self.bound or (self.running < self.bound and not self._queue):
            self.running += 1
            return True
        given: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(given)
        self.counts.waiting += 1
        try:
            if timeout is None:
                await given
            else:
                async with asyncio.timeout(timeout):
                    await given
        except (TimeoutError, asyncio.CancelledError) as exc:
            if given.done() and not given.cancelled():  # the turn came as the wait ended: pass it on
                self._give_back()
            else:
                given.cancel()  # left in the queue; `_give_back` skips it
            if isinstance(exc, asyncio.CancelledError):
                raise
            return False
        finally:
            self.counts.waiting -= 1
        return True

    def _give_back(self) -> None:
        """A turn is over: the first request still waiting takes it. With none waiting, the turn is
        free again only from the loop's next turn on (`_release`): a request worked on whole in one
        step of the loop (SQLite's writer runs on the loop, so a createTask may never yield) gives
        its turn back in the very step that took it, and without that every request arriving in
        one turn of the loop would be worked on in it, however many there were."""
        if not self.bound:
            self.running -= 1
        elif not self._hand_on():
            self._releasing += 1
            if self._releasing == 1:
                asyncio.get_running_loop().call_soon(self._release)

    def _hand_on(self) -> bool:
        """Give a turn to the first request still waiting; False if none is."""
        while self._queue:
            waiter = self._queue.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return True
        return False

    def _release(self) -> None:
        """The turns given back in the loop's last turn, with nobody waiting then: to whoever
        waits now, the rest free."""
        releasing, self._releasing = self._releasing, 0
        for _ in range(releasing):
            if not self._hand_on():
                self.running -= 1


class Turn:
    """One request's turn: `take()` it (waiting if need be), `give_back()` once done; giving back
    a turn not taken, or twice, does nothing."""

    __slots__ = ("_held", "_turns")

    def __init__(self, turns: Turns) -> None:
        self._turns = turns
        self._held = False

    async def take(self, timeout: float | None) -> None:
        """Wait for the turn; `Overloaded` (503) if it takes over `timeout` seconds."""
        if self._held:
            return
        if not await self._turns._take(timeout):
            self._turns.counts.refused += 1
            raise Overloaded(
                f"this server stayed busy with other requests for {timeout} s; "
                "nothing was done: send the request again after Retry-After seconds"
            )
        self._held = True

    def give_back(self) -> None:
        if self._held:
            self._held = False
            self._turns._give_back()
