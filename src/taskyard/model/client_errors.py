"""What a client of the API sees go wrong: the server refused (`Refused`) or never answered
(`Unreachable`). The CLI (over the standard library) and the worker (over aiohttp) raise these
same two; neither carries credentials."""

from __future__ import annotations

import json


class Refused(Exception):
    """The server answered with an error status; `message` is its TaskCluster error body's."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}" if code else f"{status}: {message}")
        self.status = status
        self.code = code
        self.message = message


class Unreachable(Exception):
    """No usable answer: refused connection, unknown host, timeout, a reply that is not JSON."""


def refused(status: int, body: bytes, otherwise: str) -> Refused:
    """The refusal TaskCluster's error body `{code, message}` describes; without one, `otherwise`."""
    try:
        said = json.loads(body)
    except ValueError:
        said = None
    if isinstance(said, dict) and isinstance(said.get("message"), str):
        return Refused(status, str(said.get("code", "")), said["message"])
    return Refused(status, "", otherwise)
