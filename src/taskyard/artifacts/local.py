"""A local-directory blob store, the embedded default. The API serves its signed URLs itself.

Blobs live at `<dir>/<taskId>/<runId>/<sha256 of the name>`, with a `.meta` JSON file beside
each (content type and encoding): hashing keeps every name a plain file, so `a` and `a/b` can
both exist and no name can reach outside the directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote, urlencode

from taskyard.artifacts.port import BadSignature, StoredBlob
from taskyard.model import signed_urls
from taskyard.model.errors import InputTooLarge, ResourceNotFound
from taskyard.model.types import Clock

BLOB_PREFIX = "/api/queue/v1/_blobs/"
URL_PURPOSE = "taskyard-blobs"


class LocalStore:
    """Blobs in a directory; URLs `<rootUrl>/api/queue/v1/_blobs/<key>?e=<expires>&s=<hmac>`."""

    def __init__(
        self, directory: str, root_url: str, secret_key: str, *, max_bytes: int, clock: Clock
    ) -> None:
        self.directory = Path(directory)
        self.base = root_url.rstrip("/") + BLOB_PREFIX
        self._signer = signed_urls.Signer(secret_key, URL_PURPOSE)
        self.max_bytes = max_bytes
        self._clock = clock

    def _url(self, method: str, key: str, expires: int, content_type: str) -> str:
        signature = self._signer.sign((method, key, str(expires), content_type))
        query = urlencode({"e": expires, "s": signature})
        return self.base + quote(key, safe="/") + "?" + query

    def put_url(self, key: str, content_type: str, expires: int) -> str:
        return self._url("PUT", key, expires, content_type)

    def get_url(self, key: str, expires: int) -> str:
        return self._url("GET", key, expires, "")

    def verify(self, method: str, key: str, query: dict[str, str], content_type: str) -> None:
        expires = signed_urls.expiry(query, "blob URL")
        parts = (method, key, str(expires), content_type if method == "PUT" else "")
        if not self._signer.matches(parts, query.get("s", "")):
            raise BadSignature(
                "the blob URL's signature does not match (for PUT, send the Content-Type given)"
            )
        signed_urls.check_unexpired(expires, self._clock(), "blob URL")

    def _path(self, key: str) -> Path:
        task_id, run_id, name = key.split("/", 2)
        digest = hashlib.sha256(name.encode()).hexdigest()
        return self.directory / task_id / run_id / digest

    async def write(
        self, key: str, chunks: AsyncIterator[bytes], content_type: str, content_encoding: str | None
    ) -> int:
        path = self._path(key)
        await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.{id(chunks)}.part")
        size = 0
        try:
            with partial.open("wb") as out:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise InputTooLarge(
                            f"the artifact is larger than {self.max_bytes} bytes, the most accepted"
                        )
                    await asyncio.to_thread(out.write, chunk)
            meta = {"contentType": content_type, "contentEncoding": content_encoding, "size": size}
            path.with_suffix(".meta").write_text(json.dumps(meta))
            partial.replace(path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
        return size

    def open(self, key: str) -> StoredBlob:
        path = self._path(key)
        try:
            meta = json.loads(path.with_suffix(".meta").read_text())
        except (FileNotFoundError, ValueError):
            raise ResourceNotFound("no blob was uploaded for this artifact") from None
        if not path.exists():
            raise ResourceNotFound("no blob was uploaded for this artifact")
        return StoredBlob(path, meta["contentType"], meta["contentEncoding"], meta["size"])

    async def delete(self, keys: list[str]) -> None:
        await asyncio.to_thread(self._delete, keys)

    def _delete(self, keys: list[str]) -> None:
        for key in keys:
            path = self._path(key)
            for each in (path, path.with_suffix(".meta")):
                with contextlib.suppress(FileNotFoundError):
                    each.unlink()
