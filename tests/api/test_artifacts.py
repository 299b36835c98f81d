"""The artifact API through the app on the local blob store: every storage type, rule and bad input."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from taskyard.api.app import build_app
from taskyard.artifacts.local import LocalStore
from taskyard.model import dates
from taskyard.queue import resolvers
from tests.api.artifact_helpers import create, expires, put, running_task
from tests.api.conftest import TASK_QUEUE_ID, Api, assert_error
from tests.api.fuzzing import Req, send
from tests.conftest import SECRET_KEY, FakeClock

QUEUE = TASK_QUEUE_ID.replace("/", "%2F")
MAX_BYTES = 1000


@pytest.fixture
def blobs(tmp_path: Path, clock: FakeClock) -> LocalStore:
    """The API's queue keeps s3 artifacts in a local store, served by the API itself."""
    return LocalStore(
        str(tmp_path / "blobs"), "http://testserver", SECRET_KEY, max_bytes=MAX_BYTES, clock=clock
    )


@pytest.fixture
def store(blobs: LocalStore) -> LocalStore:
    return blobs


async def put_url(api: Api, task_id: str, name: str, content_type: str = "text/plain", **body: Any) -> str:
    response = await create(api, task_id, name, {"storageType": "s3", "contentType": content_type, **body})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert set(answer) == {"storageType", "contentType", "expires", "putUrl"}
    return str(answer["putUrl"])


async def upload(
    api: Api, task_id: str, name: str, data: bytes, content_type: str = "text/plain", encoding: str = ""
) -> str:
    """createArtifact (declaring `encoding` if any), then PUT `data` with that Content-Encoding."""
    url = await put_url(
        api, task_id, name, content_type, **({"contentEncoding": encoding} if encoding else {})
    )
    sent = await put(api, url, data, content_type, **({"content-encoding": encoding} if encoding else {}))
    assert sent.status_code == 200, sent.text
    return url


async def download(api: Api, task_id: str, name: str) -> httpx.Response:
    redirect = await api.call("GET", f"/task/{task_id}/runs/0/artifacts/{name}")
    assert redirect.status_code == 303, redirect.text
    return await api.client.get(redirect.headers["location"])


async def test_s3_upload_and_download(api: Api, store: LocalStore) -> None:
    task_id, _ = await running_task(api)
    packed = gzip.compress(b"hello log\n")
    await upload(api, task_id, "public/logs/live.log", packed, "text/plain", "gzip")
    await upload(api, task_id, "private/secret.json", b'{"s": 1}', "application/json")

    anonymous = await api.call("GET", f"/task/{task_id}/runs/0/artifacts/public/logs/live.log", creds=None)
    assert anonymous.status_code == 303, anonymous.text
    assert anonymous.headers["x-taskcluster-artifact-storage-type"] == "s3"
    assert anonymous.json() == {"storageType": "s3", "url": anonymous.headers["location"]}
    blob = await api.client.get(anonymous.headers["location"])
    assert blob.status_code == 200
    assert blob.headers["content-type"] == "text/plain"
    assert blob.headers["content-encoding"] == "gzip"
    assert blob.content == b"hello log\n"  # httpx undoes the gzip encoding

    assert_error(
        await api.call("GET", f"/task/{task_id}/artifacts/private/secret.json", creds=None),
        403,
        "InsufficientScopes",
    )
    private = await api.call("GET", f"/task/{task_id}/artifacts/private/secret.json")
    assert private.status_code == 303
    fetched = await api.client.get(private.headers["location"])
    assert (fetched.content, fetched.headers["content-type"]) == (b'{"s": 1}', "application/json")
    unsigned = private.headers["location"].split("?")[0]
    assert (await api.client.get(unsigned)).status_code == 403


