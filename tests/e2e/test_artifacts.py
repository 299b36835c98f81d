"""Artifacts through TaskCluster's Python client against real servers: local store, then moto's S3."""

from __future__ import annotations

import gzip
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests
import taskcluster

from tests.e2e.conftest import Server, start_server
from tests.e2e.helpers import claim_one, create, iso, now, refused


def expires(hours: float = 1) -> str:
    return iso(now() + timedelta(hours=hours))


def worker_queue(server: Server, claim: dict[str, Any]) -> taskcluster.Queue:
    return server.client(claim["credentials"])


def put_s3(
    worker: taskcluster.Queue, task_id: str, name: str, data: bytes, content_type: str, encoding: str = ""
) -> str:
    """createArtifact (declaring `encoding` if any) and PUT `data` with it; answers the putUrl."""
    body = {"storageType": "s3", "contentType": content_type, "expires": expires()}
    headers = {"Content-Type": content_type}
    if encoding:
        body["contentEncoding"] = headers["Content-Encoding"] = encoding
    answer = worker.createArtifact(task_id, 0, name, body)
    reply = requests.put(answer["putUrl"], data=data, headers=headers, timeout=30)
    assert reply.status_code == 200, reply.text
    return str(answer["putUrl"])


def check_downloads(server: Server, task_id: str) -> None:
    """Public: anonymous and followed to the bytes; private: 403 anonymous, a signed URL works."""
    anonymous = server.client({})
    url = anonymous.buildUrl("getLatestArtifact", task_id, "public/build/log.txt")
    got = requests.get(url, timeout=30)
    assert got.status_code == 200, got.text
    assert got.content == b"hello\n" and got.headers["Content-Type"].startswith("text/plain")
    private = anonymous.buildUrl("getArtifact", task_id, 0, "private/secret.json")
    assert requests.get(private, timeout=30, allow_redirects=False).status_code == 403
    signed = server.client().buildSignedUrl("getArtifact", task_id, 0, "private/secret.json")
    fetched = requests.get(signed, timeout=30)
    assert (fetched.status_code, fetched.content) == (200, b'{"secret": true}')
    content = server.client().artifact(task_id, 0, "public/build/log.txt")
    assert content["storageType"] == "s3" and requests.get(content["url"], timeout=30).content == b"hello\n"


def s3_story(server: Server, tq: str) -> str:
    queue = server.client()
    task_id = create(queue, tq)
    worker = worker_queue(server, claim_one(queue, tq))
    put_s3(worker, task_id, "public/build/log.txt", b"hello\n", "text/plain")
    put_s3(worker, task_id, "private/secret.json", b'{"secret": true}', "application/json")
    check_downloads(server, task_id)
    return task_id


def test_s3_artifacts_on_the_local_store(server: Server, tq: str) -> None:
    task_id = s3_story(server, tq)
    queue = server.client()
    worker = queue  # root may create artifacts too
    packed = gzip.compress(b"zipped\n")
    used = put_s3(worker, task_id, "public/z.txt", packed, "text/plain", "gzip")
    got = requests.get(queue.buildUrl("getArtifact", task_id, 0, "public/z.txt"), timeout=30, stream=True)
    assert got.headers["Content-Encoding"] == "gzip" and got.raw.read() == packed
    headers = {"Content-Type": "text/plain", "Content-Encoding": "gzip"}
    again = requests.put(used, data=gzip.compress(b"other\n"), headers=headers, timeout=30)
    assert again.status_code == 403 and "already uploaded" in again.json()["message"]
    open_url = worker.createArtifact(
        task_id,
        0,
        "public/open.txt",
        {"storageType": "s3", "contentType": "text/plain", "expires": expires()},
    )["putUrl"]
    mislabelled = requests.put(open_url, data=b"plain\n", headers=headers, timeout=30)
    assert mislabelled.status_code == 400 and "not gzip" in mislabelled.json()["message"]
    queue.reportCompleted(task_id, 0)
    with refused(409, "RequestConflict"):
        put_s3(worker, task_id, "public/late.txt", b"x", "text/plain")
    late = requests.put(open_url, data=b"plain\n", headers={"Content-Type": "text/plain"}, timeout=30)
    assert late.status_code == 403 and "completed" in late.json()["message"]


