"""Helpers the worker's tests share."""

from __future__ import annotations

from typing import Any


def claim_of(task_id: str, run_id: int) -> dict[str, Any]:
    """What claimWork hands over for a run, as much of it as the worker reads before it starts."""
    return {
        "status": {"taskId": task_id},
        "runId": run_id,
        "task": {},
        "credentials": {"clientId": "task-client", "accessToken": "token"},
        "takenUntil": "2030-01-01T00:00:00.000Z",
    }