async def test_blob_urls_are_signed_and_bounded(api: Api, store: LocalStore, clock: FakeClock) -> None:
    task_id, _ = await running_task(api)
    response = await create(api, task_id, "public/a.txt", {"storageType": "s3", "contentType": "text/plain"})
    put_url = response.json()["putUrl"]
    wrong_type = await api.client.put(put_url, content=b"x", headers={"content-type": "text/html"})
    assert_error(wrong_type, 403, "InsufficientScopes")
    tampered = put_url.replace("public/a.txt", "public/b.txt")
    assert (
        await api.client.put(tampered, content=b"x", headers={"content-type": "text/plain"})
    ).status_code == 403
    too_big = await api.client.put(
        put_url, content=b"x" * (MAX_BYTES + 1), headers={"content-type": "text/plain"}
    )
    assert_error(too_big, 413, "InputTooLarge")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit is found while streaming
        for _ in range(3):
            yield b"y" * 400

    streamed = await api.client.put(put_url, content=chunks(), headers={"content-type": "text/plain"})
    assert_error(streamed, 413, "InputTooLarge")
    assert not any(p.is_file() for p in Path(store.directory).rglob("*"))
    clock.advance(46 * 60)
    late = await api.client.put(put_url, content=b"x", headers={"content-type": "text/plain"})
    assert_error(late, 403, "InsufficientScopes", names=["expired"])
    bogus = await api.client.get("http://testserver/api/queue/v1/_blobs/x?e=1&s=2")
    assert bogus.status_code in (403, 404)


@pytest.mark.parametrize(
    "name",
    [
        "public/../x",
        "..",
        "a/../../b",
        "public/\x00x",
        "public/caf\u00e9",
        "public/\x7f",
        "public/./x",
        "public/.",
        ".",
        "public//x",
        "public/x/",
        "/public/x",
        "/",
    ],
)
async def test_bad_names(api: Api, store: LocalStore, name: str) -> None:
    task_id, _ = await running_task(api)
    response = await create(api, task_id, name, {"storageType": "s3", "contentType": "text/plain"})
    assert response.status_code == 400, response.text
    encoded = quote(name, safe="").replace(".", "%2E")
    got = await api.call("GET", f"/task/{task_id}/runs/0/artifacts/{encoded}")
    assert got.status_code == 400, got.text
    link = await create(api, task_id, "public/link", {"storageType": "link", "artifact": name})
    assert link.status_code == 400, link.text


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("public/./x", "may not contain a `.` path segment"),
        ("public/.", "may not contain a `.` path segment"),
        ("public//x", "may not contain an empty path segment"),
        ("public/x/", "may not contain an empty path segment"),
        ("/public/x", "may not contain an empty path segment"),
    ],
)
async def test_names_a_client_could_normalize_are_refused_naming_the_rule(
    api: Api, store: LocalStore, name: str, rule: str
) -> None:
    """`public/./x` beside `public/x` would be one URL to a client that normalizes it, two artifacts
    here: refused, so that every name is one URL whatever the client does with it."""
    task_id, _ = await running_task(api)
    body = {"storageType": "s3", "contentType": "text/plain"}
    assert (await create(api, task_id, "public/x", body)).status_code == 200
    refused = await create(api, task_id, name, body)
    assert_error(refused, 400, "InvalidRequestArguments", names=["URL parameter name", rule])
    listed = await api.call("GET", f"/task/{task_id}/runs/0/artifacts")
    assert [a["name"] for a in listed.json()["artifacts"]] == ["public/x"]


async def test_expires_rules(api: Api, store: LocalStore) -> None:
    task_id, _ = await running_task(api)
    body = {"storageType": "s3", "contentType": "text/plain"}
    past = await api.call(
        "POST", f"/task/{task_id}/runs/0/artifacts/public/a", {**body, "expires": expires(api, -1)}
    )
    assert_error(past, 400, "InputError", names=["expires"])
    late = await api.call(
        "POST", f"/task/{task_id}/runs/0/artifacts/public/a", {**body, "expires": expires(api, 24 * 400)}
    )
    assert_error(late, 400, "InputError", names=["task expiration"])
    unknown = await create(api, "fKz7yXv3Q0m2p9Wq1bC4dA", "public/a", body)
    assert_error(unknown, 400, "InputError")
    assert_error(await create(api, task_id, "public/a", body, run=1), 400, "InputError")
    assert_error(
        await create(api, task_id, "public/a", {"storageType": "azure"}), 400, "InputValidationError"
    )


