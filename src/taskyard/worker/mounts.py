"""The payload's `mounts`: caches, files and directories put in the task directory before its commands.

Three kinds, told apart by their keys as generic-worker tells them:
- `{cacheName, directory}` a writable cache, kept by the worker under `<work-dir>/caches/` between
  tasks; it needs the task scope `generic-worker:cache:<cacheName>`. A cache is lent to one task
  at a time: a task that asks for a cache in use gets a new, empty one of that name (generic-
  worker's pool), and both are kept. Optional `content` + `format` fill a new cache.
- `{file, content, format?}` a file, optionally decompressed (gz, bz2, xz).
- `{directory, content, format}` a directory unpacked from an archive (archives.py).

`content` is `{taskId, artifact, sha256?}` (downloaded through the queue with the claim's
credentials, so the queue checks `queue:get-artifact:<name>` against the task's scopes; the
task must depend on `taskId`, as generic-worker requires), `{namespace, artifact}` (the task the
index holds there), `{url, sha256?}` (http or https),
`{raw}` or `{base64}` (inline, up to 64 KiB). `sha256`, when given, must match the bytes
downloaded.

Paths are relative to the task directory and may not leave it. `parse` checks the payload's
entries (the run then ends exception/malformed-payload before anything is fetched); `Mounter`
makes them, and raises `MountFailed` with the message the task log shows.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import errno
import hashlib
import re
import shutil
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskyard.model import scopes
from taskyard.model.client_errors import Refused, Unreachable
from taskyard.worker import archives

MAX_INLINE = 65536
SHA256 = re.compile(r"^[a-f0-9]{64}$")
# Formats generic-worker names that Python's standard library can't read: refused by name.
UNSUPPORTED_DIRECTORY_FORMATS = (
    "7z", "rar", "tar.br", "tar.lz", "tar.lz4", "tar.mz", "tar.sz", "tar.zst", "tar.zz",
)  # fmt: skip
UNSUPPORTED_FILE_FORMATS = ("br", "lz", "lz4", "mz", "sz", "zst", "zz")
_CONTENT_KEYS = {
    "taskId": ("taskId", "artifact", "sha256"),
    "namespace": ("namespace", "artifact"),
    "url": ("url", "sha256"),
    "raw": ("raw",),
    "base64": ("base64",),
}
# Which key tells a mount's kind, in generic-worker's order; then the kind's (allowed, required) keys.
_KIND_BY_KEY = (("cacheName", "cache"), ("directory", "directory"), ("file", "file"))
_MOUNT_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cache": (("cacheName", "directory", "content", "format"), ("directory",)),
    "directory": (("directory", "content", "format"), ("content", "format")),
    "file": (("file", "content", "format"), ("content",)),
}
# OSErrors that say the worker's disk is in trouble, not the payload.
_WORKER_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS)
# Downloads content to the given file; answers its SHA-256 (hex).
Fetch = Callable[["Content", Path], Awaitable[str]]


@dataclass(frozen=True)
class Content:
    kind: str  # taskId | namespace | url | raw | base64
    task_id: str = ""
    namespace: str = ""
    artifact: str = ""
    url: str = ""
    inline: bytes = b""
    sha256: str = ""

    def __str__(self) -> str:
        if self.kind == "taskId":
            return f"task {self.task_id} artifact {self.artifact}"
        if self.kind == "namespace":
            return f"namespace {self.namespace} artifact {self.artifact}"
        if self.kind == "url":
            return f"url {self.url}"
        return f"{self.kind} content ({len(self.inline)} bytes)"


@dataclass(frozen=True)
class Mount:
    kind: str  # cache | file | directory
    field: str  # `mounts.<index>`, for messages
    path: str  # relative to the task directory
    content: Content | None = None
    format: str = ""
    cache_name: str = ""


class MountFailed(Exception):
    """A mount could not be made; `reason` is the exception's (malformed-payload, resource-unavailable)."""

    def __init__(self, message: str, reason: str = "malformed-payload") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


# Checking the payload ------------------------------------------------------------------------


def parse(entries: list[Any]) -> tuple[list[Mount], list[str]]:
    """The mounts, and every problem with them (worded for the task log)."""
    found: list[Mount] = []
    problems: list[str] = []
    for index, entry in enumerate(entries):
        where = f"mounts.{index}"
        mine = list(_problems(entry, where))
        if mine:
            problems.extend(f"malformed payload: {p}" for p in mine)
        else:
            found.append(_mount(entry, where))
    problems.extend(f"malformed payload: {p}" for p in _clashes(found))
    return found, problems