def test_reference_link_error_and_paging(server: Server, tq: str) -> None:
    queue = server.client()
    task_id = create(queue, tq)
    worker = worker_queue(server, claim_one(queue, tq))
    put_s3(worker, task_id, "public/log.txt", b"hello\n", "text/plain")
    worker.createArtifact(
        task_id,
        0,
        "public/ref",
        {
            "storageType": "reference",
            "url": "https://example.com/r",
            "contentType": "text/html",
            "expires": expires(),
        },
    )
    worker.createArtifact(
        task_id, 0, "public/link", {"storageType": "link", "artifact": "public/log.txt", "expires": expires()}
    )
    worker.createArtifact(
        task_id,
        0,
        "public/err",
        {
            "storageType": "error",
            "reason": "file-missing-on-worker",
            "message": "no file",
            "expires": expires(),
        },
    )
    base = server.client({})
    ref = requests.get(
        base.buildUrl("getArtifact", task_id, 0, "public/ref"), allow_redirects=False, timeout=30
    )
    assert (ref.status_code, ref.headers["Location"]) == (303, "https://example.com/r")
    assert (
        requests.get(base.buildUrl("getArtifact", task_id, 0, "public/link"), timeout=30).content
        == b"hello\n"
    )
    err = requests.get(base.buildUrl("getArtifact", task_id, 0, "public/err"), timeout=30)
    assert (err.status_code, err.json()["reason"]) == (424, "file-missing-on-worker")
    names, token = [], None
    while True:
        page = queue.listArtifacts(
            task_id, 0, query={"limit": 2, **({"continuationToken": token} if token else {})}
        )
        names += [a["name"] for a in page["artifacts"]]
        token = page.get("continuationToken")
        if not token:
            break
    assert names == ["public/err", "public/link", "public/log.txt", "public/ref"]
    assert queue.latestArtifactInfo(task_id, "public/ref")["contentType"] == "text/html"


def test_upload_after_exception(server: Server, tq: str) -> None:
    queue = server.client()
    task_id = create(queue, tq, retries=0)
    worker = worker_queue(server, claim_one(queue, tq))
    worker.reportException(task_id, 0, {"reason": "malformed-payload"})
    put_s3(worker, task_id, "public/after.txt", b"late\n", "text/plain")
    url = queue.buildUrl("getArtifact", task_id, 0, "public/after.txt")
    assert requests.get(url, timeout=30).content == b"late\n"


def test_s3_artifacts_on_moto(moto_s3: str, db_url: str, tmp_path: Path, tq: str) -> None:
    url = f"s3://artifacts?endpoint={moto_s3}&region=us-east-1"
    server = start_server(db_url, tmp_path / "server", extra_args=["--artifacts", url])
    try:
        task_id = s3_story(server, tq)
        located = server.client().artifact(task_id, 0, "private/secret.json")["url"]
        assert located.startswith(moto_s3 + "/artifacts/") and "Signature" in located
        packed = gzip.compress(b"zipped\n")
        put_s3(server.client(), task_id, "public/z.txt", packed, "text/plain", "gzip")
        url = server.client({}).buildUrl("getArtifact", task_id, 0, "public/z.txt")
        got = requests.get(url, timeout=30, stream=True)
        assert got.headers["Content-Encoding"] == "gzip" and got.raw.read() == packed
    finally:
        server.stop()


def test_names_a_client_could_normalize_are_refused(server: Server, tq: str) -> None:
    """TaskCluster's client sends `public/./x` as one segment (`public%2F.%2Fx`); a client or proxy
    that decodes and normalizes it would read or write `public/x`. Such names are a 400 naming the
    rule, and `public/x` stays the one artifact."""
    queue = server.client()
    task_id = create(queue, tq)
    worker = worker_queue(server, claim_one(queue, tq))
    put_s3(worker, task_id, "public/x", b"the one\n", "text/plain")
    body = {"storageType": "s3", "contentType": "text/plain", "expires": expires()}
    for name, rule in [
        ("public/./x", "`.` path segment"),
        ("public/.", "`.` path segment"),
        ("public//x", "empty path segment"),
        ("public/x/", "empty path segment"),
        ("/public/x", "empty path segment"),
    ]:
        with refused(400, "InvalidRequestArguments") as info:
            worker.createArtifact(task_id, 0, name, body)
        assert rule in info.value.body["message"], (name, info.value.body)
    assert [a["name"] for a in queue.listArtifacts(task_id, 0)["artifacts"]] == ["public/x"]
