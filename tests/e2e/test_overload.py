"""Overload is input too: a real `taskyard serve` with tiny bounds sheds what it can't take at once,
cheaply and in TaskCluster's words, keeps answering ping, hangs up on clients that never send,
and loses nothing it answered 200 for.

The bounds are held deterministically: a request is in flight while its answer waits for a client
that reads none of it (a large blob's, whose bytes fill every buffer on the way), and a claimWork
whose body is kept back is a long poll for as long as the test keeps it. (A request whose body is
kept back is not in flight: that is `test_client_shares.py`'s.)
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
import requests

from tests.e2e import helpers
from tests.e2e.conftest import Server, start_server

WORKER = {"workerGroup": "wg", "workerId": "w1", "tasks": 1}
HANG_GUARD = 30.0  # seconds a socket read may block before the test gives up (not a speed limit)


@pytest.fixture(scope="module")
def tight(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server taking 2 requests and 1 claimWork long poll at once, and 0.5 s for a request head."""
    args = ["--max-in-flight", "2", "--max-long-polls", "1", "--head-timeout", "0.5"]
    running = start_server(module_db_url, tmp_path_factory.mktemp("tight"), name="tight", extra_args=args)
    yield running
    running.stop()


BLOB_BYTES = 32 * 1024 * 1024  # far beyond the socket buffers between server and client (4 MiB each)


@pytest.fixture(scope="module")
def big_blob(tight: Server) -> str:
    """The path of a 32 MiB artifact's blob on `tight`."""
    queue, tq = tight.client(), helpers.task_queue_id("big-blob")
    task_id = helpers.create(queue, tq)
    worker = tight.client(helpers.claim_one(queue, tq)["credentials"])
    expires = helpers.iso(helpers.now() + timedelta(hours=1))
    body = {"storageType": "s3", "contentType": "application/octet-stream", "expires": expires}
    put_url = worker.createArtifact(task_id, 0, "private/big", body)["putUrl"]
    headers = {"Content-Type": "application/octet-stream"}
    assert (
        requests.put(put_url, data=b"x" * BLOB_BYTES, headers=headers, timeout=HANG_GUARD).status_code == 200
    )
    signed = queue.buildSignedUrl("getArtifact", task_id, 0, "private/big")
    moved = requests.get(signed, allow_redirects=False, timeout=HANG_GUARD)
    assert moved.status_code == 303, moved.text
    return str(moved.headers["location"]).removeprefix(tight.root_url)


