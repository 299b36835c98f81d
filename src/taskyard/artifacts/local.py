"""A local-directory blob store, the embedded default. The API serves its signed URLs itself.

Blobs live at `<dir>/<taskId>/<runId>/<sha256 of the name>`, with a `.meta` JSON file beside
each (content type and encoding): hashing keeps every name a plain file, so `a` and `a/b` can
both exist and no name can reach outside the directory.

A PUT URL signs the Content-Type and Content-Encoding createArtifact declared and the upload
token it opened; the API asks the queue whether that upload may still write (`write`'s `commit`).
An upload is written to a partial file and renamed into place only once it is recorded, so a
refused or broken one leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from urllib.parse import quote, urlencode

from taskyard.artifacts.port import BadSignature, StoredBlob
from taskyard.model import signed_urls
from taskyard.model.artifacts import (
    CONTENT_ENCODINGS,
    IDENTITY,
    PUT_URL_TTL_MS,
    UNDECLARED,
    UNDECLARED_ALLOWED,
)
from taskyard.model.errors import InputError, InputTooLarge, ResourceNotFound
from taskyard.model.types import Clock

BLOB_PREFIX = "/api/queue/v1/_blobs/"
URL_PURPOSE = "taskyard-blobs"
GZIP_MAGIC = b"\x1f\x8b"
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,64}")  # as secrets.token_urlsafe makes them


class LocalStore:
    """Blobs in a directory; URLs `<rootUrl>/api/queue/v1/_blobs/<key>?e=<expires>&s=<hmac>`.

    PUT URLs also carry the upload token (`u`) and the Content-Encoding createArtifact declared (`ce`).
    """

    put_url_ttl_ms = PUT_URL_TTL_MS

    def __init__(
        self, directory: str, root_url: str, secret_key: str, *, max_bytes: int, clock: Clock
    ) -> None:
        self.directory = Path(directory)
        self.base = root_url.rstrip("/") + BLOB_PREFIX
        self._signer = signed_urls.Signer(secret_key, URL_PURPOSE)
        self.max_bytes = max_bytes
        self._clock = clock

    def _url(self, key: str, query: dict[str, str | int]) -> str:
        return self.base + quote(key, safe="/") + "?" + urlencode(query)

    def put_url(self, key: str, *, content_type: str, content_encoding: str, expires: int, token: str) -> str:
        if content_encoding == IDENTITY:
            content_encoding = UNDECLARED  # declaring identity admits what declaring none does
        signature = self._signer.sign(_put_parts(key, expires, content_type, content_encoding, token))
        encoding = {"ce": content_encoding} if content_encoding != UNDECLARED else {}
        return self._url(key, {"e": expires, **encoding, "u": token, "s": signature})

    def get_url(self, key: str, expires: int) -> str:
        signature = self._signer.sign(("GET", key, str(expires), ""))
        return self._url(key, {"e": expires, "s": signature})

    def verify_get(self, key: str, query: dict[str, str]) -> None:
        expires = signed_urls.expiry(query, "blob URL")
        if not self._signer.matches(("GET", key, str(expires), ""), query.get("s", "")):
            raise BadSignature("the blob URL's signature does not match")
        signed_urls.check_unexpired(expires, self._clock(), "blob URL")

    def verify_put(self, key: str, query: dict[str, str], content_type: str, content_encoding: str) -> str:
        expires = signed_urls.expiry(query, "upload URL")
        declared, token = query.get("ce", UNDECLARED), query.get("u", "")
        if declared not in (UNDECLARED, *CONTENT_ENCODINGS) or not _TOKEN.fullmatch(token):
            raise BadSignature("the upload URL's signature does not match")
        parts = _put_parts(key, expires, content_type, declared, token)
        if not self._signer.matches(parts, query.get("s", "")):
            raise BadSignature(
                "the upload URL's signature does not match: send the Content-Type that createArtifact "
                "was given"
            )
        signed_urls.check_unexpired(expires, self._clock(), "upload URL")
        if declared == UNDECLARED and content_encoding not in UNDECLARED_ALLOWED:
            raise BadSignature(
                f"the upload URL admits Content-Encoding identity or gzip, and the PUT sent "
                f"{content_encoding[:40]}; declare its contentEncoding in createArtifact"
            )
        if declared != UNDECLARED and content_encoding != declared:
            raise BadSignature(
                f"the upload URL is signed for Content-Encoding {declared}, as createArtifact declared "
                f"(identity: none), and the PUT sent {content_encoding[:40]}; declare its contentEncoding "
                "in createArtifact"
            )
        return token

    def _path(self, key: str) -> Path:
        task_id, run_id, name = key.split("/", 2)
        digest = hashlib.sha256(name.encode()).hexdigest()
        return self.directory / task_id / run_id / digest

    async def write(
        self,
        key: str,
        chunks: AsyncIterator[bytes],
        content_type: str,
        content_encoding: str | None,
        commit: Callable[[], Awaitable[None]] | None = None,
    ) -> int:
        path = self._path(key)
        await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
        unique = f"{os.getpid()}.{id(chunks)}.part"
        partial = path.with_name(f"{path.name}.{unique}")
        partial_meta = path.with_name(f"{path.name}.meta.{unique}")
        size = 0
        head = b""
        try:
            with partial.open("wb") as out:
                async for chunk in chunks:
                    if content_encoding == "gzip" and len(head) < len(GZIP_MAGIC):
                        head = _check_gzip_head(head + chunk[: len(GZIP_MAGIC)])
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise InputTooLarge(
                            f"the artifact is larger than {self.max_bytes} bytes, the most accepted"
                        )
                    await asyncio.to_thread(out.write, chunk)
            if content_encoding == "gzip" and head != GZIP_MAGIC:
                raise InputError("the body is labelled Content-Encoding gzip and is not gzip")
            meta = {"contentType": content_type, "contentEncoding": content_encoding, "size": size}
            partial_meta.write_text(json.dumps(meta))
            if commit is not None:
                await commit()
            partial_meta.replace(path.with_suffix(".meta"))
            partial.replace(path)
        finally:
            for each in (partial, partial_meta):
                with contextlib.suppress(FileNotFoundError):
                    each.unlink()
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


def _put_parts(
    key: str, expires: int, content_type: str, content_encoding: str, token: str
) -> tuple[str, ...]:
    return ("PUT", key, str(expires), content_type, content_encoding, token)


def _check_gzip_head(head: bytes) -> bytes:
    """The body's first bytes so far; InputError as soon as they can't begin a gzip stream."""
    if not GZIP_MAGIC.startswith(head[: len(GZIP_MAGIC)]):
        raise InputError("the body is labelled Content-Encoding gzip and is not gzip")
    return head[: len(GZIP_MAGIC)]
