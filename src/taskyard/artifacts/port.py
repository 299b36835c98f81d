"""The blob-store port: where `s3` artifacts' bytes live, reached through signed, expiring URLs.

Uploaders PUT to `put_url()` and downloaders GET `get_url()`; the queue itself never holds the
bytes. A store whose URLs the API serves itself (the local directory) is also a `ServedStore`:
the API then refuses a PUT the queue no longer allows (see `queue/artifacts.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from taskyard.model.signed_urls import BadSignature

__all__ = ["BadSignature", "BlobStore", "ServedStore", "StoredBlob"]


@dataclass(frozen=True)
class StoredBlob:
    path: Path
    content_type: str
    content_encoding: str | None
    size: int


class BlobStore(Protocol):
    # The largest blob accepted: createArtifact refuses a larger declared contentLength, and the
    # local store also stops a larger upload. An S3 PUT is bounded only by what S3 enforces.
    max_bytes: int
    # How long an upload URL is good for, from when createArtifact answers it.
    put_url_ttl_ms: int

    def put_url(self, key: str, *, content_type: str, content_encoding: str, expires: int, token: str) -> str:
        """A URL accepting a PUT of the blob with this Content-Type and Content-Encoding (`identity`:
        none) until `expires` (epoch ms). A served store also names the upload `token` opened."""

    def get_url(self, key: str, expires: int) -> str:
        """A URL answering the blob until `expires` (epoch ms)."""

    async def delete(self, keys: list[str]) -> None:
        """Delete blobs; keys that hold nothing are ignored."""


@runtime_checkable
class ServedStore(Protocol):
    """A store whose signed URLs the API itself answers (`/api/queue/v1/_blobs/<key>`)."""

    max_bytes: int

    def verify_get(self, key: str, query: dict[str, str]) -> None:
        """Raise BadSignature unless the query signs a download of `key` and has not expired."""

    def verify_put(self, key: str, query: dict[str, str], content_type: str, content_encoding: str) -> str:
        """The upload token a PUT URL names; BadSignature unless it signs this key, Content-Type and
        Content-Encoding (`identity`: none) and has not expired."""

    async def write(
        self,
        key: str,
        chunks: AsyncIterator[bytes],
        content_type: str,
        content_encoding: str | None,
        commit: Callable[[], Awaitable[None]] | None = None,
    ) -> int:
        """Store the blob from `chunks`; InputTooLarge past `max_bytes`. `commit` runs once every
        byte is on disk and before the blob replaces any other; if it raises, nothing is kept."""

    def open(self, key: str) -> StoredBlob:
        """Where the blob is and how it was uploaded; ResourceNotFound if it is not there."""
