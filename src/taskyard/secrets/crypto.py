"""Sealing secret values at rest: AES-256-GCM, keyed from the deployment's secret key.

The key is derived with HKDF-SHA256 from the secret key and a label naming its one use, so it is
no other key the secret key derives (client tokens, signed URLs). Each sealed value is stored with
the id of the key that sealed it, a fingerprint that tells keys apart and gives none away: when
the deployment's secret key changes, a server given the old one too (`old_secret_key`) still
opens what the old key sealed, and re-seals it under the new (`store.reseal`).

The associated data is the secret's name: a value copied to another row does not open there.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from taskyard.model.errors import ConfigError, Unavailable

PURPOSE = b"taskyard secrets: AES-256-GCM key for secret values"
NONCE_BYTES = 12


def derive_key(secret_key: str) -> bytes:
    """The 256-bit key that seals secret values, derived from the deployment's secret key."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=PURPOSE).derive(secret_key.encode())


def key_id(key: bytes) -> str:
    """A fingerprint naming `key` in the table (16 hex digits); it reveals nothing of the key."""
    return hmac.new(key, b"taskyard secrets: key id", hashlib.sha256).hexdigest()[:16]


def _associated(name: str) -> bytes:
    return b"taskyard secret\x00" + name.encode()


class Unreadable(Unavailable):
    """A stored value this server can't open: sealed under a key it doesn't hold, or altered."""


@dataclass(frozen=True)
class Sealer:
    """Seals under the current key; opens what the current key or the old one sealed."""

    keys: dict[str, AESGCM]
    current: str
    old: str | None = None

    @classmethod
    def from_secret_keys(cls, secret_key: str, old_secret_key: str = "") -> Sealer:
        if not secret_key:
            raise ConfigError("secret-key", "", "must not be empty")
        key = derive_key(secret_key)
        keys = {key_id(key): AESGCM(key)}
        old = None
        if old_secret_key and old_secret_key != secret_key:
            old_key = derive_key(old_secret_key)
            old = key_id(old_key)
            keys[old] = AESGCM(old_key)
        return cls(keys, key_id(key), old)

    def seal(self, name: str, plaintext: bytes) -> tuple[str, str]:
        """`(key id, sealed text)`: a fresh nonce, then the ciphertext and its tag, in base64."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self.keys[self.current].encrypt(nonce, plaintext, _associated(name))
        return self.current, base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, name: str, kid: str, text: str) -> bytes:
        """The plaintext of `name`'s stored value; 503 if this server can't open it."""
        key = self.keys.get(kid)
        if key is None:
            raise Unreadable(
                f"secret {name!r} was sealed with a key this server does not hold (key id {kid}): "
                "start it with the secret key that sealed it, or that key as TASKYARD_OLD_SECRET_KEY"
            )
        try:
            raw = base64.b64decode(text, validate=True)
            return key.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _associated(name))
        except (InvalidTag, binascii.Error, ValueError):
            raise Unreadable(
                f"secret {name!r} does not open with its key: the stored value was altered"
            ) from None
