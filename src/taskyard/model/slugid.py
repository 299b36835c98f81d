"""Slugids: 22-character URL-safe base64 UUIDs, as TaskCluster uses for task and group ids."""

from __future__ import annotations

import base64
import re
import uuid

from taskyard.model.identifiers import SLUGID

PATTERN = re.compile(SLUGID)


def nice() -> str:
    """A new random slugid whose first character is never `-`."""
    raw = bytearray(uuid.uuid4().bytes)
    raw[0] &= 0x7F
    return base64.urlsafe_b64encode(bytes(raw)).decode()[:22]


def is_valid(value: object) -> bool:
    return isinstance(value, str) and PATTERN.fullmatch(value) is not None
