"""Building task definitions for tests."""

from __future__ import annotations

from typing import Any

from taskyard.model import dates, slugid


def definition(now: int, **overrides: Any) -> dict[str, Any]:
    """A minimal valid task definition, created `now`, due in an hour."""
    body: dict[str, Any] = {
        "taskQueueId": "test-prov/test-worker",
        "created": dates.to_iso(now),
        "deadline": dates.to_iso(now + dates.HOUR),
        "payload": {},
        "metadata": {
            "name": "t",
            "description": "a test task",
            "owner": "dev@example.com",
            "source": "https://example.com/t",
        },
    }
    body.update(overrides)
    return body


def new_id() -> str:
    return slugid.nice()
