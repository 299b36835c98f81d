"""Blob stores for artifacts, chosen by URL: `file:///dir` (local) or `s3://bucket?endpoint=...`."""

from __future__ import annotations

from taskyard.artifacts.port import BlobStore
from taskyard.model import dates
from taskyard.model.errors import ConfigError
from taskyard.model.types import Clock


def open_blob_store(
    url: str, *, root_url: str, secret_key: str, max_bytes: int, clock: Clock = dates.now_ms
) -> BlobStore:
    """The blob store named by `url`."""
    if url.startswith("file://"):
        from taskyard.artifacts.local import LocalStore

        directory = url[len("file://") :]
        if not directory:
            raise ConfigError("artifacts", url, "a file:// URL names a directory: file:///path/to/dir")
        return LocalStore(directory, root_url, secret_key, max_bytes=max_bytes, clock=clock)
    if url.startswith("s3://"):
        from taskyard.artifacts import s3

        return s3.from_url(url, clock, max_bytes)
    raise ConfigError("artifacts", url, "must start with file:// or s3://")


__all__ = ["BlobStore", "open_blob_store"]
