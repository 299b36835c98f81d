"""The Content-Type and Content-Encoding an artifact is uploaded with, guessed from its file name.

As in generic-worker's payload, an artifact may set `contentType` and `contentEncoding`; otherwise
the worker guesses the type from the extension and gzips everything except files that are
already compressed, where gzip would only cost time.
"""

from __future__ import annotations

import mimetypes
from pathlib import PurePosixPath

OCTET_STREAM = "application/octet-stream"
TEXT_PLAIN = "text/plain; charset=utf-8"

# A fresh MimeTypes holds only Python's built-in table: unlike `mimetypes.guess_type` it does
# not read /etc/mime.types, so the same file gets the same type on every machine.
_BUILT_IN = mimetypes.MimeTypes()

# Where the built-in table is silent, differs between Python versions, or (for compressed
# files) would describe the content *inside* the compression rather than the file itself.
_TYPES = {
    ".log": TEXT_PLAIN,
    ".txt": TEXT_PLAIN,
    ".json": "application/json",
    ".md": "text/markdown; charset=utf-8",
    ".yml": "application/yaml",
    ".yaml": "application/yaml",
    ".gz": "application/gzip",
    ".tgz": "application/gzip",
    ".bz2": "application/x-bzip2",
    ".xz": "application/x-xz",
    ".zst": "application/zstd",
    ".lz4": "application/x-lz4",
    ".br": "application/x-brotli",
    ".7z": "application/x-7z-compressed",
    ".jar": "application/java-archive",
    ".apk": "application/vnd.android.package-archive",
    ".whl": "application/zip",
    ".webp": "image/webp",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
}

# Formats that are compressed already: gzipping them again saves nothing.
_ALREADY_COMPRESSED = frozenset(
    {
        # archives and compressors
        ".7z", ".apk", ".br", ".bz2", ".deb", ".dmg", ".gz", ".jar", ".lz4", ".lzma", ".rar",
        ".rpm", ".tbz", ".tbz2", ".tgz", ".txz", ".whl", ".xz", ".zip", ".zst",
        # images, audio, video, fonts
        ".avif", ".flv", ".gif", ".heic", ".jpeg", ".jpg", ".m4a", ".m4v", ".mkv", ".mov",
        ".mp3", ".mp4", ".ogg", ".png", ".swf", ".webm", ".webp", ".woff", ".woff2",
    }
)  # fmt: skip


def content_type(path: str) -> str:
    """The Content-Type for the file at `path`, from its extension; application/octet-stream if unknown."""
    suffix = _suffix(path)
    if suffix in _TYPES:
        return _TYPES[suffix]
    return _BUILT_IN.types_map[True].get(suffix, OCTET_STREAM)


def content_encoding(path: str) -> str:
    """`identity` for a file whose format is already compressed, otherwise `gzip`."""
    return "identity" if _suffix(path) in _ALREADY_COMPRESSED else "gzip"


def _suffix(path: str) -> str:
    # Payload paths may use either separator, as generic-worker allows; only the last component matters.
    return PurePosixPath(path.replace("\\", "/")).suffix.lower()
