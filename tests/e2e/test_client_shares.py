"""One client can't take what a process serves to all (`api/shedding.py`, `cli/connections.py`),
probed on a real `taskyard serve` through its sockets:

- requests whose bodies trickle in a byte at a time are not counted in flight: with more of them
  than `--max-in-flight`, a createTask and a worker's report are still answered;
- one address holds at most `--max-connections-per-client` connections, a trusted proxy's
  (loopback, 127.0.0.1, by default) aside. The tests' other addresses are other loopback ones
  (127.0.0.2, 127.0.0.3: the kernel routes all of 127/8 locally), which nobody trusts;
- one address holds at most `--max-anonymous-streams-per-client` live-log follows (and other
  anonymous streams), one clientId at most `--max-streams-per-client` event streams; others
  still open theirs.

Bounds are held, never timed: the slow bodies get an hour (`--body-timeout 3600`), the held
connections too (`--head-timeout 3600`), and the task whose log is followed a claim of an hour.
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import mohawk
import orjson
import pytest
import requests

from tests.e2e import helpers
from tests.e2e.conftest import Server, start_server

WORKER = {"workerGroup": "wg", "workerId": "w1"}
HANG_GUARD = 30.0  # seconds a socket read may block before the test gives up (not a speed limit)
LIVE_LOG = "public/logs/live.log"
EVENTS = "/api/events/v1/stream?binding=exchange/taskcluster-queue/v1/task-defined:%23"


def connect(server: Server, source: str = "127.0.0.1") -> socket.socket:
    """A connection to `server` from the loopback address `source`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(HANG_GUARD)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", server.port))
    return sock


def ask(sock: socket.socket, target: str, headers: str = "") -> None:
    host = f"127.0.0.1:{sock.getpeername()[1]}"  # as signed: Hawk covers the port
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\n{headers}\r\n".encode())


def head_of(sock: socket.socket) -> tuple[int, bytes]:
    """The status and head of the answer on `sock` (its body, if any, is left unread)."""
    received = b""
    while b"\r\n\r\n" not in received:
        data = sock.recv(4096)
        assert data, f"closed before a whole head: {received!r}"
        received += data
    head = received.partition(b"\r\n\r\n")[0]
    return int(head.split(b" ", 2)[1]), head


def whole_answer(sock: socket.socket) -> tuple[int, bytes, bytes]:
    """Status, head and body of an answer the server closes the connection after."""
    received = b""
    while data := sock.recv(65536):
        received += data
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head, body