async def test_reference_link_error(api: Api, store: LocalStore) -> None:
    task_id, _ = await running_task(api)
    await upload(api, task_id, "public/log.txt", b"log")
    assert (
        await create(
            api,
            task_id,
            "public/ref",
            {"storageType": "reference", "url": "https://e.com/r", "contentType": "text/html"},
        )
    ).json() == {"storageType": "reference"}
    assert (
        await create(api, task_id, "public/link", {"storageType": "link", "artifact": "public/log.txt"})
    ).status_code == 200
    assert (
        await create(
            api,
            task_id,
            "public/err",
            {"storageType": "error", "reason": "file-missing-on-worker", "message": "gone"},
        )
    ).status_code == 200
    assert (
        await create(api, task_id, "private/link", {"storageType": "link", "artifact": "public/log.txt"})
    ).status_code == 200
    assert (
        await create(api, task_id, "public/to-private", {"storageType": "link", "artifact": "private/link"})
    ).status_code == 200
    assert (
        await create(api, task_id, "public/c1", {"storageType": "link", "artifact": "public/c2"})
    ).status_code == 200
    assert (
        await create(api, task_id, "public/c2", {"storageType": "link", "artifact": "public/c1"})
    ).status_code == 200
    base = f"/task/{task_id}/runs/0/artifacts/"

    ref = await api.call("GET", base + "public/ref", creds=None)
    assert (ref.status_code, ref.headers["location"]) == (303, "https://e.com/r")
    link = await api.call("GET", base + "public/link", creds=None)
    assert (link.status_code, link.headers["x-taskcluster-artifact-storage-type"]) == (303, "s3")
    err = await api.call("GET", base + "public/err", creds=None)
    assert (err.status_code, err.json()) == (424, {"reason": "file-missing-on-worker", "message": "gone"})
    assert err.headers["x-taskcluster-artifact-storage-type"] == "error"
    denied = await api.call("GET", base + "public/to-private", creds=None)
    assert_error(denied, 403, "InsufficientScopes", names=["public/to-private", "private/link"])
    assert_error(await api.call("GET", base + "public/c1"), 400, "InputError", names=["cycle"])
    assert_error(await api.call("GET", base + "public/nope"), 404, "ResourceNotFound")
    content = await api.call("GET", f"/task/{task_id}/artifact-content/public/err")
    assert content.json() == {"storageType": "error", "reason": "file-missing-on-worker", "message": "gone"}
    info = await api.call("GET", f"/task/{task_id}/runs/0/artifact-info/public/link")
    assert info.json()["storageType"] == "link" and info.json()["contentType"] == "application/binary"
    finish = await api.call("PUT", base + "public/log.txt", {"uploadId": "x"})
    assert_error(finish, 400, "InputError")
    assert_error(await api.call("PUT", base + "public/none", {}), 404, "ResourceNotFound")


async def test_recreate_rules(api: Api, store: LocalStore) -> None:
    task_id, _ = await running_task(api)
    s3 = {"storageType": "s3", "contentType": "text/plain"}
    assert (await create(api, task_id, "public/a", s3)).status_code == 200
    assert (await create(api, task_id, "public/a", s3)).status_code == 200  # identical: fine
    assert_error(
        await create(api, task_id, "public/a", {**s3, "contentType": "text/html"}), 409, "RequestConflict"
    )
    ref = {"storageType": "reference", "url": "https://e.com/1", "contentType": "text/html"}
    assert_error(await create(api, task_id, "public/a", ref), 409, "RequestConflict")
    assert (await create(api, task_id, "public/r", ref)).status_code == 200
    assert (await create(api, task_id, "public/r", {**ref, "url": "https://e.com/2"})).status_code == 200
    assert (
        await create(api, task_id, "public/r", {"storageType": "link", "artifact": "public/a"})
    ).status_code == 200
    info = (await api.call("GET", f"/task/{task_id}/artifact-info/public/r")).json()
    assert (info["storageType"], info["contentType"]) == ("link", "text/html")


