"""Uploading a task's artifacts: files, directories expanded to their files, and error artifacts.

Each file is announced with createArtifact (`s3`) and PUT to the URL it answers, gzipped unless its
kind is compressed already; at most `PARALLEL` at a time. A file that isn't there (or is a
directory, or can't be read) becomes an `error` artifact, as generic-worker's do, and fails the
task unless the artifact is optional. The first problem decides the task's outcome.

The task's log is announced earlier, when its commands start (`Announced`): when they end only
its PUT is left.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskyard.model import dates
from taskyard.model.client_errors import Refused, Unreachable
from taskyard.worker import content
from taskyard.worker.payload import ArtifactSpec

PARALLEL = 10
READ_SIZE = 256 * 1024
SMALL = 256 * 1024  # files up to this size are read and compressed in memory
FRESH_MS = 5 * 60 * 1000  # an upload URL created ahead is used only if it lives this much longer
CreateArtifact = Callable[[str, dict[str, Any]], Awaitable[Any]]  # (name, body) -> createArtifact's answer
Put = Callable[[str, AsyncIterator[bytes], int, str, str], Awaitable[None]]  # (url, chunks, size, type, enc)


@dataclass(frozen=True)
class Problem:
    """Why the artifacts spoil the run: `failed`, or an exception with its reason."""

    state: str  # "failed" | "exception"
    reason: str  # the exception's reason, or "failed"
    message: str


@dataclass(frozen=True)
class FileUpload:
    name: str
    path: Path
    expires: int
    content_type: str
    content_encoding: str


@dataclass(frozen=True)
class ErrorArtifact:
    name: str
    reason: str
    message: str
    expires: int
    optional: bool


def collect(specs: list[ArtifactSpec], task_dir: Path) -> list[FileUpload | ErrorArtifact]:
    """What to upload for each declared artifact, looking at the task directory."""
    found: list[FileUpload | ErrorArtifact] = []
    for spec in specs:
        path = (task_dir / spec.path).resolve()
        if spec.type == "file":
            found.append(_file(spec, path))
        else:
            found.extend(_directory(spec, path))
    return found


def _file(spec: ArtifactSpec, path: Path) -> FileUpload | ErrorArtifact:
    def error(reason: str, message: str) -> ErrorArtifact:
        return ErrorArtifact(spec.name, reason, message, spec.expires, spec.optional)

    if path.is_dir():
        return error(
            "invalid-resource-on-worker",
            f"File artifact '{path}' exists as a directory, not a file, on the worker",
        )
    if not path.exists():
        return error("file-missing-on-worker", f"Could not read file '{path}'")
    if not os.access(path, os.R_OK):
        return error("file-not-readable-on-worker", f"Could not read file '{path}'")
    return _upload(spec, spec.name, path)


def _directory(spec: ArtifactSpec, path: Path) -> list[FileUpload | ErrorArtifact]:
    prefix = spec.name.rstrip("/")  # `public/build/`: files `public/build/<file>`, an error `public/build`

    def error(reason: str, message: str) -> list[FileUpload | ErrorArtifact]:
        return [ErrorArtifact(prefix, reason, message, spec.expires, spec.optional)]

    if path.is_file():
        return error(
            "invalid-resource-on-worker",
            f"Directory artifact '{path}' exists as a file, not a directory, on the worker",
        )
    if not path.is_dir():
        return error("file-missing-on-worker", f"Could not read directory '{path}'")
    found: list[FileUpload | ErrorArtifact] = []
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        name = f"{prefix}/{file.relative_to(path).as_posix()}"
        if os.access(file, os.R_OK):
            found.append(_upload(spec, name, file))
        else:
            message = f"Could not read file '{file}'"
            found.append(
                ErrorArtifact(name, "file-not-readable-on-worker", message, spec.expires, spec.optional)
            )
    return found


def _upload(spec: ArtifactSpec, name: str, path: Path) -> FileUpload:
    return FileUpload(
        name,
        path,
        spec.expires,
        spec.content_type or content.content_type(path.name),
        spec.content_encoding or content.content_encoding(path.name),
    )


async def upload_all(
    items: list[FileUpload | ErrorArtifact], create: CreateArtifact, put: Put, scratch: Path
) -> Problem | None:
    """Upload everything (at most PARALLEL at a time); the first problem met, in `items` order."""
    gate = asyncio.Semaphore(PARALLEL)

    async def one(item: FileUpload | ErrorArtifact) -> Problem | None:
        async with gate:
            return await upload_one(item, create, put, scratch)

    problems = await asyncio.gather(*(one(item) for item in items))
    return next((p for p in problems if p is not None), None)


async def upload_one(
    item: FileUpload | ErrorArtifact,
    create: CreateArtifact,
    put: Put,
    scratch: Path,
    alongside: Callable[[], Awaitable[object]] | None = None,
) -> Problem | None:
    """Upload one item; the problem it meets, if any. `alongside` runs during a file's PUT."""
    try:
        if isinstance(item, ErrorArtifact):
            body = {
                "storageType": "error",
                "reason": item.reason,
                "message": item.message,
                "expires": dates.to_iso(item.expires),
            }
            await create(item.name, body)
            if item.optional:
                return None
            return Problem(
                "failed", "failed", f"TASK FAILURE during artifact upload: {item.reason}: {item.message}"
            )
        await upload_file(item, create, put, scratch, alongside)
    except Refused as exc:
        return _refusal(item.name, exc)
    except (Unreachable, OSError) as exc:
        return Problem("exception", "resource-unavailable", f"could not upload artifact {item.name}: {exc}")
    return None


