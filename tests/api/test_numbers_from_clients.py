"""Numbers read from client text: signed-URL expiries, runIds, Content-Length, ports, limits.

Python's `'²'.isdigit()` is true and `int('²')` raises; `int()` reads '٣' and refuses more than
4300 digits. Whatever a client sends in these places is answered with a 4xx, never a 500.
"""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from taskyard.artifacts.local import LocalStore
from taskyard.model import paging
from taskyard.queue import livelogs
from tests.api.conftest import TASK_QUEUE_ID, Api, Credentials, assert_error
from tests.conftest import SECRET_KEY, FakeClock

QUEUE = TASK_QUEUE_ID.replace("/", "%2F")
BLOBS = "/api/queue/v1/_blobs/"
LIVELOG = "/api/queue/v1/_livelog/"
TASK_ID = "fKz7yXv3Q0m2p9Wq1bC4dA"
HUGE = "1" * 5000  # past int()'s limit on digits

# Expiries (`e`) as a client may send them, percent-encoded, none of them a valid signed URL's.
BAD_EXPIRIES = [
    "%C2%B2",  # '²': isdigit() is true, int() raises
    "%D9%A3",  # '٣', an Arabic-Indic digit: int() reads it as 3
    "%EF%BC%91",  # U+FF11, a fullwidth digit one
    "%C2%B9%C2%B2%C2%B3",
    HUGE,
    "9" * 17,
    "-1",
    "%2B1",  # '+1'
    "%201",  # ' 1'
    "1%0A",  # '1\n'
    "1e3",
    "0x10",
    "",
]
BAD_SIGNATURES = ["", "x", "%C2%B2", "s" * 5000]


@pytest.fixture
def blobs(tmp_path: Path, clock: FakeClock) -> LocalStore:
    """The API's queue keeps s3 artifacts in a local store, served by the API itself."""
    return LocalStore(str(tmp_path / "blobs"), "http://testserver", SECRET_KEY, max_bytes=1000, clock=clock)


@pytest.fixture
def store(blobs: LocalStore) -> LocalStore:
    return blobs


async def running_task(api: Api) -> tuple[str, Credentials]:
    task_id, _ = await api.create_task()
    response = await api.call("POST", f"/claim-work/{QUEUE}", {"workerGroup": "wg", "workerId": "w1"})
    (claim,) = response.json()["tasks"]
    return task_id, Credentials.from_response(claim["credentials"])


async def live_log_url(api: Api) -> tuple[str, str]:
    """A running task whose live log has begun, and the signed URL streaming it."""
    task_id, creds = await running_task(api)
    path = f"/task/{task_id}/runs/0/live-log/public/logs/live.log"
    response = await api.call("POST", path, {"offset": 0, "data": "x"}, creds=creds)
    assert response.status_code == 200, response.text
    return task_id, str(response.json()["url"])