async def test_run_state_rules(api: Api, store: LocalStore, clock: FakeClock) -> None:
    s3 = {"storageType": "s3", "contentType": "text/plain"}
    done, _ = await running_task(api)
    assert (await api.call("POST", f"/task/{done}/runs/0/completed")).status_code == 200
    assert_error(await create(api, done, "public/late", s3), 409, "RequestConflict")
    broken, creds = await running_task(api, retries=0)
    reported = await api.call("POST", f"/task/{broken}/runs/0/exception", {"reason": "malformed-payload"})
    assert reported.status_code == 200
    assert (await create(api, broken, "public/late", s3, creds=creds)).status_code == 200
    clock.advance(26 * 60)
    assert_error(await create(api, broken, "public/later", s3), 409, "RequestConflict")
    pending, _ = await api.create_task()
    assert_error(await create(api, pending, "public/a", s3), 400, "InputError")


async def test_list_paging_and_sweep(api: Api, store: LocalStore, clock: FakeClock) -> None:
    task_id, _ = await running_task(api)
    names = [f"public/n{i}" for i in range(5)]
    for name in reversed(names):
        await upload(api, task_id, name, b"x")
    seen, token = [], None
    while True:
        query = {"limit": "2", **({"continuationToken": token} if token else {})}
        page = (await api.call("GET", f"/task/{task_id}/runs/0/artifacts", query=query)).json()
        seen += [a["name"] for a in page["artifacts"]]
        token = page.get("continuationToken")
        if not token:
            break
    assert seen == names
    latest = (await api.call("GET", f"/task/{task_id}/artifacts")).json()
    assert [a["name"] for a in latest["artifacts"]] == names
    assert_error(await api.call("GET", f"/task/{task_id}/runs/1/artifacts"), 404, "ResourceNotFound")
    assert_error(
        await api.call("GET", f"/task/{task_id}/runs/0/artifacts", creds=None), 403, "InsufficientScopes"
    )
    assert_error(
        await api.call("GET", f"/task/{task_id}/runs/0/artifacts", query={"continuationToken": "!!"}),
        400,
        "InputError",
    )

    clock.advance(2 * 3600)  # past the artifacts' expiry, not yet past the sweep's grace
    expired = await api.call("GET", f"/task/{task_id}/runs/0/artifacts/public/n0", creds=None)
    assert_error(expired, 410, "ResourceExpired")
    assert any(p.is_file() for p in Path(store.directory).rglob("*"))
    clock.advance(3600)
    assert await resolvers.sweep_expired(api.queue) >= 5
    assert not any(p.is_file() for p in Path(store.directory).rglob("*"))
    gone = await api.call("GET", f"/task/{task_id}/runs/0/artifacts/public/n0", creds=None)
    assert_error(gone, 404, "ResourceNotFound")


async def test_a_blob_that_cannot_be_deleted_does_not_stop_the_sweep(
    api: Api, store: LocalStore, clock: FakeClock
) -> None:
    good, _ = await running_task(api)
    await upload(api, good, "public/good", b"x")
    bad, _ = await running_task(api)
    await upload(api, bad, "public/bad", b"x")
    # The bad blob's file is now a directory with something in it: the store can't delete it.
    (blob,) = [p for p in (Path(store.directory) / bad).rglob("*") if p.is_file() and p.suffix != ".meta"]
    blob.unlink()
    blob.mkdir()
    (blob / "stray").write_bytes(b"x")
    clock.advance(3 * 3600)
    assert await resolvers.sweep_expired(api.queue) >= 1
    gone = await api.call("GET", f"/task/{good}/runs/0/artifacts/public/good", creds=None)
    assert_error(gone, 404, "ResourceNotFound")
    # The bad one is set aside, its row kept so its blob is not forgotten, and not tried at once again.
    kept = await api.call("GET", f"/task/{bad}/runs/0/artifacts/public/bad", creds=None)
    assert_error(kept, 410, "ResourceExpired")
    assert api.queue.metrics.value("resolver_rows_set_aside_total", resolver="expiry-sweeper") == 1
    await resolvers.sweep_expired(api.queue)
    assert api.queue.metrics.value("resolver_rows_set_aside_total", resolver="expiry-sweeper") == 1