def _refusal(name: str, exc: Refused) -> Problem:
    if exc.status == 409:
        return Problem(
            "exception",
            "malformed-payload",
            f"there was a conflict uploading artifact {name} - this suggests artifact {name} was already "
            f"uploaded to this task with different content earlier on in this task: {exc.message}",
        )
    if exc.status == 413:
        return Problem(
            "failed", "failed", f"artifact {name} is too large for the artifact store: {exc.message}"
        )
    if exc.status >= 500:
        return Problem("exception", "resource-unavailable", f"could not upload artifact {name}: {exc}")
    return Problem("exception", "internal-error", f"the queue refused artifact {name}: {exc}")


async def upload_file(
    item: FileUpload,
    create: CreateArtifact,
    put: Put,
    scratch: Path,
    alongside: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """createArtifact, then PUT the (maybe gzipped) bytes to the URL it answered (and meanwhile
    run `alongside`, which needs the artifact to exist: the log's link, say)."""
    packed: Path | None = None
    small: bytes | None = None
    if item.path.stat().st_size <= SMALL:  # most logs: no thread hop, no temporary file
        raw = item.path.read_bytes()
        small = gzip.compress(raw, compresslevel=6, mtime=0) if item.content_encoding == "gzip" else raw
    elif item.content_encoding == "gzip":
        packed = await asyncio.to_thread(_gzip, item.path, scratch)
    source = packed or item.path
    try:
        size = len(small) if small is not None else source.stat().st_size
        answer = await create(item.name, s3_body(item, size))
        chunks = _once(small) if small is not None else _chunks(source)
        upload = put(answer["putUrl"], chunks, size, item.content_type, item.content_encoding)
        if alongside is None:
            await upload
        else:
            await asyncio.gather(upload, alongside())
    finally:
        if packed is not None:
            packed.unlink(missing_ok=True)


def s3_body(item: FileUpload, size: int | None) -> dict[str, Any]:
    """createArtifact's body for a file; without contentLength if its size isn't known yet."""
    body: dict[str, Any] = {
        "storageType": "s3",
        "contentType": item.content_type,
        "expires": dates.to_iso(item.expires),
    }
    if size is not None:
        body["contentLength"] = size
    if item.content_encoding != "identity":  # the upload URL is signed for it; the PUT sends it
        body["contentEncoding"] = item.content_encoding
    return body


class Announced:
    """A file's createArtifact sent ahead, while the commands still write it (the task's log), so
    that only its PUT is left when they end. Its size isn't known yet: the body has no
    contentLength, now or later. `create`, given to `upload_one`, answers that early call's putUrl
    instead of asking again, unless the early call failed or its URL expires within FRESH_MS: then
    it asks again with the same body (a refusal then comes back as usual)."""

    def __init__(self, item: FileUpload, create: CreateArtifact) -> None:
        self.item = item
        self._create = create
        self._body = s3_body(item, None)
        self._early: asyncio.Future[Any] = asyncio.ensure_future(create(item.name, self._body))
        self._early.add_done_callback(_retrieve)

    async def create(self, name: str, body: dict[str, Any]) -> Any:
        if name != self.item.name:
            return await self._create(name, body)
        try:
            answer = await self._early
        except Exception:  # asked again below, where a refusal counts
            answer = None
        if isinstance(answer, dict) and _fresh(answer.get("expires")):
            return answer
        return await self._create(name, self._body)

    def cancel(self) -> None:
        """Drop the early call if no upload will use it."""
        self._early.cancel()


def _fresh(expires: object) -> bool:
    return not isinstance(expires, str) or dates.parse_iso(expires) - dates.now_ms() > FRESH_MS


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a failed early call's exception as seen: `Announced.create` asks again."""
    if not task.cancelled():
        task.exception()


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _gzip(path: Path, scratch: Path) -> Path:
    scratch.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=scratch, suffix=".gz")
    with (
        os.fdopen(fd, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as out,
        path.open("rb") as source,
    ):
        shutil.copyfileobj(source, out, READ_SIZE)
    return Path(name)


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as f:
        while chunk := await asyncio.to_thread(f.read, READ_SIZE):
            yield chunk