def requirement_problems(mounts: list[Mount], task_scopes: list[str], dependencies: list[str]) -> list[str]:
    """What the task definition lacks for its mounts: cache scopes, dependencies on mounted tasks."""
    problems = []
    for mount in mounts:
        if mount.kind == "cache":
            needed = f"generic-worker:cache:{mount.cache_name}"
            if not scopes.satisfies(task_scopes, needed):
                problems.append(
                    f"malformed payload: {mount.field} (cache {mount.cache_name!r}) needs the task scope "
                    f"{needed!r}, which task.scopes does not grant"
                )
        content = mount.content
        if content is not None and content.kind == "taskId" and content.task_id not in dependencies:
            problems.append(
                f"malformed payload: task.dependencies needs to include {content.task_id} "
                f"since {mount.field} mounts one of its artifacts"
            )
    return problems


def _problems(entry: Any, where: str) -> Iterator[str]:
    if not isinstance(entry, dict):
        yield f"{where} must be an object"
        return
    kind = next((k for key, k in _KIND_BY_KEY if key in entry), None)
    if kind is None:
        yield f"{where} must have cacheName and directory (a cache), directory (a directory) or file (a file)"
        return
    allowed, required = _MOUNT_KEYS[kind]
    yield from _keys(entry, where, kind, allowed, required)
    if kind == "cache" and isinstance(entry.get("cacheName"), str) and not entry["cacheName"]:
        yield f"{where}.cacheName must not be empty"
    if kind == "cache" and ("content" in entry) != ("format" in entry):
        yield f"{where}: a cache's content and format go together: give both or neither"
    path = entry.get("file" if kind == "file" else "directory")
    if isinstance(path, str):
        yield from _path_problem(path, f"{where}.{'file' if kind == 'file' else 'directory'}", kind)
    if isinstance(entry.get("format"), str):
        yield from _format_problem(entry["format"], f"{where}.format", kind)
    if "content" in entry:
        yield from _content_problems(entry["content"], f"{where}.content")


def _keys(
    entry: dict[str, Any], where: str, kind: str, allowed: tuple[str, ...], required: tuple[str, ...]
) -> Iterator[str]:
    for key in entry:
        if key not in allowed:
            yield f"{where}: additional property {key} is not allowed in a {kind} mount"
    for key in required:
        if key not in entry:
            yield f"{where}.{key} is required in a {kind} mount"
    for key in ("cacheName", "directory", "file", "format"):
        if key in entry and not isinstance(entry[key], str):
            yield f"{where}.{key} must be a string"


def _path_problem(path: str, where: str, kind: str) -> Iterator[str]:
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":"):
        yield f"{where} must be relative to the task directory (taskyard's worker mounts nothing outside it)"
    elif ".." in parts:
        yield f"{where} must stay inside the task directory: no '..'"
    elif not parts:
        yield f"{where} must name a {kind} inside the task directory, not the task directory itself"
    elif "\0" in path:
        yield f"{where} contains a NUL character"


def _format_problem(fmt: str, where: str, kind: str) -> Iterator[str]:
    supported = archives.FILE_FORMATS if kind == "file" else archives.DIRECTORY_FORMATS
    unsupported = UNSUPPORTED_FILE_FORMATS if kind == "file" else UNSUPPORTED_DIRECTORY_FORMATS
    if fmt in supported:
        return
    listed = ", ".join(supported)
    if fmt in unsupported:
        yield f"{where}: {fmt} is not supported by taskyard's worker (it unpacks {listed})"
    else:
        yield f"{where} must be one of: {listed}"


def _content_problems(content: Any, where: str) -> Iterator[str]:
    if not isinstance(content, dict):
        yield f"{where} must be an object"
        return
    kind = next((key for key in _CONTENT_KEYS if key in content), None)
    if kind is None:
        yield f"{where} must have one of taskId (and artifact), url, raw or base64"
        return
    for key in content:
        if key not in _CONTENT_KEYS[kind]:
            yield f"{where}: additional property {key} is not allowed with {kind}"
    for key in _CONTENT_KEYS[kind]:
        if key in content and not isinstance(content[key], str):
            yield f"{where}.{key} must be a string"
    if kind in ("taskId", "namespace") and not isinstance(content.get("artifact"), str):
        yield f"{where}.artifact is required with {kind}"
    yield from _content_values(content, where, kind)


