"""A task's own taskcluster-proxy (`features.taskclusterProxy`): the task calls the API unsigned,
the proxy signs each call with the run's credentials.

One proxy per task that asks, on 127.0.0.1 and a port the kernel picks. Its URL, given to the task
as `TASKCLUSTER_PROXY_URL`, ends in a random token: a request without it is refused, so another
task on the same host (which can reach the port) cannot borrow this task's scopes.

Each call is signed with the run's current temporary credentials (read at every request, so a
reclaim's new credentials are used at once) and restricted, by Hawk's `authorizedScopes`, to the
task's `scopes` plus `queue:create-artifact:<taskId>/<runId>`, as generic-worker does: the task
cannot reclaim or resolve its own run with them. Bodies stream both ways; redirects are passed
back as they are (getArtifact's 303 reaches the task, getLatestArtifact's JSON `{url}` too).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import secrets
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from yarl import URL

from taskyard.auth import hawk_client
from taskyard.worker.client import Credentials

log = logging.getLogger(__name__)
# The root-URL form, on the escaped path so an encoded "/" (%2F) in a name stays one segment.
_API = re.compile(r"^/api/([^/]*)/([^/]*)/(.*)$", re.DOTALL)
# Headers that belong to one connection, not to the request or answer forwarded.
_HOP = frozenset(
    ("connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade", "host", "authorization", "expect")
)  # fmt: skip
CALL_TIMEOUT = aiohttp.ClientTimeout(total=300, sock_connect=30)
BEWIT_TTL = 3600.0  # seconds a /bewit URL lasts, as taskcluster-proxy's


class TaskProxy:
    """The proxy of one run: `start()`, give the task `url`, `stop()` when the task ends."""

    def __init__(
        self, root_url: str, credentials: Callable[[], Credentials], authorized_scopes: list[str]
    ) -> None:
        self.root_url = root_url.rstrip("/")
        self._credentials = credentials
        self._scopes = list(authorized_scopes)
        self._token = secrets.token_urlsafe(32)
        self._prefix = f"/{self._token}"
        self._signed_for: tuple[Credentials, str] | None = None
        self._runner: web.ServerRunner | None = None
        self._http: aiohttp.ClientSession | None = None
        self._sock: socket.socket | None = None
        self.url = ""

    async def start(self) -> str:
        """Listen on 127.0.0.1 (a port the kernel picks); the URL to give the task."""
        self._sock = sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        self._http = aiohttp.ClientSession(
            auto_decompress=False, timeout=CALL_TIMEOUT, connector=aiohttp.TCPConnector(limit=50)
        )
        self._runner = web.ServerRunner(
            web.Server(self._handle, access_log=None), handle_signals=False, shutdown_timeout=0.5
        )
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://127.0.0.1:{port}{self._prefix}"
        return self.url

    async def stop(self) -> None:
        """Close the port and drop any call still in flight: the task is over."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._http is not None:
            await self._http.close()
            self._http = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    # Requests ------------------------------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        raw = request.raw_path
        prefix = raw[: len(self._prefix)]
        rest = raw[len(self._prefix) :]
        if not hmac.compare_digest(prefix.encode(), self._prefix.encode()) or rest[:1] not in ("/", "?", ""):
            return _error(
                403,
                "ProxyRefused",
                "This is a task's taskcluster-proxy: use the URL in TASKCLUSTER_PROXY_URL.",
            )
        path = rest.split("?", 1)[0]
        if path == "/bewit":
            return await self._bewit(request)
        if path.startswith(("/bewit", "/credentials")):
            return _error(404, "ResourceNotFound", f"{path}: taskyard's proxy does not offer /credentials.")
        target = self._target(rest)
        if target is None:
            return _error(
                404, "ResourceNotFound", f"{path}: not a TaskCluster API path (/api/<service>/<version>/...)"
            )
        return await self._forward(request, target)

    def _target(self, rest: str) -> str | None:
        """The root-URL form (`/api/<service>/<version>/...`) or the shortcut one
        (`/<service>/<version>/...`); None for anything else (another host is not proxied)."""
        path = rest.split("?", 1)[0]
        if path.startswith("/api/") or path == "/api":
            return f"{self.root_url}{rest}" if _API.match(path) else None
        segments = path.split("/", 3)
        if len(segments) < 4 or not segments[1] or "." in segments[1] or not segments[2]:
            return None
        return f"{self.root_url}/api{rest}"

    async def _forward(self, request: web.BaseRequest, target: str) -> web.StreamResponse:
        assert self._http is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        creds, ext = self._signing()
        headers["Authorization"] = hawk_client.sign_header(
            request.method, target, None, "", creds.client_id, creds.access_token, ext=ext
        )
        data = request.content if request.body_exists else None
        if request.headers.get("Expect", "").lower() == "100-continue":
            # curl asks for it with a body over 1 kB and waits for it; the server is not asked.
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        response: web.StreamResponse | None = None
        try:
            async with self._http.request(
                # encoded=True: sent byte for byte as the task wrote it, and as it was signed.
                request.method,
                URL(target, encoded=True),
                headers=headers,
                data=data,
                allow_redirects=False,
            ) as answer:
                response = web.StreamResponse(status=answer.status, reason=answer.reason)
                for key, value in answer.headers.items():
                    if key.lower() not in _HOP:
                        response.headers.add(key, value)
                response.headers["X-Taskcluster-Endpoint"] = target
                response.headers["X-Taskcluster-Proxy-Temp-ClientId"] = creds.client_id
                response.headers["X-Taskcluster-Authorized-Scopes"] = json.dumps(self._scopes)
                await response.prepare(request)
                async for chunk in answer.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
        except (aiohttp.ClientError, TimeoutError) as exc:
            if response is not None and response.prepared:
                raise  # the answer had begun: its connection is dropped, the task sees it cut short
            log.warning("taskcluster-proxy: %s %s: %s", request.method, target, exc)
            return _error(502, "ProxyUnreachable", f"{request.method} {target}: {type(exc).__name__}: {exc}")

    async def _bewit(self, request: web.BaseRequest) -> web.StreamResponse:
        """The URL in the body, signed for an hour with a bewit (the task's scopes, as every call):
        303 to it, the URL as the body too."""
        target = (await request.text()).strip()
        parts = urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return _error(400, "InputError", "/bewit: the body must be a full http(s) URL to sign")
        creds, ext = self._signing()
        signed = hawk_client.bewit_url(target, creds.client_id, creds.access_token, ext=ext, ttl=BEWIT_TTL)
        return web.Response(status=303, headers={"Location": signed}, text=signed)

    def _signing(self) -> tuple[Credentials, str]:
        """The current credentials and their `ext`, made again only when a reclaim replaced them."""
        creds = self._credentials()
        if self._signed_for is None or self._signed_for[0] is not creds:
            self._signed_for = (creds, hawk_client.restricted_ext(creds.certificate, self._scopes))
        return self._signed_for


def authorized_scopes(task_id: str, run_id: int, definition: Any) -> list[str]:
    """What a call through the proxy may do: the task's scopes, and uploading its run's artifacts."""
    return [*definition.get("scopes", []), f"queue:create-artifact:{task_id}/{run_id}"]


def _error(status: int, code: str, message: str) -> web.Response:
    body = {"code": code, "message": message, "requestInfo": {}}
    return web.json_response(body, status=status)
