"""The local blob store on its own: signatures, the size limit, metadata and deletion."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from taskyard.artifacts import open_blob_store
from taskyard.artifacts.local import LocalStore
from taskyard.artifacts.port import BadSignature
from taskyard.model.errors import ConfigError, InputError, InputTooLarge, ResourceNotFound
from tests.conftest import FakeClock

KEY = "fKz7yXv3Q0m2p9Wq1bC4dA/0/public/a/b.txt"


def store(tmp_path: Path, clock: FakeClock) -> LocalStore:
    return LocalStore(str(tmp_path), "http://h:1/", "key", max_bytes=10, clock=clock)


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


def put_url(local: LocalStore, expires: int, encoding: str = "identity", token: str = "t0k") -> str:
    return local.put_url(
        KEY, content_type="text/plain", content_encoding=encoding, expires=expires, token=token
    )


async def test_round_trip_and_delete(tmp_path: Path, clock: FakeClock) -> None:
    local = store(tmp_path, clock)
    url = put_url(local, clock() + 1000, "gzip")
    assert url.startswith("http://h:1/api/queue/v1/_blobs/" + KEY)
    assert local.verify_put(KEY, query(url), "text/plain", "gzip") == "t0k"
    assert await local.write(KEY, chunks(b"\x1f", b"\x8bcde"), "text/plain", "gzip") == 5
    blob = local.open(KEY)
    assert (blob.path.read_bytes(), blob.content_type, blob.content_encoding) == (
        b"\x1f\x8bcde",
        "text/plain",
        "gzip",
    )
    await local.delete([KEY, "x/0/never"])
    with pytest.raises(ResourceNotFound):
        local.open(KEY)


async def test_signatures_and_limit(tmp_path: Path, clock: FakeClock) -> None:
    local = store(tmp_path, clock)
    url = local.get_url(KEY, clock() + 1000)
    with pytest.raises(BadSignature):
        local.verify_put(KEY, query(url), "", "identity")
    with pytest.raises(BadSignature):
        local.verify_get(KEY + "x", query(url))
    with pytest.raises(BadSignature):
        LocalStore(str(tmp_path), "http://h", "other", max_bytes=1, clock=clock).verify_get(KEY, query(url))
    clock.advance(2)
    with pytest.raises(BadSignature):
        local.verify_get(KEY, query(url))
    with pytest.raises(InputTooLarge):
        await local.write(KEY, chunks(b"123456", b"789012"), "text/plain", None)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_a_put_url_signs_its_content_type_encoding_and_token(tmp_path: Path, clock: FakeClock) -> None:
    local = store(tmp_path, clock)
    plain, packed = query(put_url(local, clock() + 1000)), query(put_url(local, clock() + 1000, "gzip"))
    assert "ce" not in plain and packed["ce"] == "gzip"
    assert local.verify_put(KEY, plain, "text/plain", "identity") == "t0k"
    for bad in (
        dict(plain, u="other"),
        dict(plain, u="t0k\nx"),
        dict(plain, ce="gzip"),  # claims an encoding the signature doesn't cover
        dict(packed, ce="br"),
        {k: v for k, v in packed.items() if k != "ce"},
        {k: v for k, v in plain.items() if k != "u"},
    ):
        with pytest.raises(BadSignature, match="signature does not match"):
            local.verify_put(KEY, bad, "text/plain", "identity")
    with pytest.raises(BadSignature, match="Content-Type"):
        local.verify_put(KEY, plain, "text/html", "identity")
    assert local.verify_put(KEY, plain, "text/plain", "gzip") == "t0k"  # as TaskCluster's clients send
    with pytest.raises(BadSignature, match="identity or gzip"):
        local.verify_put(KEY, plain, "text/plain", "br")
    with pytest.raises(BadSignature, match="signed for Content-Encoding gzip"):
        local.verify_put(KEY, packed, "text/plain", "identity")


async def test_a_refused_commit_keeps_nothing_and_leaves_the_old_blob(
    tmp_path: Path, clock: FakeClock
) -> None:
    local = store(tmp_path, clock)
    assert await local.write(KEY, chunks(b"first"), "text/plain", None) == 5

    async def refuse() -> None:
        raise BadSignature("no")

    with pytest.raises(BadSignature):
        await local.write(KEY, chunks(b"second"), "text/html", None, refuse)
    blob = local.open(KEY)
    assert (blob.path.read_bytes(), blob.content_type, blob.content_encoding) == (
        b"first",
        "text/plain",
        None,
    )
    assert sorted(p.name.endswith(".part") for p in tmp_path.rglob("*") if p.is_file()) == [False, False]


def test_open_blob_store(tmp_path: Path) -> None:
    assert isinstance(
        open_blob_store(f"file://{tmp_path}", root_url="http://h", secret_key="k", max_bytes=1), LocalStore
    )
    for bad in ("ftp://x", "file://", "s3://"):
        with pytest.raises(ConfigError):
            open_blob_store(bad, root_url="http://h", secret_key="k", max_bytes=1)


async def test_a_body_labelled_gzip_must_be_gzip(tmp_path: Path, clock: FakeClock) -> None:
    local = store(tmp_path, clock)
    for body in ((b"plain",), (b"\x1f", b"x"), (b"",)):
        with pytest.raises(InputError, match="not gzip"):
            await local.write(KEY, chunks(*body), "text/plain", "gzip")
    assert not any(p.is_file() for p in tmp_path.rglob("*"))
