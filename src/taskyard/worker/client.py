"""The worker's side of the queue API: Hawk-signed JSON calls over one pooled HTTP client.

Transient failures (no connection, a timeout, a 5xx) are retried with backoff a few times, so a
restarting server or a busy database costs a task nothing. Any other refusal comes back at once
as `Refused` with the status, TaskCluster's error code and its message (`model/client_errors.py`).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson

from taskyard.auth import hawk_client
from taskyard.model import client_errors
from taskyard.model.client_errors import Refused, Unreachable

log = logging.getLogger(__name__)
JSON_TYPE = "application/json"
ATTEMPTS = 5
CLAIM_TIMEOUT = 60.0  # claimWork long-polls about 20 s on the server
CALL_TIMEOUT = 30.0
UPLOAD_TIMEOUT = 300.0


@dataclass(frozen=True)
class Credentials:
    """A client's credentials; `repr()` never shows the secrets."""

    client_id: str
    access_token: str = field(repr=False)
    certificate: str | None = field(default=None, repr=False)

    @functools.cached_property
    def ext(self) -> str | None:
        """Hawk's `ext` for these credentials (their certificate), made once: every call sends it."""
        return hawk_client.certificate_ext(self.certificate)

    @staticmethod
    def from_claim(value: Any) -> Credentials:
        cert = value.get("certificate")
        return Credentials(value["clientId"], value["accessToken"], cert or None)


def segment(value: str) -> str:
    return quote(value, safe="")


