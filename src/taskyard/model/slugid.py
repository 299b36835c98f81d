"""Slugids: 22-character URL-safe base64 UUIDs, as TaskCluster uses for task and group ids."""

from __future__ import annotations

import base64
import hashlib
import os
import re

from taskyard.model.identifiers import SLUGID

PATTERN = re.compile(SLUGID)


def nice() -> str:
    """A new random slugid whose first character is never `-`."""
    raw = random_uuid_bytes()
    raw[0] &= 0x7F
    return base64.urlsafe_b64encode(raw).decode()[:22]


def random_uuid_bytes() -> bytearray:
    """The 16 bytes of a random (version 4) UUID: `uuid.uuid4().bytes` without building a UUID."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return raw


def is_valid(value: object) -> bool:
    return isinstance(value, str) and PATTERN.fullmatch(value) is not None


def derived(name: str) -> str:
    """A slugid that is always the same for `name`: a v4-shaped UUID made from its SHA-256."""
    raw = bytearray(hashlib.sha256(name.encode()).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4, as the slugid pattern wants
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    raw[0] &= 0x7F  # never a leading `-`
    return base64.urlsafe_b64encode(bytes(raw)).decode()[:22]
