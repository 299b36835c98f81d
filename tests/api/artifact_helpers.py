"""Claiming a task and declaring and uploading its artifacts, for the API's artifact tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx

from taskyard.model import dates
from tests.api.conftest import TASK_QUEUE_ID, Api, Credentials

QUEUE = TASK_QUEUE_ID.replace("/", "%2F")


async def running_task(api: Api, **overrides: Any) -> tuple[str, Credentials]:
    task_id, _ = await api.create_task(**overrides)
    response = await api.call("POST", f"/claim-work/{QUEUE}", {"workerGroup": "wg", "workerId": "w1"})
    (claim,) = response.json()["tasks"]
    return task_id, Credentials.from_response(claim["credentials"])


def expires(api: Api, hours: float = 1) -> str:
    return dates.to_iso(api.clock() + int(hours * dates.HOUR))


async def create(
    api: Api, task_id: str, name: str, body: dict[str, Any], creds: Any = None, run: int = 0
) -> httpx.Response:
    path = f"/task/{task_id}/runs/{run}/artifacts/{quote(name, safe='').replace('.', '%2E')}"
    return await api.call(
        "POST", path, {"expires": expires(api), **body}, **({"creds": creds} if creds else {})
    )


async def put(
    api: Api, url: str, data: bytes | AsyncIterator[bytes], content_type: str = "text/plain", **headers: str
) -> httpx.Response:
    return await api.client.put(url, content=data, headers={"content-type": content_type, **headers})
