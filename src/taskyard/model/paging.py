"""Paging by `continuationToken` and `limit`, as TaskCluster's list endpoints do.

Tokens are opaque to clients: URL-safe base64 of a small JSON value, either an offset
(`{"o": 40}`) or the key of the last row seen (`{"k": [...]}`). A token that does not
decode is a 400, never a 500 and never silently ignored.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson

from taskyard.model import digits
from taskyard.model.errors import InputError, InvalidRequestArguments

MAX_LIMIT = 1000
LIMIT_DIGITS = 9


@dataclass(frozen=True)
class Query:
    limit: int = MAX_LIMIT
    token: str | None = None


def parse(params: dict[str, str], *, max_limit: int = MAX_LIMIT) -> Query:
    """Read `limit` and `continuationToken` from query parameters."""
    raw = params.get("limit")
    limit = max_limit
    if raw is not None:
        if not digits.is_digits(raw):
            raise InvalidRequestArguments(f"limit must be a whole number (got {raw[:40]!r})")
        asked = digits.parse_whole(raw, LIMIT_DIGITS)  # None: more digits than any limit needs
        limit = max_limit if asked is None else max(1, min(asked, max_limit))
    token = params.get("continuationToken") or None
    return Query(limit, token)


def encode(value: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(value)).decode().rstrip("=")


def decode(token: str) -> Any:
    try:
        return orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        raise InputError("continuationToken is not one this server handed out") from None


MAX_TOKEN_INT = 2**53  # JavaScript's safe integers: far beyond any offset or timestamp we hand out
MAX_TOKEN_STR = 256


def _bad_token() -> InputError:
    return InputError("continuationToken is not one this server handed out")


def _sane(value: Any) -> bool:
    if type(value) is int:
        return 0 <= value <= MAX_TOKEN_INT or value == -1
    if type(value) is str:
        return len(value) <= MAX_TOKEN_STR and "\x00" not in value
    return False


def offset(query: Query) -> int:
    if query.token is None:
        return 0
    value = decode(query.token)
    found = value.get("o") if isinstance(value, dict) else None
    if type(found) is not int or not 0 <= found <= MAX_TOKEN_INT:
        raise _bad_token()
    return found


def offset_page(key: str, items: list[Any], start: int, limit: int) -> dict[str, Any]:
    """`{key: items[:limit]}` plus a token when the query found one row more than the limit."""
    page: dict[str, Any] = {key: items[:limit]}
    if len(items) > limit:
        page["continuationToken"] = encode({"o": start + limit})
    return page


def after(query: Query, width: int, default: list[Any]) -> list[Any]:
    """The last key seen, from a keyset token, or `default` to start at the beginning."""
    if query.token is None:
        return default
    value = decode(query.token)
    key = value.get("k") if isinstance(value, dict) else None
    if not isinstance(key, list) or len(key) != width:
        raise _bad_token()
    if any(type(k) is not type(d) or not _sane(k) for k, d in zip(key, default, strict=True)):
        raise _bad_token()
    return key


def keyset_page(key: str, items: list[Any], last_key: list[Any] | None, limit: int) -> dict[str, Any]:
    page: dict[str, Any] = {key: items[:limit]}
    if len(items) > limit and last_key is not None:
        page["continuationToken"] = encode({"k": last_key})
    return page
