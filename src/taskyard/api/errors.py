"""Error bodies as TaskCluster writes them: `{code, message, requestInfo}`."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

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


def error_response(error: TaskyardError, *, method: str, params: dict[str, str], payload: Any) -> Response:
    """The answer for `error`: its status and body, `WWW-Authenticate` on a 401, `Retry-After` when
    the error says how long to wait (a database restarting)."""
    headers = {}
    if error.status == 401:
        headers["www-authenticate"] = "hawk"
    if error.retry_after is not None:
        headers["retry-after"] = str(error.retry_after)
    body = error_body(error, method=method, params=params, payload=payload)
    return Response(orjson.dumps(body), error.status, headers, media_type="application/json")
