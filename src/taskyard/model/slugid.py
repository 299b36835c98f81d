"""Slugids: 22-character URL-safe base64 UUIDs, as TaskCluster uses for task and group ids."""

from __future__ import annotations

import base64
import re
import uuid

# A v4 UUID with its first bit clear ("nice" slugids), exactly the pattern TaskCluster checks.
PATTERN = re.compile(r"^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$")


def nice() -> str:
    """A new random slugid whose first character is never `-`."""
    raw = bytearray(uuid.uuid4().bytes)
    raw[0] &= 0x7F
    return base64.urlsafe_b64encode(bytes(raw)).decode()[:22]


def is_valid(value: object) -> bool:
    return isinstance(value, str) and PATTERN.fullmatch(value) is not None