def _content_values(content: dict[str, Any], where: str, kind: str) -> Iterator[str]:
    if isinstance(content.get("sha256"), str) and not SHA256.match(content["sha256"]):
        yield f"{where}.sha256 must be 64 lowercase hexadecimal digits"
    if (
        kind == "url"
        and isinstance(content["url"], str)
        and not content["url"].startswith(("http://", "https://"))
    ):
        yield f"{where}.url must be an http:// or https:// URL"
    if kind in ("raw", "base64") and isinstance(content[kind], str):
        if len(content[kind]) > MAX_INLINE:
            yield f"{where}.{kind} must be at most {MAX_INLINE} characters"
        elif kind == "base64" and _base64(content[kind]) is None:
            yield f"{where}.base64 is not valid base64"


def _base64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _mount(entry: dict[str, Any], where: str) -> Mount:
    kind = "cache" if "cacheName" in entry else "directory" if "directory" in entry else "file"
    raw = entry.get("content")
    return Mount(
        kind=kind,
        field=where,
        path=entry["file"] if kind == "file" else entry["directory"],
        content=None if raw is None else _content(raw),
        format=entry.get("format", ""),
        cache_name=entry.get("cacheName", ""),
    )


def _content(raw: dict[str, Any]) -> Content:
    if "taskId" in raw:
        return Content(
            "taskId", task_id=raw["taskId"], artifact=raw["artifact"], sha256=raw.get("sha256", "")
        )
    if "namespace" in raw:
        return Content("namespace", namespace=raw["namespace"], artifact=raw["artifact"])
    if "url" in raw:
        return Content("url", url=raw["url"], sha256=raw.get("sha256", ""))
    if "raw" in raw:
        return Content("raw", inline=raw["raw"].encode())
    return Content("base64", inline=_base64(raw["base64"]) or b"")


def _clashes(mounts: list[Mount]) -> Iterator[str]:
    """Two mounts at one path, or one inside another, would overwrite each other."""
    seen: list[tuple[tuple[str, ...], Mount]] = []
    for mount in mounts:
        parts = tuple(p for p in mount.path.replace("\\", "/").split("/") if p not in ("", "."))
        for other_parts, other in seen:
            shorter = min(len(parts), len(other_parts))
            if parts[:shorter] == other_parts[:shorter]:
                yield f"{mount.field} ({mount.path!r}) and {other.field} ({other.path!r}) overlap"
        seen.append((parts, mount))


# Caches ---------------------------------------------------------------------------------------


@dataclass
class Caches:
    """The worker's writable caches: `<root>/<sha256 of name>/<n>`, each lent to one task at a time."""

    root: Path
    in_use: set[Path] = field(default_factory=set)

    def borrow(self, name: str) -> tuple[Path, bool]:
        """A cache directory of that name not in use, and whether it is new (empty)."""
        home = self.root / hashlib.sha256(name.encode()).hexdigest()
        home.mkdir(parents=True, exist_ok=True)
        (home / "name").write_text(name)
        entries = sorted(
            (p for p in home.iterdir() if p.name.isdigit() and p.is_dir()), key=lambda p: int(p.name)
        )
        for entry in entries:
            if entry not in self.in_use:
                self.in_use.add(entry)
                return entry, False
        # Entries lent out are in their tasks' directories, not here: their numbers are taken too.
        taken = {int(p.name) for p in entries} | {int(p.name) for p in self.in_use if p.parent == home}
        number = 1 + max(taken, default=-1)
        entry = home / str(number)
        self.in_use.add(entry)
        return entry, True

    def give_back(self, entry: Path) -> None:
        self.in_use.discard(entry)

    def drop(self, entry: Path) -> None:
        """Forget a cache whose content can't be trusted (purged, or never filled)."""
        archives.remove(entry)
        self.in_use.discard(entry)


# Making the mounts ----------------------------------------------------------------------------


