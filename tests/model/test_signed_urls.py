"""The URL signer: per-purpose keys, and the same signatures the local blob store always made."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from taskyard.model import signed_urls
from taskyard.model.signed_urls import BadSignature, Signer


def test_signatures_match_the_blob_stores_original_scheme() -> None:
    """URLs handed out before the signer was shared must keep working."""
    key = hashlib.sha256(b"taskyard-blobs\0" + b"secret").digest()
    mac = hmac.new(key, b"GET\nt/0/a\n123\n", hashlib.sha256).digest()
    old = base64.urlsafe_b64encode(mac).decode().rstrip("=")
    assert Signer("secret", "taskyard-blobs").sign(("GET", "t/0/a", "123", "")) == old


def test_keys_differ_by_purpose_and_secret() -> None:
    parts = ("t", "0", "123")
    signature = Signer("secret", "a").sign(parts)
    assert Signer("secret", "a").matches(parts, signature)
    assert not Signer("secret", "b").matches(parts, signature)
    assert not Signer("other", "a").matches(parts, signature)
    assert not Signer("secret", "a").matches(("t", "1", "123"), signature)
    assert not Signer("secret", "a").matches(parts, "")


def test_expiry() -> None:
    assert signed_urls.expiry({"e": "123"}, "URL") == 123
    bad_values = ["", "-1", "+1", " 1", "1\n", "1e3", "1" * 17, "1" * 5000, "\u00b2", "\u0663", "\uff11"]
    for bad in [{}, *({"e": value} for value in bad_values)]:
        with pytest.raises(BadSignature, match="no valid expiry"):
            signed_urls.expiry(bad, "URL")
    signed_urls.check_unexpired(100, 100, "URL")
    with pytest.raises(BadSignature, match="expired"):
        signed_urls.check_unexpired(99, 100, "URL")
