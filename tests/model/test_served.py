"""How uploaded bytes are served: which types are active, the headers, the artifact origin."""

from __future__ import annotations

import pytest

from taskyard.model import served


@pytest.mark.parametrize(
    "content_type",
    [
        "text/html",
        "TEXT/HTML; charset=utf-8",
        " text/html ;charset=utf-8",
        "application/xhtml+xml",
        "image/svg+xml",
        "Image/SVG+XML",
        "text/xml",
        "application/xml",
        "application/rss+xml",
        "application/vnd.wap.xhtml+xml",
        "text/xsl",
        "text/javascript",
        "application/javascript; charset=utf-8",
        "application/x-javascript",
        "text/ecmascript",
        "application/pdf",
        "multipart/x-mixed-replace; boundary=x",
        # Not one plain type: a browser could read it its own way (the last of a list, say).
        "text/plain, text/html",
        'text/plain; x="a,text/html"',
        "",
        "html",
        "text/",
        "text/ html",
        "*/*",
        "unknown/unknown",
    ],
)
def test_active_types_are_attachments(content_type: str) -> None:
    assert served.is_active(content_type)
    headers = served.headers_for(content_type)
    assert headers["content-disposition"] == "attachment"
    assert headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in headers["content-security-policy"]


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain; charset=utf-8",
        "application/json",
        "image/png",
        "application/octet-stream",
        "application/binary",
        "application/gzip",
        "text/css",
        "video/mp4",
    ],
)
def test_plain_types_are_shown_sandboxed(content_type: str) -> None:
    assert not served.is_active(content_type)
    headers = served.headers_for(content_type)
    assert "content-disposition" not in headers
    assert headers["x-content-type-options"] == "nosniff"
    policy = [part.strip() for part in headers["content-security-policy"].split(";")]
    assert "sandbox" in policy  # nothing allowed: no scripts, an opaque origin
    assert "default-src 'none'" in policy


def test_the_headers_are_a_fresh_copy() -> None:
    served.headers_for("text/plain")["x-content-type-options"] = "changed"
    assert served.headers_for("text/plain")["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    ("value", "root_url", "origin"),
    [
        ("https://artifacts.example.com", "https://ci.example.com", "https://artifacts.example.com"),
        ("https://Artifacts.Example.com/", "https://ci.example.com", "https://artifacts.example.com"),
        ("http://localhost:8080", "http://127.0.0.1:8080", "http://localhost:8080"),
        ("http://[::1]:8080", "http://127.0.0.1:8080", "http://[::1]:8080"),
    ],
)
def test_a_blob_origin_is_kept_as_an_origin(value: str, root_url: str, origin: str) -> None:
    assert served.check_origin(value, root_url) == origin


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("artifacts.example.com", "http:// or https://"),
        ("ftp://artifacts.example.com", "http:// or https://"),
        ("https://", "http:// or https://"),
        ("https://artifacts.example.com/blobs", "no path"),
        ("https://artifacts.example.com?x=1", "no path"),
        ("https://user@artifacts.example.com", "no path"),
        ("https://artifacts.example.com:99999", "a URL like"),
        ("https://ci.example.com:8443", "host name other than the root URL's"),
        ("https://CI.example.com", "host name other than the root URL's"),
    ],
)
def test_a_bad_blob_origin_says_why(value: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        served.check_origin(value, "https://ci.example.com")


@pytest.mark.parametrize(
    ("authority", "host"),
    [
        ("artifacts.example.com", "artifacts.example.com"),
        ("Artifacts.Example.com:8443", "artifacts.example.com"),
        ("[::1]:8080", "::1"),
        ("", None),
        (None, None),
        ("[bad", None),
    ],
)
def test_host_name_of_a_host_header(authority: str | None, host: str | None) -> None:
    assert served.host_name(authority) == host
