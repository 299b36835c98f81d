"""Paging by `continuationToken` and `limit`, as TaskCluster's list endpoints do.

Tokens are opaque to clients: URL-safe base64 of a small JSON value, either an offset
(`{"o": 40}`) or the key of the last row seen (`{"k": [...]}`). A token that does not
decode is a 400, never a 500 and never silently ignored.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sized
from dataclasses import dataclass
from typing import NotRequired, TypedDict

import orjson

from taskyard.model import digits
from taskyard.model.errors import InputError, InvalidRequestArguments

MAX_LIMIT = 1000
LIMIT_DIGITS = 9


class Page(TypedDict):
    """What every list answer has: a token when there is more. Each list's TypedDict adds its items,
    and is built as `{"items": shown, **paging.more(token)}`."""

    continuationToken: NotRequired[str]


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


def encode(value: object) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(value)).decode().rstrip("=")


def decode(token: str) -> object:
    try:
        value: object = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return value
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        raise InputError("continuationToken is not one this server handed out") from None


MAX_TOKEN_INT = 2**53  # JavaScript's safe integers: far beyond any offset or timestamp we hand out
MAX_TOKEN_STR = 256


def _bad_token() -> InputError:
    return InputError("continuationToken is not one this server handed out")


def _sane(value: object) -> bool:
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


def offset_token(items: Sized, start: int, limit: int) -> str | None:
    """The next page's token when the query found one row more than the limit (None: no more)."""
    return encode({"o": start + limit}) if len(items) > limit else None


def keyset_token(items: Sized, last_key: list[object] | None, limit: int) -> str | None:
    """The next page's token, holding the key of the last row shown (None: no more)."""
    return encode({"k": last_key}) if len(items) > limit and last_key is not None else None


def more(token: str | None) -> Page:
    """The continuationToken part of a list answer: empty on the last page."""
    return {} if token is None else {"continuationToken": token}


def after(query: Query, width: int, default: list[object]) -> list[object]:
    """The last key seen, from a keyset token, or `default` to start at the beginning."""
    if query.token is None:
        return default
    value = decode(query.token)
    key = value.get("k") if isinstance(value, dict) else None
    if isinstance(value, dict) and type(value.get("o")) is int:
        raise InputError(
            "continuationToken is from before this list paged by key (it holds an offset): "
            "list again from the start"
        )
    if not isinstance(key, list) or len(key) != width:
        raise _bad_token()
    if any(type(k) is not type(d) or not _sane(k) for k, d in zip(key, default, strict=True)):
        raise _bad_token()
    return key
