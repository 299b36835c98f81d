"""Unpacking a mount's archive or compressed file, safely: nothing lands outside the target.

A task's archive comes from anyone who can publish an artifact or serve a URL, so extraction
trusts none of it: entries with absolute paths or `..` are refused, files are never written
through a symlink (each parent must be a real directory), links may not point out of the target
(checked once every entry exists, so a chain of links can't sneak out), devices and FIFOs are
refused, and the bytes written and the number of entries are bounded. Any refusal raises
`BadArchive` naming the entry; the caller then removes what was written.

Formats are the ones Python's standard library reads: tar (plain, gzip, bzip2, xz) and zip for
directories; gzip, bzip2 and xz for single files.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import posixpath
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

DIRECTORY_FORMATS = ("tar", "tar.gz", "tar.bz2", "tar.xz", "zip")
FILE_FORMATS = ("gz", "bz2", "xz")
MAX_BYTES = 8 * 1024**3  # what one mount may unpack to
MAX_ENTRIES = 200_000
CHUNK = 1024 * 1024
_OPENERS: dict[str, Callable[..., Any]] = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}


class BadArchive(Exception):
    """The archive can't be unpacked safely or at all; the message says which entry and why."""


class _Budget:
    def __init__(self, max_bytes: int, max_entries: int) -> None:
        self.bytes = max_bytes
        self.entries = max_entries

    def entry(self, name: str) -> None:
        self.entries -= 1
        if self.entries < 0:
            raise BadArchive(f"too many entries (more than the limit); stopped at {name!r}")

    def spend(self, count: int, name: str) -> None:
        self.bytes -= count
        if self.bytes < 0:
            raise BadArchive(f"unpacks to more bytes than the limit; stopped in {name!r}")


def decompress_file(source: Path, fmt: str, dest: Path, max_bytes: int = MAX_BYTES) -> None:
    """`source`, decompressed as `fmt` (gz, bz2, xz), into the file `dest`."""
    budget = _Budget(max_bytes, 1)
    try:
        with _OPENERS[fmt](source, "rb") as reader, dest.open("wb") as writer:
            _copy(reader, writer, budget, dest.name)
    except (OSError, EOFError, lzma.LZMAError, zlib.error) as exc:
        raise BadArchive(f"not a valid {fmt} file: {exc}") from None


def extract(
    archive: Path, fmt: str, dest: Path, max_bytes: int = MAX_BYTES, max_entries: int = MAX_ENTRIES
) -> None:
    """Unpack `archive` (one of DIRECTORY_FORMATS) into the directory `dest`, which must exist."""
    budget = _Budget(max_bytes, max_entries)
    links: list[Path] = []
    try:
        if fmt == "zip":
            _extract_zip(archive, dest, budget, links)
        else:
            _extract_tar(archive, fmt, dest, budget, links)
    # zipfile raises NotImplementedError for methods it lacks, RuntimeError for encrypted entries.
    except (
        tarfile.TarError,
        zipfile.BadZipFile,
        EOFError,
        lzma.LZMAError,
        zlib.error,
        NotImplementedError,
        RuntimeError,
        ValueError,
    ) as exc:
        raise BadArchive(f"not a valid {fmt} archive: {exc}") from None
    root = os.path.realpath(dest)
    for link in links:
        if not _inside(os.path.realpath(link), root):
            raise BadArchive(f"entry {link.relative_to(dest).as_posix()!r} links outside the directory")


# Tar -----------------------------------------------------------------------------------------


def _extract_tar(archive: Path, fmt: str, dest: Path, budget: _Budget, links: list[Path]) -> None:
    mode = {"tar": "r:", "tar.gz": "r:gz", "tar.bz2": "r:bz2", "tar.xz": "r:xz"}[fmt]
    with tarfile.open(archive, mode) as tar:  # type: ignore[call-overload]
        for member in tar:
            budget.entry(member.name)
            target = _target(dest, member.name)
            if member.isdir():
                _make_dir(dest, target, member.name)
            elif member.isfile():
                reader = tar.extractfile(member)
                assert reader is not None  # a regular file always has content
                _write(dest, target, member.name, reader, member.mode, budget)
            elif member.issym():
                _symlink(dest, target, member.name, member.linkname)
                links.append(target)
            elif member.islnk():
                source = _target(dest, member.linkname)
                if not _inside(os.path.realpath(source), os.path.realpath(dest)):
                    raise BadArchive(
                        f"hard link {member.name!r} names {member.linkname!r}, outside the directory"
                    )
                if not source.is_file() or source.is_symlink():
                    raise BadArchive(
                        f"hard link {member.name!r} names {member.linkname!r}, not a file before it"
                    )
                with source.open("rb") as reader:
                    _write(dest, target, member.name, reader, source.stat().st_mode, budget)
            else:
                raise BadArchive(f"entry {member.name!r} is a device or FIFO, which mounts don't unpack")


