"""How bytes a task uploaded are served: the headers every answer carries, and the artifact origin.

An artifact's Content-Type is the uploader's, and a live log's text is the worker's: neither is
ours to trust. A browser that opened `public/report.html` as HTML on the UI's origin would run its
script with the signed-in user's session (read the create form's CSRF token, post a task). So
every such answer (`headers_for()`) is served:
  - with `X-Content-Type-Options: nosniff`: a browser takes the Content-Type as given, and never
    guesses HTML from the bytes;
  - with `Content-Security-Policy: sandbox` and nothing allowed (no `allow-scripts`, no
    `allow-same-origin`): no script runs, and the document has an opaque origin of its own,
    whichever host served it; `default-src 'none'` loads nothing more (inline styles are let
    through, for the browser's own rendering of text and images);
  - for an active type (`is_active()`: one a browser would render as a document that can run
    script), with `Content-Disposition: attachment` as well: it is downloaded, not shown;
  - with `Referrer-Policy: no-referrer`: a link followed from it does not carry its signed URL.

Besides the headers, a deployment can serve these bytes from an origin of their own (`--blob-origin`,
`check_origin()`), on a host name other than the UI's: the browser then keeps them apart from the
UI's cookies and pages even if a browser ignored one of the headers.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

NOSNIFF = "nosniff"
POLICY = "default-src 'none'; style-src 'unsafe-inline'; sandbox"
HEADERS = {
    "x-content-type-options": NOSNIFF,
    "content-security-policy": POLICY,
    "referrer-policy": "no-referrer",
}
ATTACHMENT = "attachment"

# Media types a browser renders as a document that may run script, by their lower-cased
# `type/subtype`; any XML (`*/xml`, `*/*+xml`, XSLT) is one too, since XHTML, SVG and XSLT are.
ACTIVE_TYPES = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "image/svg+xml",
        "text/xml",
        "application/xml",
        "text/xsl",
        "application/xslt+xml",
        "text/javascript",
        "application/javascript",
        "application/x-javascript",
        "text/x-javascript",
        "text/ecmascript",
        "application/ecmascript",
        "application/x-ecmascript",
        "text/x-ecmascript",
        "text/jscript",
        "text/livescript",
        "text/javascript1.0",
        "text/javascript1.1",
        "text/javascript1.2",
        "text/javascript1.3",
        "text/javascript1.4",
        "text/javascript1.5",
        "application/pdf",  # its viewer runs the document's own script
        "multipart/x-mixed-replace",  # each part is rendered as its own Content-Type says
        # "No type": the types a browser sniffs for one (nosniff keeps it from finding HTML).
        "*/*",
        "unknown/unknown",
        "application/unknown",
    }
)
# `type/subtype` as RFC 9110 spells a token: anything else is a type a browser might read its own
# way (a comma-separated list, say, of which it takes the last), so it counts as active.
_ESSENCE = re.compile(r"[a-z0-9!#$%&'*+.^_`|~-]+/[a-z0-9!#$%&'*+.^_`|~-]+")


def essence(content_type: str) -> str:
    """The media type's lower-cased `type/subtype`, its parameters dropped ('' if it has none)."""
    return content_type.split(";", 1)[0].strip().lower()


def is_active(content_type: str) -> bool:
    """Whether a browser could render `content_type` as a document that runs script: HTML, XHTML,
    SVG, any XML, JavaScript, PDF. Fails closed: a value that is not one plain `type/subtype`
    (with parameters, and no comma anywhere) is active too."""
    kind = essence(content_type)
    if "," in content_type or not _ESSENCE.fullmatch(kind):
        return True
    subtype = kind.split("/", 1)[1]
    return kind in ACTIVE_TYPES or subtype == "xml" or subtype.endswith("+xml") or "script" in subtype


def headers_for(content_type: str) -> dict[str, str]:
    """The headers an answer of uploaded bytes of `content_type` carries besides its own."""
    if is_active(content_type):
        return {**HEADERS, "content-disposition": ATTACHMENT}
    return dict(HEADERS)


def check_origin(value: str, root_url: str) -> str:
    """`value` as an origin (`scheme://host[:port]`, no path) on a host name other than
    `root_url`'s; ValueError saying what is wrong. Another port is not enough: browsers send a
    host's cookies to each of its ports."""
    try:
        parts = urlsplit(value.strip().rstrip("/"))
        port = parts.port
    except ValueError:
        raise ValueError("must be a URL like https://artifacts.example.com") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL like https://artifacts.example.com")
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError("must be an origin, scheme://host[:port], with no path, query or user")
    if parts.hostname == urlsplit(root_url).hostname:
        raise ValueError(
            f"must be on a host name other than the root URL's ({parts.hostname}): browsers share "
            "one host's cookies between its ports"
        )
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def host_name(authority: str | None) -> str | None:
    """The host name (lower-cased, no port) a request's Host header names; None if it names none."""
    if not authority:
        return None
    try:
        return urlsplit("//" + authority).hostname
    except ValueError:
        return None