def gauge(server: Server, name: str) -> float | None:
    """The value of an unlabelled gauge in `/metrics`, or None if the metrics are refused."""
    reply = requests.get(f"{server.root_url}/metrics", timeout=HANG_GUARD)
    if reply.status_code == 503:
        return None
    found = re.search(rf"^{name} (\S+)$", reply.text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def shed(server: Server, how: str) -> float:
    text = requests.get(f"{server.root_url}/metrics", timeout=HANG_GUARD).text
    found = re.search(rf'^taskyard_requests_shed_total{{how="{how}"}} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


# --- Slow bodies ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def narrow(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server taking 8 requests in flight, and giving a body an hour."""
    args = ["--max-in-flight", "8", "--body-timeout", "3600"]
    running = start_server(module_db_url, tmp_path_factory.mktemp("narrow"), name="narrow", extra_args=args)
    yield running
    running.stop()


def slow_body(server: Server) -> socket.socket:
    """A createTask whose head is sent, and of whose 1,000-byte body one byte is."""
    sock = connect(server)
    head = (
        f"PUT /api/queue/v1/task/{helpers.slug()} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    )
    sock.sendall(head.encode())
    return sock


def test_bodies_that_trickle_in_do_not_keep_calls_with_a_body_from_being_answered(
    narrow: Server, tq: str
) -> None:
    """Twice as many trickling bodies as requests the process takes in flight: a createTask, a
    claimWork and the worker's report are answered all the same (they were 503 when a request
    counted in flight from its head on)."""
    slow = [slow_body(narrow) for _ in range(16)]
    try:
        # All of them in: receiving (or, on a server counting them in flight, every slot taken).
        helpers.wait_for(
            lambda: gauge(narrow, "taskyard_requests_receiving") in (None, 16.0),
            what="the 16 slow bodies received",
        )
        queue = narrow.client()
        task_id = helpers.create(queue, tq)
        for sock in slow:
            sock.sendall(b" ")  # a trickle: one more byte each
        claim = helpers.claim_one(queue, tq, WORKER)
        worker = narrow.client(claim["credentials"])
        for sock in slow:
            sock.sendall(b" ")
        assert worker.reportCompleted(task_id, 0)["status"]["state"] == "completed"
        assert requests.get(f"{narrow.api}/ping", timeout=HANG_GUARD).status_code == 200
        assert gauge(narrow, "taskyard_requests_receiving") == 16.0  # none of them answered or gone
    finally:
        for sock in slow:
            sock.close()
    helpers.wait_for(lambda: gauge(narrow, "taskyard_requests_receiving") == 0.0, what="none receiving")


def test_a_trickled_body_that_arrives_is_answered(narrow: Server, tq: str) -> None:
    """A body sent a piece at a time is a request like any other once it has all come."""
    body = orjson.dumps(helpers.definition(tq))
    task_id = helpers.slug()
    sock = connect(narrow)
    with sock:
        sock.sendall(
            f"PUT /api/queue/v1/task/{task_id} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        )
        for piece in range(0, len(body), 100):
            sock.sendall(body[piece : piece + 100])
        status, _ = head_of(sock)
    assert status == 403  # anonymous: refused by its scopes, so read and checked as a whole
    assert gauge(narrow, "taskyard_requests_receiving") == 0.0


# --- Connections per address ---------------------------------------------------------------------


@pytest.fixture
def capped(db_url: str, tmp_path: Path) -> Iterator[Server]:
    """A server taking 4 connections from one address, and giving a request head an hour (its
    own database, as each server here: a SQLite file serves one server at a time)."""
    args = ["--max-connections-per-client", "4", "--head-timeout", "3600"]
    running = start_server(db_url, tmp_path, name="capped", extra_args=args)
    yield running
    running.stop()


def pinged(server: Server, source: str) -> int:
    with connect(server, source) as sock:
        ask(sock, "/api/queue/v1/ping", "Connection: close\r\n")
        return whole_answer(sock)[0]


def test_one_address_beyond_its_connections_is_refused_and_others_are_not(capped: Server) -> None:
    held = [connect(capped, "127.0.0.2") for _ in range(4)]
    try:
        for sock in held:  # each one answered: each one counted
            ask(sock, "/api/queue/v1/ping")
            assert head_of(sock)[0] == 200
        with connect(capped, "127.0.0.2") as extra:
            ask(extra, "/api/queue/v1/ping")
            status, head, body = whole_answer(extra)  # answered at once, then closed
        assert status == 503, head
        assert b"retry-after: 5" in head.lower() and b"connection: close" in head.lower()
        assert orjson.loads(body)["code"] == "ServiceUnavailable"
        assert "connections" in orjson.loads(body)["message"]
        assert pinged(capped, "127.0.0.3") == 200  # another address
        # The trusted proxy's address (loopback, by default) is not capped: its clients are many.
        local = [connect(capped) for _ in range(8)]
        with contextlib.ExitStack() as closing:
            for sock in local:
                closing.enter_context(sock)
            assert pinged(capped, "127.0.0.1") == 200
        assert shed(capped, "client_connections") >= 1
    finally:
        held.pop().close()
        # One closed: the address may connect again.
        helpers.wait_for(lambda: pinged(capped, "127.0.0.2") == 200, what="a connection from 127.0.0.2 again")
        for sock in held:
            sock.close()


@pytest.fixture
def behind_proxy(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """`capped`, trusting the proxy at 127.0.0.2 alone (`FORWARDED_ALLOW_IPS`)."""
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "127.0.0.2")
    args = ["--max-connections-per-client", "4", "--head-timeout", "3600"]
    running = start_server(db_url, tmp_path, name="behind-proxy", extra_args=args)
    yield running
    running.stop()


def test_the_trusted_proxies_are_the_ones_not_capped(behind_proxy: Server) -> None:
    with contextlib.ExitStack() as closing:
        for _ in range(8):  # the proxy's: not capped
            closing.enter_context(connect(behind_proxy, "127.0.0.2"))
        assert pinged(behind_proxy, "127.0.0.2") == 200
        for _ in range(4):  # loopback, trusted no more: capped as any address
            closing.enter_context(connect(behind_proxy))
        helpers.wait_for(lambda: pinged(behind_proxy, "127.0.0.1") == 503, what="127.0.0.1 refused")


# --- Streams per client --------------------------------------------------------------------------


@pytest.fixture
def followed(db_url: str, tmp_path: Path) -> Iterator[Server]:
    """A server serving 30 streams at once, with the default shares of one client."""
    args = ["--max-streams", "30"]
    running = start_server(db_url, tmp_path, name="followed", extra_args=args, claim_timeout=3600)
    yield running
    running.stop()


def live_log_url(server: Server, tq: str) -> str:
    """A running task's live log, as the anonymous role reaches it: the 303's signed URL."""
    queue = server.client()
    task_id = helpers.create(queue, tq)
    helpers.claim_one(queue, tq, WORKER)
    url = f"{server.api}/task/{task_id}/runs/0/live-log/{LIVE_LOG.replace('/', '%2F')}"
    appended = helpers.signed(
        "POST", url, {"offset": 0, "data": "hello\n", "final": False}, server.credentials
    )
    assert appended.status_code == 200, appended.text
    public = server.client({}).buildUrl("getLatestArtifact", task_id, LIVE_LOG)
    moved = requests.get(public, allow_redirects=False, timeout=HANG_GUARD)
    assert moved.status_code == 303, moved.text
    location = moved.headers["location"]
    return location.removeprefix(server.root_url)


def follow(
    server: Server, target: str, source: str = "127.0.0.1", headers: str = ""
) -> tuple[int, socket.socket]:
    sock = connect(server, source)
    ask(sock, target, headers)
    return head_of(sock)[0], sock


def signed_header(server: Server, target: str, credentials: dict[str, str] | None = None) -> str:
    """The Authorization header line for `GET target` (root's credentials unless others given)."""
    given = credentials or server.credentials
    sender = mohawk.Sender(
        credentials={"id": given["clientId"], "key": given["accessToken"], "algorithm": "sha256"},
        url=server.root_url + target,
        method="GET",
        content="",
        content_type="",
    )
    return f"Authorization: {sender.request_header}\r\n"


def follows_again(server: Server, target: str) -> bool:
    status, sock = follow(server, target)
    sock.close()
    return status == 200


def test_one_address_can_not_take_every_stream(followed: Server, tq: str) -> None:
    """30 anonymous follows of one public live log from one address: those beyond its share (25)
    are refused 429, and another address's follow, and an authenticated event stream, still open
    (they were 503 once one address had taken all 30)."""
    target = live_log_url(followed, tq)
    with contextlib.ExitStack() as closing:
        answers = []
        for _ in range(30):
            status, sock = follow(followed, target)
            closing.enter_context(sock)
            answers.append(status)
        status, sock = follow(followed, target, "127.0.0.2")
        closing.enter_context(sock)
        assert status == 200  # another client's follow
        status, sock = follow(followed, target, headers="X-Forwarded-For: 203.0.113.7\r\n")
        closing.enter_context(sock)
        assert status == 200  # another client, named by the trusted proxy (loopback, by default)
        status, sock = follow(followed, EVENTS, headers=signed_header(followed, EVENTS))
        closing.enter_context(sock)
        assert status == 200  # an event stream counted as its clientId's
        assert answers == [200] * 25 + [429] * 5  # the address's share, and no more
        with connect(followed) as refused:  # an anonymous event stream is the address's
            ask(refused, EVENTS, "Connection: close\r\n")
            status, head, body = whole_answer(refused)
        assert status == 429, head
        assert b"retry-after: 5" in head.lower()
        error = orjson.loads(body)
        assert error["code"] == "TooManyRequests" and "anonymous streams" in error["message"]
        assert shed(followed, "client_streams") >= 6
    # Once they are closed, the address follows again.
    helpers.wait_for(lambda: follows_again(followed, target), what="a follow once the others closed")


@pytest.fixture
def one_each(db_url: str, tmp_path: Path) -> Iterator[Server]:
    """A server letting one client hold 2 event streams, and one address 2 anonymous streams."""
    args = ["--max-streams-per-client", "2", "--max-anonymous-streams-per-client", "2"]
    running = start_server(db_url, tmp_path, name="one-each", extra_args=args)
    yield running
    running.stop()


def test_one_client_id_can_not_take_every_event_stream(one_each: Server) -> None:
    expires = helpers.iso(helpers.now() + timedelta(days=1))
    other = one_each.auth_client().createClient(
        "tests/streams/other",
        {"expires": expires, "scopes": ["events:stream:*"], "description": "a second client"},
    )
    other_credentials = {"clientId": other["clientId"], "accessToken": other["accessToken"]}
    with contextlib.ExitStack() as closing:

        def opened(source: str = "127.0.0.1", headers: str = "") -> int:
            status, sock = follow(one_each, EVENTS, source, headers)
            closing.enter_context(sock)
            return status

        assert [opened(headers=signed_header(one_each, EVENTS)) for _ in range(3)] == [200, 200, 429]
        # Counted by clientId, not by address: another client, from the same address, opens its own,
        # an anonymous caller there is counted as the address's, and the root client elsewhere is refused.
        assert opened(headers=signed_header(one_each, EVENTS, other_credentials)) == 200
        assert opened() == 403  # anonymous: within the address's share, then refused by its scopes
        assert opened("127.0.0.2", signed_header(one_each, EVENTS)) == 429


def test_credentials_that_fail_hold_no_stream(one_each: Server) -> None:
    """A stream whose credentials are refused is answered 401 and counted as nobody's."""
    wrong = {"clientId": one_each.credentials["clientId"], "accessToken": "wrong"}
    for _ in range(3):
        status, sock = follow(one_each, EVENTS, headers=signed_header(one_each, EVENTS, wrong))
        sock.close()
        assert status == 401
    with contextlib.ExitStack() as closing:
        for _ in range(2):
            status, sock = follow(one_each, EVENTS, headers=signed_header(one_each, EVENTS))
            closing.enter_context(sock)
            assert status == 200