async def test_a_declared_length_past_the_limit_is_refused_before_any_upload(
    api: Api, store: LocalStore
) -> None:
    task_id, _ = await running_task(api)
    body = {"storageType": "s3", "contentType": "text/plain", "contentLength": MAX_BYTES + 1}
    refused = await create(api, task_id, "public/huge.bin", body)
    assert_error(refused, 413, "InputTooLarge", names=["body.contentLength"])
    assert (await api.call("GET", f"/task/{task_id}/runs/0/artifacts")).json()["artifacts"] == []
    fits = await create(api, task_id, "public/huge.bin", {**body, "contentLength": MAX_BYTES})
    assert fits.status_code == 200


# Upload URLs on the local store write once, while the run takes artifacts, with what was declared.


async def test_an_upload_url_writes_once(api: Api, store: LocalStore) -> None:
    task_id, _ = await running_task(api)
    url = await put_url(api, task_id, "public/a.txt")
    too_big = await put(api, url, b"x" * (MAX_BYTES + 1))
    assert_error(too_big, 413, "InputTooLarge")  # a failed upload does not use the URL up
    assert (await put(api, url, b"first")).status_code == 200
    again = await put(api, url, b"second")
    assert_error(again, 403, "InsufficientScopes", names=["already uploaded", "writes once"])
    assert (await download(api, task_id, "public/a.txt")).content == b"first"

    # Re-creating the artifact (a worker retrying, say) answers a new URL, which writes once too.
    newer = await put_url(api, task_id, "public/a.txt")
    assert newer != url
    assert_error(await put(api, url, b"third"), 403, "InsufficientScopes")
    assert (await put(api, newer, b"fourth")).status_code == 200
    assert_error(await put(api, newer, b"fifth"), 403, "InsufficientScopes", names=["already uploaded"])
    assert (await download(api, task_id, "public/a.txt")).content == b"fourth"


async def test_a_newer_url_replaces_an_unused_one(api: Api, store: LocalStore) -> None:
    task_id, _ = await running_task(api)
    older = await put_url(api, task_id, "public/a.txt")
    newer = await put_url(api, task_id, "public/a.txt")
    assert_error(await put(api, older, b"old"), 403, "InsufficientScopes", names=["replaced"])
    assert (await put(api, newer, b"new")).status_code == 200
    assert (await download(api, task_id, "public/a.txt")).content == b"new"


@pytest.mark.parametrize("resolution", ["completed", "failed"])
async def test_no_upload_once_the_run_is_resolved(api: Api, store: LocalStore, resolution: str) -> None:
    task_id, creds = await running_task(api)
    url = await put_url(api, task_id, "public/late.txt")
    assert (await api.call("POST", f"/task/{task_id}/runs/0/{resolution}", creds=creds)).status_code == 200
    late = await put(api, url, b"late")
    assert_error(late, 403, "InsufficientScopes", names=[resolution, "can no longer be uploaded"])
    missing = await download(api, task_id, "public/late.txt")
    assert_error(missing, 404, "ResourceNotFound")
    assert not any(p.is_file() for p in Path(store.directory).rglob("*"))


