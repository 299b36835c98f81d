"""Error bodies as TaskCluster writes them: `{code, message, requestInfo}`."""

from __future__ import annotations

from typing import Any

from taskyard.model import dates
from taskyard.model.errors import TaskyardError


def error_body(error: TaskyardError, *, method: str, params: dict[str, str], payload: Any) -> dict[str, Any]:
    """The JSON body for `error`; the message ends with a footer naming the call, as TaskCluster's do."""
    time = dates.to_iso(dates.now_ms())
    footer = (
        f"\n\n---\n\n* method:     {method}\n* errorCode:  {error.code}\n"
        f"* statusCode: {error.status}\n* time:       {time}"
    )
    return {
        "code": error.code,
        "message": error.message + footer,
        "requestInfo": {"method": method, "params": params, "payload": payload, "time": time},
    }
