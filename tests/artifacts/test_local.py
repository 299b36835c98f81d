"""The local blob store on its own: signatures, the size limit, metadata and deletion."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from taskyard.artifacts import open_blob_store
from taskyard.artifacts.local import LocalStore
from taskyard.artifacts.port import BadSignature
from taskyard.model.errors import ConfigError, InputTooLarge, ResourceNotFound
from tests.conftest import FakeClock

KEY = "fKz7yXv3Q0m2p9Wq1bC4dA/0/public/a/b.txt"


def store(tmp_path: Path, clock: FakeClock) -> LocalStore:
    return LocalStore(str(tmp_path), "http://h:1/", "key", max_bytes=10, clock=clock)


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


async def test_round_trip_and_delete(tmp_path: Path, clock: FakeClock) -> None:
    local = store(tmp_path, clock)
    url = local.put_url(KEY, "text/plain", clock() + 1000)
    assert url.startswith("http://h:1/api/queue/v1/_blobs/" + KEY)
    local.verify("PUT", KEY, query(url), "text/plain")
    assert await local.write(KEY, chunks(b"abc", b"de"), "text/plain", "gzip") == 5
    blob = local.open(KEY)
    assert (blob.path.read_bytes(), blob.content_type, blob.content_encoding) == (
        b"abcde",
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
        local.verify("PUT", KEY, query(url), "")
    with pytest.raises(BadSignature):
        local.verify("GET", KEY + "x", query(url), "")
    with pytest.raises(BadSignature):
        LocalStore(str(tmp_path), "http://h", "other", max_bytes=1, clock=clock).verify(
            "GET", KEY, query(url), ""
        )
    clock.advance(2)
    with pytest.raises(BadSignature):
        local.verify("GET", KEY, query(url), "")
    with pytest.raises(InputTooLarge):
        await local.write(KEY, chunks(b"123456", b"789012"), "text/plain", None)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_open_blob_store(tmp_path: Path) -> None:
    assert isinstance(
        open_blob_store(f"file://{tmp_path}", root_url="http://h", secret_key="k", max_bytes=1), LocalStore
    )
    for bad in ("ftp://x", "file://", "s3://"):
        with pytest.raises(ConfigError):
            open_blob_store(bad, root_url="http://h", secret_key="k", max_bytes=1)