def refused(response: httpx.Response) -> None:
    """A 4xx with TaskCluster's error body."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    assert_error(response, response.status_code, response.json().get("code", "?"))


async def test_the_reported_superscript_expiry_is_403_on_blobs_and_live_logs(
    api: Api, store: LocalStore
) -> None:
    for method in ("GET", "PUT", "HEAD"):
        # The URL as reported: its key names no artifact's blob, so it is refused before its expiry.
        response = await api.client.request(method, f"{BLOBS}a/b/c?e=%C2%B2&s=x")
        assert response.status_code == 404, (method, response.text)
        response = await api.client.request(method, f"{BLOBS}{TASK_ID}/0/c?e=%C2%B2&s=x")
        assert response.status_code == 403, (method, response.text)
    assert_error(await api.client.get(f"{BLOBS}{TASK_ID}/0/c?e=%C2%B2&s=x"), 403, "InsufficientScopes")
    got = await api.client.get(f"{LIVELOG}{TASK_ID}/0?e=%C2%B2&s=x")
    assert_error(got, 403, "InsufficientScopes", names=["expiry"])


@pytest.mark.parametrize("expires", BAD_EXPIRIES)
async def test_no_expiry_a_client_sends_is_a_500(api: Api, store: LocalStore, expires: str) -> None:
    for url in (f"{BLOBS}{TASK_ID}/0/public/a?e={expires}&s=x", f"{LIVELOG}{TASK_ID}/0?e={expires}&s=x"):
        for method in ("GET", "PUT"):
            if method == "PUT" and url.startswith(LIVELOG):
                continue
            response = await api.client.request(method, url, headers={"content-type": "text/plain"})
            assert_error(response, 403, "InsufficientScopes")


@pytest.mark.parametrize("signature", BAD_SIGNATURES)
async def test_no_signature_a_client_sends_is_a_500(api: Api, store: LocalStore, signature: str) -> None:
    task_id, url = await live_log_url(api)
    base, query = url.split("?")
    expires = dict(part.split("=") for part in query.split("&"))["e"]
    assert_error(await api.client.get(f"{base}?e={expires}&s={signature}"), 403, "InsufficientScopes")
    blob = f"{BLOBS}{task_id}/0/public/a?e={expires}&s={signature}"
    assert_error(await api.client.get(blob), 403, "InsufficientScopes")


@pytest.mark.parametrize("run_id", ["%C2%B2", "%D9%A3", HUGE, "-1", "1.5", "%201", "01x"])
async def test_a_live_log_url_with_a_bad_run_id_is_400(api: Api, run_id: str) -> None:
    task_id, url = await live_log_url(api)
    query = url.split("?")[1]
    response = await api.client.get(f"{LIVELOG}{task_id}/{run_id}?{query}")
    assert_error(response, 400, "InvalidRequestArguments", names=["runId"])


async def test_a_signed_live_log_url_for_an_absurd_run_is_404(api: Api) -> None:
    url = livelogs.stream_url(api.queue, TASK_ID, 10**9, api.clock() + 60_000)
    refused(await api.client.get(url))


@pytest.mark.parametrize("length", [b"\xb2", b"\xd9\xa3", HUGE.encode(), b"-1", b"1e3", b" "])
async def test_a_bad_content_length_is_a_4xx(api: Api, store: LocalStore, length: bytes) -> None:
    """httpx lets the header through to the app; a real server would refuse most of these first."""
    task_id, _ = await running_task(api)
    put = await api.client.put(
        f"{BLOBS}{task_id}/0/public/a.txt?e=1&s=x",
        content=b"x",
        headers=[(b"content-type", b"text/plain"), (b"content-length", length)],
    )
    refused(put)
    posted = await api.client.post(
        f"http://testserver/api/queue/v1/task/{task_id}/runs/0/completed",
        content=b"{}",
        headers=[(b"content-type", b"application/json"), (b"content-length", length)],
    )
    refused(posted)


@pytest.mark.parametrize(
    "headers",
    [
        [(b"host", b"testserver:" + HUGE.encode())],
        [(b"host", b"testserver:\xd9\xa3")],
        [(b"x-forwarded-port", HUGE.encode())],
        [(b"x-forwarded-port", b"\xb2")],
    ],
)
async def test_hosts_and_ports_a_client_sends_are_never_a_500(
    api: Api, headers: list[tuple[bytes, bytes]]
) -> None:
    signed = [*headers, (b"authorization", b"Hawk id=x")]  # only a signed request reads them
    response = await api.client.get(f"http://testserver/api/queue/v1/task/{TASK_ID}", headers=signed)
    refused(response)


@pytest.mark.parametrize("exp", [HUGE, "\u0663" * 10, "\u00b2"])
async def test_a_bewit_expiry_a_client_sends_is_never_a_500(api: Api, exp: str) -> None:
    bewit = base64.urlsafe_b64encode(f"root\\{exp}\\mac\\".encode()).decode().rstrip("=")
    response = await api.client.get(f"http://testserver/api/queue/v1/task/{TASK_ID}?bewit={quote(bewit)}")
    refused(response)


@pytest.mark.parametrize("limit", ["5\n", "\u0663", "\u00b2", "-1", "", "1.5", "+5"])
async def test_a_page_limit_is_ascii_digits(api: Api, limit: str) -> None:
    response = await api.call("GET", "/provisioners", query={"limit": limit})
    assert_error(response, 400, "InvalidRequestArguments", names=["limit"])


def test_a_huge_page_limit_is_the_largest_page() -> None:
    assert paging.parse({"limit": HUGE}).limit == paging.MAX_LIMIT
    assert paging.parse({"limit": "0"}).limit == 1
