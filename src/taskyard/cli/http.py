"""A small HTTP client for a deployment's API: Hawk-signed JSON requests over the standard library.

Failures come back as two errors only, the worker's too (`model/client_errors.py`): `Refused` (the
server answered with an error; its TaskCluster error body's `message` is kept) and `Unreachable`
(no answer at all). Neither carries credentials.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from taskyard.auth import hawk_client
from taskyard.model import client_errors
from taskyard.model.client_errors import Refused, Unreachable

JSON_TYPE = "application/json"
TIMEOUT = 60.0  # seconds for one request; the auth API answers in milliseconds


@dataclass(frozen=True)
class Connection:
    """Where the deployment is and who is calling; `repr()` never shows the secrets."""

    root_url: str
    client_id: str
    access_token: str = field(repr=False)
    certificate: str = field(default="", repr=False)  # temporary credentials' certificate (JSON)
    timeout: float = TIMEOUT

    def url(self, service: str, path: str, query: Mapping[str, str] | None = None) -> str:
        """`<rootUrl>/api/<service>/v1<path>[?query]`."""
        tail = f"?{urlencode(query)}" if query else ""
        return f"{self.root_url}/api/{service}/v1{path}{tail}"


def segment(value: str) -> str:
    """One path segment: every `/` and other reserved character percent-encoded."""
    return quote(value, safe="")


def call(
    connection: Connection,
    method: str,
    path: str,
    *,
    service: str = "auth",
    body: Any = None,
    query: Mapping[str, str] | None = None,
) -> Any:
    """Send one signed request; answer its JSON body (None for an empty one)."""
    url = connection.url(service, path, query)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Accept", JSON_TYPE)
    if data is not None:
        request.add_header("Content-Type", JSON_TYPE)
    sign(request, connection, data)
    return _send(request, connection.timeout)


def sign(request: urllib.request.Request, connection: Connection, data: bytes | None = None) -> None:
    """Add the Hawk header; none without credentials (an anonymous call)."""
    if connection.client_id:
        header = authorization(connection, request.get_method(), request.full_url, data)
        request.add_header("Authorization", header)


def authorization(connection: Connection, method: str, url: str, data: bytes | None) -> str:
    return hawk_client.sign_header(
        method,
        url,
        data,
        JSON_TYPE,
        connection.client_id,
        connection.access_token,
        ext=hawk_client.certificate_ext(connection.certificate),
    )


class Failed(Exception):
    """The command cannot go on; its message is printed and it exits 1."""


@contextlib.contextmanager
def translated(request: urllib.request.Request) -> Iterator[None]:
    """Turn urllib's errors for `request` into Refused (the server said no) or Unreachable."""
    try:
        yield
    except urllib.error.HTTPError as exc:
        with exc:
            raise refused(exc.code, exc.reason, exc.read()) from None
    except urllib.error.URLError as exc:
        raise Unreachable(f"cannot reach {where(request)}: {why(exc.reason)}") from None
    except (OSError, http.client.HTTPException) as exc:  # timeouts, replies cut short or not HTTP
        raise Unreachable(f"no answer from {where(request)}: {why(exc)}") from None


def _send(request: urllib.request.Request, timeout: float) -> Any:
    with translated(request), urllib.request.urlopen(request, timeout=timeout) as response:
        raw = response.read()
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise Unreachable(f"{where(request)} answered something that is not JSON: is it taskyard?") from None


def where(request: urllib.request.Request) -> str:
    """`http://host:port (GET /api/...)`: the server, then the request."""
    parts = urlsplit(request.full_url)
    return f"{parts.scheme}://{parts.netloc} ({request.get_method()} {parts.path})"


def why(reason: object) -> str:
    """`Connection refused` rather than `[Errno 111] Connection refused`."""
    if isinstance(reason, OSError) and reason.strerror:
        return str(reason.strerror)
    said = " ".join(str(reason).split())
    return f"{type(reason).__name__}: {said}" if isinstance(reason, Exception) and said else said or "?"


def refused(status: int, reason: object, raw: bytes) -> Refused:
    """The error TaskCluster's body `{code, message}` describes, or the bare status if there is none."""
    return client_errors.refused(status, raw, f"HTTP {status} {reason}")