# Zip -----------------------------------------------------------------------------------------


def _extract_zip(archive: Path, dest: Path, budget: _Budget, links: list[Path]) -> None:
    with zipfile.ZipFile(archive) as zipped:
        for info in zipped.infolist():
            budget.entry(info.filename)
            target = _target(dest, info.filename)
            mode = info.external_attr >> 16
            if info.is_dir():
                _make_dir(dest, target, info.filename)
            elif stat.S_ISLNK(mode):
                budget.spend(info.file_size, info.filename)
                link = zipped.read(info).decode("utf-8", errors="replace")
                _symlink(dest, target, info.filename, link)
                links.append(target)
            else:
                with zipped.open(info) as reader:
                    _write(dest, target, info.filename, reader, mode or 0o644, budget)


# Entries -------------------------------------------------------------------------------------


def _target(dest: Path, name: str) -> Path:
    """Where entry `name` goes: refused if absolute or if it climbs out with `..`."""
    clean = name.replace("\\", "/")
    if clean.startswith("/") or (len(clean) > 1 and clean[1] == ":"):
        raise BadArchive(f"entry {name!r} has an absolute path")
    parts = [part for part in clean.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise BadArchive(f"entry {name!r} has a '..' in its path")
    if any("\0" in part for part in parts):
        raise BadArchive(f"entry {name!r} has a NUL character in its path")
    return dest.joinpath(*parts)


def _parents_are_dirs(dest: Path, target: Path, name: str) -> None:
    """Make `target`'s parents, refusing to go through a symlink or a file."""
    current = dest
    for part in target.relative_to(dest).parts[:-1]:
        current = current / part
        if current.is_symlink():
            raise BadArchive(f"entry {name!r} would be written through the symlink {part!r}")
        if not current.exists():
            current.mkdir()
        elif not current.is_dir():
            raise BadArchive(f"entry {name!r} would be written under the file {part!r}")


def _clear(target: Path, name: str) -> None:
    """A later entry replaces an earlier file or link (as tar does); never a directory."""
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        raise BadArchive(f"entry {name!r} would replace a directory")


def _make_dir(dest: Path, target: Path, name: str) -> None:
    if target == dest:
        return
    _parents_are_dirs(dest, target, name)
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise BadArchive(f"directory entry {name!r} would replace a file or symlink")
    target.mkdir(exist_ok=True)


def _write(dest: Path, target: Path, name: str, reader: IO[bytes], mode: int, budget: _Budget) -> None:
    if target == dest:
        raise BadArchive(f"file entry {name!r} has an empty path")
    _parents_are_dirs(dest, target, name)
    _clear(target, name)
    # O_EXCL | O_NOFOLLOW: what is written is a new file here, whatever appeared since the check.
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as writer:
        _copy(reader, writer, budget, name)
    os.chmod(target, (mode & 0o755) | 0o600)  # readable and writable by the task; no setuid


def _symlink(dest: Path, target: Path, name: str, link: str) -> None:
    if target == dest:
        raise BadArchive(f"symlink entry {name!r} has an empty path")
    if link.startswith("/") or not link:
        raise BadArchive(f"symlink {name!r} points to the absolute path {link!r}")
    relative = target.parent.relative_to(dest).as_posix()
    if posixpath.normpath(posixpath.join(relative, link)).split("/")[0] == "..":
        raise BadArchive(f"symlink {name!r} points outside the directory ({link!r})")
    _parents_are_dirs(dest, target, name)
    _clear(target, name)
    os.symlink(link, target)


def _copy(reader: IO[bytes], writer: IO[bytes], budget: _Budget, name: str) -> None:
    while chunk := reader.read(CHUNK):
        budget.spend(len(chunk), name)
        writer.write(chunk)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def remove(path: Path) -> None:
    """Remove what a failed extraction left (a file, a link or a tree), never following links."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)
