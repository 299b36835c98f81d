"""Starlette's internals that the API and the UI use (see the package's docstring): each with why.

Only `api/`, `ui/` and `cli/` import this module, as only they may import starlette."""

from __future__ import annotations

from typing import Any

import orjson

# `get_route_path(scope)`: the request's path below the app's `root_path`, as Starlette's own
# routes match it. Private (`starlette._utils`), but the routers and the UI's mount must cut the
# path as Starlette's routes do, or a deployment under a prefix would route otherwise.
from starlette._utils import get_route_path

# `Range` header errors, raised by `parse_range()`.
from starlette.responses import FileResponse, MalformedRangeHeader, RangeNotSatisfiable, Response

__all__ = ["MalformedRangeHeader", "RangeNotSatisfiable", "get_route_path", "json_response", "parse_range"]


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON answer (`None`: an empty body), its headers laid out as Starlette's `Response` lays
    them out: the given ones, then `content-length` and `content-type` unless given.

    Built with `Response.__new__` and its attributes set here, skipping `Response.__init__`: every
    API answer is one, and `__init__`'s rendering and header building cost a noticeable share of
    a small call's time. It relies on what `Response.__call__` reads (`status_code`, `body`,
    `raw_headers`, `background`), `media_type`, and `init_headers()` (given headers)."""
    answer = Response.__new__(Response)
    answer.status_code, answer.background = status, None
    answer.body = content = b"" if body is None else orjson.dumps(body)
    if body is not None:
        answer.media_type = "application/json"
    if headers:
        answer.init_headers(headers)
    elif status < 200 or status in (204, 304):
        answer.raw_headers = [] if body is None else [_JSON_TYPE]
    else:
        answer.raw_headers = [(b"content-length", b"%d" % len(content))]
        if body is not None:
            answer.raw_headers.append(_JSON_TYPE)
    return answer


_JSON_TYPE = (b"content-type", b"application/json")


def parse_range(value: str, size: int) -> list[tuple[int, int]]:
    """The byte ranges a `Range` header asks of `size` bytes, as `FileResponse` reads them:
    `MalformedRangeHeader` or `RangeNotSatisfiable` if it would refuse them. Its private
    `_parse_range_header`, so that the blob routes decide as the response that sends the bytes
    does, and answer both errors in TaskCluster's shape rather than its plain text."""
    return FileResponse._parse_range_header(value, size)
