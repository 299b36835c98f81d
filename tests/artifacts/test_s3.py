"""The S3 store's presigned upload URLs: short-lived, and signed for the declared encoding."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest

from taskyard.artifacts import s3
from taskyard.model import artifacts
from tests.conftest import FakeClock

KEY = "fKz7yXv3Q0m2p9Wq1bC4dA/0/public/a.txt"


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> s3.S3Store:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return s3.from_url("s3://bucket?endpoint=http://127.0.0.1:1", clock)


def query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


def test_upload_urls_live_shorter_than_the_local_stores(store: s3.S3Store, clock: FakeClock) -> None:
    assert store.put_url_ttl_ms == artifacts.S3_PUT_URL_TTL_MS < artifacts.PUT_URL_TTL_MS
    url = store.put_url(
        KEY,
        content_type="text/plain",
        content_encoding="identity",
        expires=clock() + store.put_url_ttl_ms,
        token="t",
    )
    signed = query(url)
    assert signed["X-Amz-Expires"] == str(store.put_url_ttl_ms // 1000)
    assert "content-encoding" not in signed["X-Amz-SignedHeaders"]
    assert "t" not in signed.values()  # S3 can't check the queue's upload token


def test_a_declared_encoding_is_signed(store: s3.S3Store, clock: FakeClock) -> None:
    url = store.put_url(
        KEY, content_type="text/plain", content_encoding="gzip", expires=clock() + 60_000, token="t"
    )
    assert "content-encoding" in query(url)["X-Amz-SignedHeaders"].split(";")