class QueueClient:
    """Calls `<rootUrl>/api/queue/v1/...`; each call names the credentials it is made with."""

    def __init__(self, root_url: str, *, attempts: int = ATTEMPTS) -> None:
        self.root_url = root_url.rstrip("/")
        self._attempts = attempts
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=100), timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT)
        )

    async def close(self) -> None:
        await self._http.close()

    def url(self, path: str) -> str:
        return f"{self.root_url}/api/queue/v1{path}"

    async def call(
        self, method: str, path: str, creds: Credentials, body: Any = None, *, timeout: float = CALL_TIMEOUT
    ) -> Any:
        """One signed call, retried while the failure is transient; answers the decoded JSON body."""
        return await self._call_url(method, self.url(path), path, creds, body, timeout)

    async def _call_url(
        self, method: str, url: str, path: str, creds: Credentials | None, body: Any, timeout: float
    ) -> Any:
        data = None if body is None else orjson.dumps(body)
        for attempt in range(self._attempts):
            headers = {"Accept": JSON_TYPE}
            if creds is not None:  # None: an unsigned call (registerWorker)
                headers["Authorization"] = _authorization(method, url, data, creds)
            if data is not None:
                headers["Content-Type"] = JSON_TYPE
            try:
                status, reason, content = await self._send(method, url, data, headers, timeout)
            except (aiohttp.ClientError, TimeoutError) as exc:
                failure: Exception = Unreachable(f"{method} {path}: {type(exc).__name__}: {exc}")
            else:
                if status < 400:
                    return orjson.loads(content) if content else None
                failure = _refused(status, reason, content)
                if status < 500:
                    raise failure
            if attempt + 1 < self._attempts:
                await asyncio.sleep(_backoff(attempt))
        raise failure

    async def _send(
        self, method: str, url: str, data: Any, headers: dict[str, str], timeout: float
    ) -> tuple[int, str, bytes]:
        limit = aiohttp.ClientTimeout(total=timeout)
        async with self._http.request(method, url, data=data, headers=headers, timeout=limit) as response:
            return response.status, response.reason or "", await response.read()

    async def worker_manager(self, method: str, path: str, creds: Credentials | None, body: Any) -> Any:
        """A call to the worker-manager (`registerWorker` unsigned: `creds` None)."""
        url = f"{self.root_url}/api/worker-manager/v1{path}"
        return await self._call_url(method, url, path, creds, body, CALL_TIMEOUT)

    # The queue's calls ---------------------------------------------------------------------

    async def claim_work(
        self, task_queue_id: str, worker_group: str, worker_id: str, tasks: int, creds: Credentials
    ) -> list[Any]:
        body = {"tasks": tasks, "workerGroup": worker_group, "workerId": worker_id}
        answer = await self.call("POST", f"/claim-work/{task_queue_id}", creds, body, timeout=CLAIM_TIMEOUT)
        return list(answer["tasks"])

    async def claim_task(
        self,
        task_id: str,
        run_id: int,
        worker_group: str,
        worker_id: str,
        proof: dict[str, str],
        creds: Credentials,
    ) -> Any:
        """claimTask, quoting the poll message the run was found in (`proof`: messageId, receipt,
        signature)."""
        body = {"workerGroup": worker_group, "workerId": worker_id, **proof}
        return await self.call("POST", f"/task/{task_id}/runs/{run_id}/claim", creds, body)

    async def poll_task_urls(self, task_queue_id: str, creds: Credentials) -> Any:
        """pollTaskUrls, plus `expires_in`: seconds until its URLs expire, by the server's clock."""
        answer = await self.call("GET", f"/poll-task-url/{task_queue_id}", creds)
        expires = datetime.fromisoformat(answer["expires"].replace("Z", "+00:00"))
        answer["expires_in"] = max(0.0, (expires - datetime.now(UTC)).total_seconds())
        return answer

    async def unsigned(self, method: str, url: str) -> tuple[int, bytes]:
        """A request to a signed URL (the poll queues'): no Hawk, no retries; Unreachable if no answer."""
        try:
            status, _, content = await self._send(method, url, None, {}, CALL_TIMEOUT)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Unreachable(f"{method} {url.split('?')[0]}: {type(exc).__name__}: {exc}") from None
        return status, content

    async def reclaim(self, task_id: str, run_id: int, creds: Credentials) -> Any:
        return await self.call("POST", f"/task/{task_id}/runs/{run_id}/reclaim", creds, {})

    async def report(
        self, task_id: str, run_id: int, state: str, reason: str | None, creds: Credentials
    ) -> Any:
        verb = {"completed": "completed", "failed": "failed", "exception": "exception"}[state]
        body = {"reason": reason} if state == "exception" else {}
        return await self.call("POST", f"/task/{task_id}/runs/{run_id}/{verb}", creds, body)

    async def statuses(self, task_ids: list[str], creds: Credentials) -> dict[str, Any]:
        """The status of each task, in one call."""
        answer = await self.call("POST", "/tasks/status", creds, {"taskIds": task_ids})
        return {s["taskId"]: s["status"] for s in answer["statuses"]}

    async def create_artifact(
        self, task_id: str, run_id: int, name: str, body: dict[str, Any], creds: Credentials
    ) -> Any:
        return await self.call(
            "POST", f"/task/{task_id}/runs/{run_id}/artifacts/{segment(name)}", creds, body
        )

    async def append_live_log(
        self, task_id: str, run_id: int, name: str, offset: int, data: str, final: bool, creds: Credentials
    ) -> Any:
        body = {"offset": offset, "data": data, "final": final}
        return await self.call("POST", f"/task/{task_id}/runs/{run_id}/live-log/{segment(name)}", creds, body)

    async def find_indexed_task(self, namespace: str, creds: Credentials) -> str:
        """The taskId the index holds at `namespace` (index.findTask); Refused 404 if none."""
        path = f"/task/{segment(namespace)}"
        url = f"{self.root_url}/api/index/v1{path}"
        answer = await self._call_url("GET", url, path, creds, None, CALL_TIMEOUT)
        return str(answer["taskId"])

    async def download_artifact(
        self, task_id: str, name: str, dest: Path, creds: Credentials, max_bytes: int
    ) -> str:
        """The latest run's artifact into `dest`, asked for with `creds` (so the queue checks their
        scopes); answers its SHA-256. The queue's redirect is followed unsigned: the URL it gives
        is the credential."""
        path = f"/task/{segment(task_id)}/artifacts/{segment(name)}"
        url = self.url(path)
        for attempt in range(self._attempts):
            headers = {"Authorization": _authorization("GET", url, None, creds)}
            try:
                async with self._http.get(url, headers=headers, allow_redirects=False) as response:
                    status, reason, location = (
                        response.status,
                        response.reason or "",
                        response.headers.get("Location"),
                    )
                    content = b"" if status in (301, 302, 303, 307, 308) else await response.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                failure: Exception = Unreachable(f"GET {path}: {type(exc).__name__}: {exc}")
            else:
                if location and status in (301, 302, 303, 307, 308):
                    return await self.download(location, dest, max_bytes)
                failure = _refused(status, reason, content)
                if status < 500:
                    raise failure
            if attempt + 1 < self._attempts:
                await asyncio.sleep(_backoff(attempt))
        raise failure

    async def download(self, url: str, dest: Path, max_bytes: int) -> str:
        """GET `url` (no Hawk) into `dest`, at most `max_bytes`; answers the SHA-256 of the body.
        Retried like calls while the failure is transient; a 4xx comes back as Refused at once."""
        for attempt in range(self._attempts):
            try:
                return await self._download_once(url, dest, max_bytes)
            except (aiohttp.ClientError, TimeoutError) as exc:
                failure: Exception = Unreachable(f"GET {url.split('?')[0]}: {type(exc).__name__}: {exc}")
            except Refused as exc:
                if exc.status < 500:
                    raise
                failure = exc
            if attempt + 1 < self._attempts:
                await asyncio.sleep(_backoff(attempt))
        raise failure

    async def _download_once(self, url: str, dest: Path, max_bytes: int) -> str:
        limit = aiohttp.ClientTimeout(total=None, sock_connect=CALL_TIMEOUT, sock_read=CALL_TIMEOUT)
        digest = hashlib.sha256()
        async with self._http.get(url, timeout=limit) as response:
            if response.status >= 300:
                raise _refused(response.status, response.reason or "", await response.content.read(200))
            size = 0
            with dest.open("wb") as out:
                async for chunk in response.content.iter_chunked(256 * 1024):
                    size += len(chunk)
                    if size > max_bytes:
                        raise Refused(413, "TooLarge", f"the download is larger than {max_bytes} bytes")
                    digest.update(chunk)
                    out.write(chunk)
        return digest.hexdigest()

    async def upload(
        self, put_url: str, chunks: AsyncIterator[bytes], size: int, content_type: str, encoding: str
    ) -> None:
        """PUT a blob to a signed URL (no Hawk: the URL is the credential). Not retried: the caller
        can't rewind `chunks`."""
        headers = {"Content-Type": content_type, "Content-Length": str(size)}
        if encoding != "identity":
            headers["Content-Encoding"] = encoding
        try:
            status, reason, content = await self._send("PUT", put_url, chunks, headers, UPLOAD_TIMEOUT)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Unreachable(f"upload: {type(exc).__name__}: {exc}") from None
        if status >= 300:
            raise _refused(status, reason, content)


def _authorization(method: str, url: str, data: bytes | None, creds: Credentials) -> str:
    return hawk_client.sign_header(
        method,
        url,
        data,
        JSON_TYPE,
        creds.client_id,
        creds.access_token,
        ext=creds.ext,
    )


def _refused(status: int, reason: str, content: bytes) -> Refused:
    """Refused (after retries, for a 5xx), with the error body's message or the start of the body."""
    return client_errors.refused(status, content, content[:200].decode(errors="replace").strip() or reason)


def _backoff(attempt: int) -> float:
    """0.1 s, 0.2 s, 0.4 s ... with jitter, so retries from many tasks don't march in step."""
    return float(min(5.0, 0.1 * 2**attempt) * (0.5 + random.random()))
