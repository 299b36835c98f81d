"""Helpers the API's tests share: auth/v1 calls, live-log appends, and reading an event stream."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from tests.api.conftest import AUTH_PREFIX, ROOT, TASK_QUEUE_ID, Api, Credentials, hawk_header

QUEUE = TASK_QUEUE_ID.replace("/", "%2F")
EXPIRES = "2999-01-01T00:00:00.000Z"
ANONYMOUS_ROLE = ["queue:get-artifact:public/*"]
NAME = "public/logs/live.log"


async def call(api: Api, method: str, path: str, *args: Any, **kwargs: Any) -> httpx.Response:
    """`api.call` below /api/auth/v1."""
    return await api.call(method, path, *args, prefix=AUTH_PREFIX, **kwargs)


async def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


async def create_client(api: Api, client_id: str, *scopes: str, creds: Credentials = ROOT) -> Credentials:
    body = {"description": f"client {client_id}", "expires": EXPIRES, "scopes": list(scopes)}
    reply = await ok(await call(api, "PUT", f"/clients/{encode(client_id)}", body, creds=creds))
    return Credentials(client_id, reply["accessToken"])


def encode(value: str) -> str:
    return quote(value, safe="")


async def running_task(api: Api, worker_id: str = "w1") -> tuple[str, Credentials]:
    task_id, _ = await api.create_task()
    response = await api.call("POST", f"/claim-work/{QUEUE}", {"workerGroup": "wg", "workerId": worker_id})
    (claim,) = response.json()["tasks"]
    assert claim["status"]["taskId"] == task_id
    return task_id, Credentials.from_response(claim["credentials"])


async def append(
    api: Api, task_id: str, creds: Credentials | None, body: Any, name: str = NAME
) -> httpx.Response:
    return await api.call("POST", f"/task/{task_id}/runs/0/live-log/{name}", body, creds=creds)


@dataclass
class Reader:
    """An open stream, its SSE events parsed as they come."""

    response: httpx.Response
    lines: AsyncIterator[str]
    last_id: str | None = None
    comments: list[str] = field(default_factory=list)

    async def event(self) -> dict[str, str]:
        """The next event with data (an id alone only moves `last_id`), as its fields."""
        fields: dict[str, str] = {}
        while True:
            line = await asyncio.wait_for(anext(self.lines), 10)
            if line == "":
                if "id" in fields:
                    self.last_id = fields["id"]
                if "data" in fields:
                    return fields
                fields = {}
            elif line.startswith(":"):
                self.comments.append(line)
            else:
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")

    async def message(self) -> dict[str, Any]:
        fields = await self.event()
        assert fields.get("event", "message") == "message", fields
        data: dict[str, Any] = orjson.loads(fields["data"])
        data["id"] = fields["id"]
        return data

    async def opened(self) -> None:
        """Read the stream's opening (with an id alone, for a fresh start: `last_id`)."""
        while (line := await asyncio.wait_for(anext(self.lines), 10)) != "":
            if line.startswith("id: "):
                self.last_id = line.removeprefix("id: ")


@contextlib.asynccontextmanager
async def following(
    url: str, creds: Credentials | None, headers: dict[str, str] | None = None
) -> AsyncIterator[Reader]:
    sent = dict(headers or {})
    if creds is not None:
        sent["authorization"] = hawk_header("GET", url, b"", creds)
    async with httpx.AsyncClient(timeout=30) as client, client.stream("GET", url, headers=sent) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert response.headers["cache-control"] == "no-store"
        reader = Reader(response, response.aiter_lines())
        await reader.opened()
        yield reader
