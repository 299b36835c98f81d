"""HMAC signatures for the URLs the API serves without Hawk: blob uploads and downloads, live logs.

Such a URL is its own credential, so whoever followed a 303 (a browser, curl) needs nothing more.
Each use signs with its own key, derived from the deployment's secret key and a purpose string,
so a signature made for one kind of URL is never accepted by another. Pure computation: it lives
in `model/` so that both the blob stores and the queue can use it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence

from taskyard.model import digits
from taskyard.model.errors import InsufficientScopes
from taskyard.model.types import Millis

MAX_EXPIRES_DIGITS = 16


class BadSignature(InsufficientScopes):
    """The URL's signature is wrong or has expired."""


class Signer:
    """Signs a sequence of strings (method, path parts, expiry ...) with a per-purpose key."""

    def __init__(self, secret_key: str, purpose: str) -> None:
        self._key = hashlib.sha256(purpose.encode() + b"\0" + secret_key.encode()).digest()

    def sign(self, parts: Sequence[str]) -> str:
        """The URL-safe base64 HMAC-SHA256 of the parts, joined by newlines."""
        mac = hmac.new(self._key, "\n".join(parts).encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def matches(self, parts: Sequence[str], signature: str) -> bool:
        """Whether `signature` is ours for these parts (compared in constant time)."""
        return hmac.compare_digest(self.sign(parts).encode(), signature.encode())


def expiry(query: Mapping[str, str], what: str) -> Millis:
    """The URL's expiry (`e`, epoch ms); BadSignature if it is missing or not a plausible number."""
    expires = digits.parse_whole(query.get("e", ""), MAX_EXPIRES_DIGITS)
    if expires is None:
        raise BadSignature(f"the {what} has no valid expiry (e)")
    return expires


def check_unexpired(expires: Millis, now: Millis, what: str) -> None:
    """BadSignature once the URL's expiry has passed: the holder must ask the queue again."""
    if expires < now:
        raise BadSignature(f"the {what} has expired; ask the queue for a new one")
