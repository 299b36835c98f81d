"""What a client of the API sees go wrong: the server refused (`Refused`) or never answered
(`Unreachable`). The CLI (over the standard library) and the worker (over aiohttp) raise these
same two; neither carries credentials."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_CODE_BLOCK = re.compile(r"```\s*(.*?)```", re.DOTALL)


class Refused(Exception):
    """The server answered with an error status; `message` is its TaskCluster error body's."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}" if code else f"{status}: {message}")
        self.status = status
        self.code = code
        self.message = message

    def missing_scopes(self) -> str | None:
        """For a 403 InsufficientScopes: the scopes the client lacks, in words (`a and (b or c)`)."""
        if self.code != "InsufficientScopes":
            return None
        blocks = _CODE_BLOCK.findall(self.message)
        if not blocks:
            return None
        try:
            return scope_expression(json.loads(blocks[0]))
        except ValueError:
            return str(blocks[0]).strip()  # a single scope, as it is


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


def scope_expression(value: Any, *, nested: bool = False) -> str:
    """A scope expression as words: `a and (b or c)`."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and len(value) == 1:
        ((kind, items),) = value.items()
        if kind in ("AllOf", "AnyOf") and isinstance(items, list):
            if not items:
                return "nothing" if kind == "AllOf" else "an impossible scope"
            joined = (" and " if kind == "AllOf" else " or ").join(
                scope_expression(i, nested=True) for i in items
            )
            return f"({joined})" if nested and len(items) > 1 else joined
    return json.dumps(value, separators=(",", ":"))
