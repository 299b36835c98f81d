"""What the UI's forms share: reading a posted form, and where a form may send the browser next.

The UI's forms post `application/x-www-form-urlencoded` bodies, read here by the API's own
bounded read (`api.app.read_body`), within its body limit (anything else reads as an empty form,
which then fails its CSRF check). A `next` address, from a query or a form, is followed only if it
is a path on this server: never another site.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from starlette.requests import Request

from taskyard.api.app import read_body
from taskyard.model.errors import InputError, MalformedPayload

FORM_TYPE = "application/x-www-form-urlencoded"
MAX_FIELDS = 50
MAX_NEXT = 2000
DONE = "done"  # the query flag a redirect after an action carries: which notice the page shows


async def read(request: Request, limit: int) -> dict[str, str]:
    """The posted form's fields (the first value of each); empty unless the body is a URL-encoded form."""
    try:
        raw = await read_body(request, limit)
    except MalformedPayload:  # the client hung up before the whole form: nobody reads an answer
        return {}
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != FORM_TYPE:
        return {}
    text = raw.decode("utf-8", "replace")
    try:
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FIELDS)
    except ValueError:
        raise InputError(f"a form may have at most {MAX_FIELDS} fields") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        fields.setdefault(name, value)
    return fields


def local_path(value: str | None) -> str | None:
    """`value` if it is a path on this server (`/tasks/x?y`), else None: never another site's URL."""
    if not value or len(value) > MAX_NEXT or not value.startswith("/") or value.startswith("//"):
        return None
    if "\\" in value or any(ord(c) < 0x20 or c == "\x7f" for c in value):
        return None  # browsers read `/\evil.example` as another host; control characters are no path
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return None
    return value


def referrer_path(request: Request) -> str | None:
    """The page the form was on (the Referer, if it is this server's), as a local path."""
    referer = request.headers.get("referer")
    if not referer:
        return None
    parts = urlsplit(referer)
    if parts.netloc != request.url.netloc or parts.scheme not in ("http", "https"):
        return None
    return local_path(urlunsplit(("", "", parts.path, parts.query, "")))


def back(request: Request, form: dict[str, str], fallback: str) -> str:
    """Where to send the browser after an action: the form's `next`, the page it was on, or `fallback`."""
    return local_path(form.get("next")) or referrer_path(request) or fallback


def with_done(path: str, done: str) -> str:
    """`path` with the query flag `done=<done>` (replacing one it had): the page's one-line notice."""
    parts = urlsplit(path)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != DONE]
    query.append((DONE, done))
    return urlunsplit(("", "", parts.path, urlencode(query), ""))