class Mounter:
    """Makes one run's mounts in its task directory; `unmount` puts its caches back."""

    def __init__(
        self, task_dir: Path, scratch: Path, caches: Caches, fetch: Fetch, say: Callable[[str], None]
    ):
        self.task_dir = task_dir
        self.scratch = scratch
        self.caches = caches
        self.fetch = fetch
        self.say = say
        self.borrowed: list[tuple[Path, Path]] = []  # (cache entry, where it is in the task directory)

    async def mount_all(self, mounts: list[Mount]) -> None:
        for mount in mounts:
            target = self.task_dir / mount.path
            try:
                if mount.kind == "cache":
                    await self._cache(mount, target)
                elif mount.kind == "file":
                    await self._file(mount, target)
                else:
                    await self._directory(mount, target)
            except OSError as exc:
                # Mostly the payload's doing (a name too long, a file where a directory goes);
                # a full or failing disk is the worker's.
                reason = "internal-error" if exc.errno in _WORKER_ERRNOS else "malformed-payload"
                raise MountFailed(
                    f"{mount.field}: cannot mount {mount.path}: {exc.strerror or exc}", reason
                ) from None

    async def _cache(self, mount: Mount, target: Path) -> None:
        entry, new = self.caches.borrow(mount.cache_name)
        target.parent.mkdir(parents=True, exist_ok=True)
        if new:
            self.say(f"[mounts] No existing writable directory cache {mount.cache_name!r}: creating one")
            try:
                target.mkdir()
                if mount.content is not None:
                    await self._unpack(mount, target)
            except BaseException:
                self.caches.give_back(entry)
                raise
        else:
            self.say(
                f"[mounts] Moving existing writable directory cache {mount.cache_name!r} to {mount.path}"
            )
            try:
                entry.rename(target)
            except OSError:
                self.caches.give_back(entry)
                raise
        self.borrowed.append((entry, target))

    async def _file(self, mount: Mount, target: Path) -> None:
        assert mount.content is not None
        if target.is_dir():
            raise MountFailed(f"{mount.field}: cannot mount file at {mount.path}: it exists as a directory")
        downloaded = await self._download(mount)
        target.parent.mkdir(parents=True, exist_ok=True)
        if mount.format:
            self.say(f"[mounts] Decompressing {mount.format} {mount.content} to {mount.path}")
            try:
                await asyncio.to_thread(archives.decompress_file, downloaded, mount.format, target)
            except archives.BadArchive as exc:
                archives.remove(target)
                raise MountFailed(f"{mount.field}: {mount.content}: {exc}") from None
        else:
            self.say(f"[mounts] Copying {mount.content} to {mount.path}")
            await asyncio.to_thread(shutil.copyfile, downloaded, target)
        downloaded.unlink(missing_ok=True)

    async def _directory(self, mount: Mount, target: Path) -> None:
        target.mkdir(parents=True, exist_ok=True)
        await self._unpack(mount, target)

    async def _unpack(self, mount: Mount, target: Path) -> None:
        downloaded = await self._download(mount)
        self.say(f"[mounts] Extracting {mount.format} {mount.content} to {mount.path}")
        try:
            await asyncio.to_thread(archives.extract, downloaded, mount.format, target)
        except archives.BadArchive as exc:
            archives.remove(target)
            raise MountFailed(f"{mount.field}: {mount.content}: {exc}") from None
        finally:
            downloaded.unlink(missing_ok=True)

    async def _download(self, mount: Mount) -> Path:
        assert mount.content is not None
        self.scratch.mkdir(parents=True, exist_ok=True)
        file = self.scratch / f"mount-{mount.field}"
        content = mount.content
        if content.kind in ("raw", "base64"):
            file.write_bytes(content.inline)
            return file
        self.say(f"[mounts] Downloading {content}")
        try:
            digest = await self.fetch(content, file)
        except Refused as exc:  # the artifact is missing or forbidden, the URL answers 4xx
            raise MountFailed(f"{mount.field}: could not download {content}: {exc}") from None
        except Unreachable as exc:
            raise MountFailed(
                f"{mount.field}: could not download {content}: {exc}", "resource-unavailable"
            ) from None
        self.say(f"[mounts] Downloaded {file.stat().st_size} bytes with SHA256 {digest} from {content}")
        if content.sha256 and digest != content.sha256:
            file.unlink(missing_ok=True)
            raise MountFailed(
                f"{mount.field}: download of {content} has SHA256 {digest} "
                f"but the task payload requires {content.sha256}"
            )
        return file

    def unmount(self, purge: bool) -> None:
        """Put the borrowed caches back (or drop them if `purge`): before the task directory goes."""
        for entry, target in reversed(self.borrowed):
            if purge or not target.is_dir() or target.is_symlink():
                self.say(f"[mounts] Purging cache at {target.relative_to(self.task_dir)}")
                archives.remove(target)
                self.caches.drop(entry)
                continue
            try:
                target.rename(entry)
            except OSError:
                archives.remove(target)
                self.caches.drop(entry)
            else:
                self.caches.give_back(entry)
        self.borrowed.clear()
