from __future__ import annotations

import pytest

from taskyard.worker import content


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("public/logs/live_backing.log", "text/plain; charset=utf-8"),
        ("notes.txt", "text/plain; charset=utf-8"),
        ("NOTES.TXT", "text/plain; charset=utf-8"),
        ("public/report.json", "application/json"),
        ("index.html", "text/html"),
        ("image.png", "image/png"),
        ("photo.jpg", "image/jpeg"),
        ("bundle.zip", "application/zip"),
        ("build.tar.gz", "application/gzip"),
        ("build.tgz", "application/gzip"),
        ("build.tar.zst", "application/zstd"),
        ("build.tar.xz", "application/x-xz"),
        ("build.tar.bz2", "application/x-bzip2"),
        ("app.apk", "application/vnd.android.package-archive"),
        ("pkg-1.0-py3-none-any.whl", "application/zip"),
        ("pic.webp", "image/webp"),
        ("font.woff2", "font/woff2"),
        ("public\\build\\app.json", "application/json"),
    ],
)
def test_content_type_from_the_extension(path: str, expected: str) -> None:
    assert content.content_type(path) == expected


@pytest.mark.parametrize("path", ["binary", "data.unknownext", "dir.d/file", ".hidden", ""])
def test_unknown_content_type_is_octet_stream(path: str) -> None:
    assert content.content_type(path) == "application/octet-stream"


@pytest.mark.parametrize(
    "path",
    [
        "a.zip", "a.gz", "a.tar.gz", "a.tgz", "a.xz", "a.zst", "a.bz2", "a.7z", "a.lz4", "a.br",
        "a.jpg", "a.JPEG", "a.png", "a.gif", "a.webp", "a.whl", "a.jar", "a.apk", "a.mp4",
        "a.webm", "a.woff2", "dir\\b.png",
    ],
)  # fmt: skip
def test_already_compressed_files_are_not_gzipped(path: str) -> None:
    assert content.content_encoding(path) == "identity"


@pytest.mark.parametrize(
    "path", ["a.txt", "a.log", "a.json", "a.html", "a.tar", "binary", "zip", "a.zip.txt"]
)
def test_other_files_are_gzipped(path: str) -> None:
    assert content.content_encoding(path) == "gzip"
