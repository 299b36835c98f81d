"""Helpers the auth service's tests share."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from taskyard.model import dates

EXPIRES = dates.parse_iso("2999-01-01T00:00:00.000Z")


async def poll_until(probe: Any, expected: object, timeout: float = 5.0) -> None:
    give_up = time.monotonic() + timeout
    while (got := await probe()) != expected:
        assert time.monotonic() < give_up, f"still {got!r}, not {expected!r}"
        await asyncio.sleep(0.02)