async def test_uploads_after_an_exception_last_as_long_as_creating_artifacts(
    api: Api, store: LocalStore, clock: FakeClock
) -> None:
    task_id, creds = await running_task(api, retries=0)
    early = await put_url(api, task_id, "public/early.txt")
    later = await put_url(api, task_id, "public/later.txt")
    body = {"reason": "malformed-payload"}
    reported = await api.call("POST", f"/task/{task_id}/runs/0/exception", body, creds=creds)
    assert reported.status_code == 200
    assert (await put(api, early, b"in time")).status_code == 200
    clock.advance(26 * 60)  # past the 25 minutes an exception leaves for artifacts
    assert_error(await put(api, later, b"too late"), 403, "InsufficientScopes", names=["exception"])
    assert (await download(api, task_id, "public/early.txt")).content == b"in time"


async def test_the_upload_url_signs_the_declared_content_encoding(api: Api, store: LocalStore) -> None:
    task_id, _ = await running_task(api)
    packed = gzip.compress(b"zipped\n")
    gzipped = await put_url(api, task_id, "public/z.txt", contentEncoding="gzip")
    for sent in ({}, {"content-encoding": "br"}, {"content-encoding": "identity"}):
        refused = await put(api, gzipped, packed, **sent)
        assert_error(refused, 403, "InsufficientScopes", names=["signed for Content-Encoding gzip"])
    assert (await put(api, gzipped, packed, **{"content-encoding": "GZip"})).status_code == 200
    served = await download(api, task_id, "public/z.txt")
    assert (served.headers["content-encoding"], served.content) == ("gzip", b"zipped\n")

    # Declaring none admits what TaskCluster's clients send, plain or gzip, and nothing else; a
    # plain body can't be labelled gzip (and served so).
    plain = await put_url(api, task_id, "public/p.txt")
    mislabelled = await put(api, plain, b"plain\n", **{"content-encoding": "gzip"})
    assert_error(mislabelled, 400, "InputError", names=["not gzip"])
    refused = await put(api, plain, b"plain\n", **{"content-encoding": "br"})
    assert_error(refused, 403, "InsufficientScopes", names=["identity or gzip", "contentEncoding"])
    assert (await put(api, plain, b"plain\n", **{"content-encoding": "identity"})).status_code == 200
    served = await download(api, task_id, "public/p.txt")
    assert "content-encoding" not in served.headers and served.content == b"plain\n"
    undeclared = await put_url(api, task_id, "public/u.txt")
    assert (await put(api, undeclared, packed, **{"content-encoding": "gzip"})).status_code == 200
    served = await download(api, task_id, "public/u.txt")
    assert (served.headers["content-encoding"], served.content) == ("gzip", b"zipped\n")

    tampered = gzipped.replace("ce=gzip", "ce=br")
    assert_error(await put(api, tampered, packed, **{"content-encoding": "br"}), 403, "InsufficientScopes")
    unknown = await create(
        api,
        task_id,
        "public/c",
        {"storageType": "s3", "contentType": "text/plain", "contentEncoding": "compress"},
    )
    assert_error(unknown, 400, "InputValidationError", names=["contentEncoding"])
    changed = await create(api, task_id, "public/z.txt", {"storageType": "s3", "contentType": "text/plain"})
    assert_error(changed, 409, "RequestConflict")
    same = await create(
        api,
        task_id,
        "public/p.txt",
        {"storageType": "s3", "contentType": "text/plain", "contentEncoding": "identity"},
    )
    assert same.status_code == 200, same.text  # identity, declared or not, is one encoding


async def test_of_two_puts_racing_with_one_url_one_is_kept(api: Api, store: LocalStore) -> None:
    task_id, _ = await running_task(api)
    url = await put_url(api, task_id, "public/race.txt")
    reading, go_on = asyncio.Event(), asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        reading.set()  # the server reads the body: this PUT was allowed to begin
        yield b"slow "
        await go_on.wait()
        yield b"body"

    first = asyncio.create_task(put(api, url, slow()))
    await reading.wait()
    assert (await put(api, url, b"fast body")).status_code == 200
    go_on.set()
    assert_error(await first, 403, "InsufficientScopes", names=["already uploaded"])
    assert (await download(api, task_id, "public/race.txt")).content == b"fast body"
    assert not [p for p in Path(store.directory).rglob("*.part")]