def held_answer(server: Server, path: str) -> socket.socket:
    """A GET whose answer the client never reads: in flight until the socket closes."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(HANG_GUARD)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
    return sock


def held_request(server: Server, method: str, path: str) -> socket.socket:
    """A request whose head is sent and whose body is kept back: in flight until the socket closes."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=HANG_GUARD)
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    )
    sock.sendall(head.encode())
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    """Block until the server closes `sock` (True) or sends something (False)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def ping(server: Server) -> requests.Response:
    return requests.get(f"{server.api}/ping", timeout=HANG_GUARD)


def test_beyond_the_in_flight_bound_a_request_gets_503_and_ping_still_answers(
    tight: Server, tq: str, big_blob: str
) -> None:
    task_id = helpers.create(tight.client(), tq)
    held = [held_answer(tight, big_blob) for _ in range(2)]
    try:
        url = f"{tight.api}/task/{helpers.slug()}/status"
        refused = helpers.wait_for(
            lambda: [r for r in [requests.get(url, timeout=HANG_GUARD)] if r.status_code == 503],
            what="a 503 while two requests are held in flight",
        )[0]
        assert refused.headers["retry-after"] == "1"
        body = refused.json()
        assert set(body) == {"code", "message", "requestInfo"}
        assert body["code"] == "ServiceUnavailable"
        assert "requests in flight" in body["message"]
        assert ping(tight).json()["alive"] is True  # ping is never counted, never refused
        # Long polls are bounded apart: a worker arriving meanwhile still gets its task.
        reply = helpers.signed("POST", f"{tight.api}/claim-work/{tq}", WORKER, tight.credentials)
        assert reply.status_code == 200
        assert [claim["status"]["taskId"] for claim in reply.json()["tasks"]] == [task_id]
        # A body on its way takes no place; once it has all come, it is refused as any request.
        late = held_request(tight, "PUT", f"/api/queue/v1/task/{helpers.slug()}")
        with late:
            late.sendall(b" " * 98 + b"}")  # the rest of its 100 bytes
            answer = late.makefile("rb").readline()
        assert answer.startswith(b"HTTP/1.1 503 "), answer
    finally:
        for sock in held:
            sock.close()
    # Once they are gone, requests are answered again (403: anonymous callers may not read tasks).
    helpers.wait_for(lambda: requests.get(url, timeout=HANG_GUARD).status_code == 403, what="a 403 again")


def test_beyond_the_long_poll_bound_claim_work_answers_no_task_at_once(tight: Server, tq: str) -> None:
    queue, worker = tight.client(), WORKER
    held = held_request(tight, "POST", f"/api/queue/v1/claim-work/{tq}")
    try:
        pending = [helpers.create(queue, tq)]

        def answered_no_task() -> bool:
            # Admitted (the held one not counted yet), claimWork claims the pending task at once:
            # put another one there and ask again. Beyond the bound it gets no task, at once.
            if queue.claimWork(tq, worker)["tasks"]:
                pending.append(helpers.create(queue, tq))
                return False
            return True

        helpers.wait_for(answered_no_task, what="claimWork answered with no task while a long poll is held")
        assert queue.status(pending[-1])["status"]["state"] == "pending"
    finally:
        held.close()
    # With the slot free, claimWork claims again.
    helpers.wait_for(lambda: queue.claimWork(tq, worker)["tasks"], what="a claim once the slot is free")


@pytest.mark.parametrize("sent", [b"", b"GET /api/queue/v1/ping HTTP/1.1\r\nHost: 127.0.0.1\r\n"])
def test_a_connection_that_never_sends_its_head_is_closed(tight: Server, sent: bytes) -> None:
    sock = socket.create_connection(("127.0.0.1", tight.port), timeout=HANG_GUARD)
    with sock:
        sock.sendall(sent)
        assert closed_by_server(sock)
    assert ping(tight).status_code == 200


def test_a_request_whose_head_arrives_in_time_is_answered(tight: Server) -> None:
    sock = socket.create_connection(("127.0.0.1", tight.port), timeout=HANG_GUARD)
    with sock:
        sock.sendall(b"GET /api/queue/v1/ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(12).startswith(b"HTTP/1.1 200")


def test_nothing_answered_200_is_lost_when_creates_are_shed(tight: Server, tq: str) -> None:
    """Callers retry a 503 with the same body; every task answered 200 exists afterwards."""
    created: list[str] = []
    shed: list[int] = []
    errors: list[str] = []

    def caller() -> None:
        for _ in range(10):
            task_id, body = helpers.slug(), helpers.definition(tq)
            url = f"{tight.api}/task/{task_id}"
            for _attempt in range(10_000):
                reply = helpers.signed("PUT", url, body, tight.credentials)
                if reply.status_code != 503:
                    break
                shed.append(1)
                assert reply.headers.get("retry-after") is not None
            if reply.status_code == 200:
                created.append(task_id)
            else:
                errors.append(f"{reply.status_code}: {reply.text[:200]}")

    threads = [threading.Thread(target=caller) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(created) == 80
    queue = tight.client()
    for task_id in created:
        assert queue.status(task_id)["status"]["taskId"] == task_id


@pytest.fixture
def impatient(db_url: str, tmp_path: Path) -> Iterator[Server]:
    """A server taking 2 requests in flight, working on 1 at a time, and giving a body 0.5 s (its
    own database: a SQLite file serves one server at a time, and `tight` has the module's)."""
    args = ["--max-in-flight", "2", "--max-running", "1", "--body-timeout", "0.5"]
    # A long poll waits long enough for the test's createTask, however slow the machine.
    running = start_server(db_url, tmp_path, name="impatient", extra_args=args, claim_work_timeout=60)
    yield running
    running.stop()


def test_a_body_that_does_not_arrive_is_answered_408_and_hung_up_on(impatient: Server) -> None:
    """A client that sends its head and then its body a byte at a time (or never) holds its
    connection only until the body timeout: then it is answered 408 and hung up on."""
    held = [held_request(impatient, "PUT", f"/api/queue/v1/task/{helpers.slug()}") for _ in range(2)]
    try:
        for sock in held:
            sock.sendall(b" ")  # a byte of the body: a trickle, not the body
        for sock in held:
            answer = sock.makefile("rb").read()  # up to the server's close
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408 "), answer[:200]
            assert b"connection: close" in head.lower()
            assert orjson.loads(body)["code"] == "RequestTimeout"
    finally:
        for sock in held:
            sock.close()
    # Requests are answered all along (403: anonymous callers may not read).
    url = f"{impatient.api}/task/{helpers.slug()}/status"
    helpers.wait_for(lambda: requests.get(url, timeout=HANG_GUARD).status_code == 403, what="a 403 again")
    assert ping(impatient).status_code == 200


def test_a_body_that_arrives_is_answered_as_ever(impatient: Server, tq: str) -> None:
    task_id = helpers.create(impatient.client(), tq)
    assert impatient.client().status(task_id)["status"]["state"] == "pending"


def test_a_waiting_long_poll_hands_back_its_turn(impatient: Server, tq: str) -> None:
    """With one request worked on at a time, a claimWork waiting for work takes none: a createTask
    sent meanwhile is answered, and the waiting worker gets that task."""
    claimed: list[requests.Response] = []
    waiting = threading.Thread(
        target=lambda: claimed.append(
            helpers.signed("POST", f"{impatient.api}/claim-work/{tq}", WORKER, impatient.credentials)
        )
    )
    waiting.start()
    try:
        helpers.wait_for(
            lambda: requests.get(f"{impatient.root_url}/metrics", timeout=HANG_GUARD).text.count(
                "\ntaskyard_long_polls 1.0"
            ),
            what="the long poll waiting",
        )
        task_id = helpers.create(impatient.client(), tq)
    finally:
        waiting.join(HANG_GUARD)
    assert [claim["status"]["taskId"] for claim in claimed[0].json()["tasks"]] == [task_id]
