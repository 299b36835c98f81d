"""Unpacking mounts' archives: what a well-formed archive gives, and every way out of the target refused."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from taskyard.worker.archives import BadArchive, decompress_file, extract


def make_tar(path: Path, entries: list[tarfile.TarInfo | tuple[str, bytes]], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:  # type: ignore[call-overload]
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
            else:
                name, data = entry
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o755 if name.endswith(".sh") else 0o644
                tar.addfile(info, io.BytesIO(data))
    return path


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    path.mkdir()
    return path


@pytest.mark.parametrize(
    ("fmt", "mode"), [("tar", "w:"), ("tar.gz", "w:gz"), ("tar.bz2", "w:bz2"), ("tar.xz", "w:xz")]
)
def test_a_tar_unpacks_with_its_tree_links_and_exec_bits(
    tmp_path: Path, dest: Path, fmt: str, mode: str
) -> None:
    archive = make_tar(
        tmp_path / "a.tar",
        [("bin/run.sh", b"#!/bin/sh\n"), ("lib/data.txt", b"data"), link("lib/alias.txt", "data.txt")],
        mode,
    )
    extract(archive, fmt, dest)
    assert (dest / "lib/data.txt").read_bytes() == b"data"
    assert (dest / "lib/alias.txt").read_bytes() == b"data"
    assert os.access(dest / "bin/run.sh", os.X_OK)


def test_a_zip_unpacks_with_its_tree(tmp_path: Path, dest: Path) -> None:
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("dir/", b"")
        zipped.writestr("dir/file.txt", b"zipped")
    extract(archive, "zip", dest)
    assert (dest / "dir/file.txt").read_bytes() == b"zipped"


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (("../x", b"escape"), "'../x' has a '..' in its path"),
        (("a/../../x", b"escape"), "has a '..' in its path"),
        (("/etc/x", b"escape"), "'/etc/x' has an absolute path"),
        (link("out", "/etc/passwd"), "points to the absolute path"),
        (link("sub/out", "../../x"), "points outside the directory"),
    ],
)
def test_entries_leaving_the_target_are_refused(
    tmp_path: Path, dest: Path, entry: tarfile.TarInfo | tuple[str, bytes], said: str
) -> None:
    archive = make_tar(tmp_path / "a.tar.gz", [entry])
    with pytest.raises(BadArchive, match=said.replace("(", r"\(").replace(")", r"\)")):
        extract(archive, "tar.gz", dest)
    assert not (tmp_path / "x").exists()


def test_a_file_is_never_written_through_a_symlink(tmp_path: Path, dest: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    # The link itself stays inside; a later entry under it must not be written through it.
    archive = make_tar(tmp_path / "a.tar.gz", [link("here", "."), ("here/x", b"through")])
    with pytest.raises(BadArchive, match="through the symlink 'here'"):
        extract(archive, "tar.gz", dest)


def test_a_chain_of_links_that_ends_outside_is_refused(tmp_path: Path, dest: Path) -> None:
    # Each link looks inside on its own; followed together they reach the parent.
    archive = make_tar(tmp_path / "a.tar.gz", [link("l", "."), link("s", "l/..")])
    with pytest.raises(BadArchive, match="'s' links outside the directory"):
        extract(archive, "tar.gz", dest)


def test_a_hard_link_through_links_that_end_outside_is_refused_before_it_is_read(
    tmp_path: Path, dest: Path
) -> None:
    (tmp_path / "secret").write_bytes(b"outside")
    archive = make_tar(
        tmp_path / "a.tar.gz", [link("l", "."), link("s", "l/.."), link("h", "s/secret", tarfile.LNKTYPE)]
    )
    with pytest.raises(BadArchive, match="'h' names 's/secret', outside the directory"):
        extract(archive, "tar.gz", dest)
    assert not (dest / "h").exists()


def test_devices_are_refused(tmp_path: Path, dest: Path) -> None:
    fifo = tarfile.TarInfo("pipe")
    fifo.type = tarfile.FIFOTYPE
    archive = make_tar(tmp_path / "a.tar.gz", [fifo])
    with pytest.raises(BadArchive, match="device or FIFO"):
        extract(archive, "tar.gz", dest)


def test_hard_links_copy_an_earlier_file_inside(tmp_path: Path, dest: Path) -> None:
    archive = make_tar(tmp_path / "a.tar.gz", [("a.txt", b"a"), link("b.txt", "a.txt", tarfile.LNKTYPE)])
    extract(archive, "tar.gz", dest)
    assert (dest / "b.txt").read_bytes() == b"a"
    outside = make_tar(tmp_path / "b.tar.gz", [link("c.txt", "../secret", tarfile.LNKTYPE)])
    with pytest.raises(BadArchive, match=r"'\.\.'"):
        extract(outside, "tar.gz", dest)


def test_sizes_and_entry_counts_are_bounded(tmp_path: Path, dest: Path) -> None:
    archive = make_tar(tmp_path / "a.tar.gz", [("big", b"0" * 5000)])
    with pytest.raises(BadArchive, match="more bytes than the limit"):
        extract(archive, "tar.gz", dest, max_bytes=4096)
    many = make_tar(tmp_path / "b.tar.gz", [(f"f{i}", b"") for i in range(5)])
    with pytest.raises(BadArchive, match="too many entries"):
        extract(many, "tar.gz", dest, max_entries=4)


def test_a_zip_symlink_out_is_refused(tmp_path: Path, dest: Path) -> None:
    archive = tmp_path / "a.zip"
    info = zipfile.ZipInfo("out")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr(info, "../../etc")
    with pytest.raises(BadArchive, match="points outside"):
        extract(archive, "zip", dest)


def test_something_that_is_not_an_archive_says_so(tmp_path: Path, dest: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_bytes(b"not an archive at all")
    with pytest.raises(BadArchive, match=r"not a valid tar\.gz archive"):
        extract(junk, "tar.gz", dest)
    with pytest.raises(BadArchive, match="not a valid zip archive"):
        extract(junk, "zip", dest)
    with pytest.raises(BadArchive, match="not a valid gz file"):
        decompress_file(junk, "gz", tmp_path / "out.txt")


def test_a_zip_method_python_can_t_read_says_so(tmp_path: Path, dest: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        zipped.writestr("f.txt", b"data")
    data = bytearray(buffer.getvalue())
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):  # method 99 (AES), both headers
        at = data.index(signature) + offset
        data[at : at + 2] = (99).to_bytes(2, "little")
    archive = tmp_path / "a.zip"
    archive.write_bytes(bytes(data))
    with pytest.raises(BadArchive, match="not a valid zip archive"):
        extract(archive, "zip", dest)


def test_a_compressed_file_is_decompressed_within_bounds(tmp_path: Path) -> None:
    source = tmp_path / "f.gz"
    source.write_bytes(gzip.compress(b"x" * 1000))
    decompress_file(source, "gz", tmp_path / "f")
    assert (tmp_path / "f").read_bytes() == b"x" * 1000
    with pytest.raises(BadArchive, match="more bytes than the limit"):
        decompress_file(source, "gz", tmp_path / "g", max_bytes=100)