@pytest.mark.parametrize("length", [b"\xb2", b"\xd9\xa3", b"1" * 5000, b"-1", b""])
async def test_a_signed_put_with_a_bad_content_length_is_a_4xx(
    api: Api, store: LocalStore, length: bytes
) -> None:
    task_id, _ = await running_task(api)
    url = await put_url(api, task_id, "public/a.txt")
    sent = await api.client.put(
        url, content=b"x", headers=[(b"content-type", b"text/plain"), (b"content-length", length)]
    )
    assert 400 <= sent.status_code < 500, sent.text
    assert_error(sent, sent.status_code, "InputTooLarge" if length == b"1" * 5000 else "InputError")
    assert (await put(api, url, b"x")).status_code == 200  # and the URL is not used up


async def test_an_upload_the_client_abandons_is_a_4xx_and_leaves_the_url_unused(
    api: Api, store: LocalStore
) -> None:
    task_id, _ = await running_task(api)
    url = await put_url(api, task_id, "public/a.txt")
    path, _, query = url.removeprefix("http://testserver").partition("?")
    headers = ((b"host", b"testserver"), (b"content-type", b"text/plain"))
    abandoned = Req("PUT", path, query, headers, b"half of a body", chunks=2, hang_up=True)
    answer = await send(build_app(api.services), abandoned)
    assert (answer.status, answer.json_error()) == (400, True), answer
    assert b"MalformedPayload" in answer.body
    assert not [p for p in Path(store.directory).rglob("*.part")]
    assert (await put(api, url, b"whole")).status_code == 200


@pytest.mark.parametrize(
    ("sent", "status", "content"),
    [
        ("bytes=0-1", 206, b"he"),
        ("bytes=-2", 206, b"lo"),
        ('"x"', 200, b"hello"),  # malformed: ignored, as S3 ignores it
        ("bytes=3-1", 200, b"hello"),
        ("items=0-1", 200, b"hello"),
        ("bytes=5-", 416, None),  # beyond the blob: our error, not Starlette's plain text
        ("bytes=-0", 416, None),
    ],
)
async def test_a_blob_download_honours_a_range_and_answers_bad_ones_in_json(
    api: Api, store: LocalStore, sent: str, status: int, content: bytes | None
) -> None:
    task_id, _ = await running_task(api)
    await upload(api, task_id, "public/r.txt", b"hello")
    url = (await api.call("GET", f"/task/{task_id}/runs/0/artifacts/public/r.txt")).headers["location"]
    got = await api.client.get(url, headers={"range": sent})
    if content is None:
        assert_error(got, status, "RangeNotSatisfiable", names=["not within the blob's 5 bytes"])
    else:
        assert (got.status_code, got.content) == (status, content)


@pytest.mark.parametrize(
    "key",
    ["x" * 300 + "/0/public/a", "../../0/public/a", "a/b/c", f"{'A' * 22}/0/a", "fKz7yXv3Q0m2p9Wq1bC4dA/x/a"],
)
async def test_a_blob_key_that_names_no_artifact_is_404_even_when_signed(
    api: Api, store: LocalStore, key: str
) -> None:
    """Only artifacts' keys are ever signed; one that is not is refused before any file name is made."""
    for method in ("GET", "PUT"):
        url = store.get_url(key, api.clock() + dates.HOUR)
        assert_error(await api.client.request(method, url), 404, "ResourceNotFound")


async def test_a_nul_in_a_content_type_is_400_on_both_backends(api: Api, store: LocalStore) -> None:
    """PostgreSQL's text cannot hold a NUL: an artifact's contentType with one was a 500 there."""
    task_id, _ = await running_task(api)
    for storage_type, extra in [("s3", {}), ("reference", {"url": "https://example.com/x"})]:
        body = {"storageType": storage_type, "contentType": "text/\x00", **extra}
        refused = await create(api, task_id, f"public/{storage_type}", body)
        assert_error(refused, 400, "InputValidationError", names=["body.contentType", "NUL"])
