"""The client side of Hawk: the `Authorization` header TaskCluster's clients send.

It reuses the server's MAC and payload hash (`hawk.py`), so what this signs is what the server checks.
Temporary credentials travel as TaskCluster's clients send them: the certificate, as a JSON object,
in the base64 `ext` attribute.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from typing import Any
from urllib.parse import urlsplit

from taskyard.auth import hawk


def sign_header(
    method: str,
    url: str,
    body: bytes | None,
    content_type: str,
    client_id: str,
    access_token: str,
    *,
    ext: str | None = None,
    now: float | None = None,
) -> str:
    """`Hawk id=..., ts=..., nonce=..., [hash=...,] [ext=...,] mac=...` for one request to `url`.

    A body (even an empty one) gets a payload hash of `content_type`; `None` means no body and no hash.
    `now` is seconds since the epoch (the wall clock unless given).
    """
    host, port, resource = _target(url)
    attributes = {
        "id": client_id,
        "ts": str(int(time.time() if now is None else now)),
        "nonce": secrets.token_urlsafe(6),
    }
    if body is not None:
        attributes["hash"] = hawk.payload_hash(body, content_type)
    if ext:
        attributes["ext"] = ext
    artifacts = hawk.MacInput(
        ts=attributes["ts"],
        nonce=attributes["nonce"],
        method=method,
        resource=resource,
        host=host,
        port=port,
        hash=attributes.get("hash", ""),
        ext=attributes.get("ext", ""),
    )
    attributes["mac"] = hawk.calculate_mac("header", access_token, artifacts)
    return "Hawk " + ", ".join(f'{key}="{value}"' for key, value in attributes.items())


def certificate_ext(certificate: str | dict[str, Any] | None) -> str | None:
    """The `ext` that carries temporary credentials' certificate (a JSON string or object); None without."""
    if not certificate:
        return None
    cert = json.loads(certificate) if isinstance(certificate, str) else certificate
    raw = json.dumps({"certificate": cert}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _target(url: str) -> tuple[str, int, str]:
    """Host, port and resource (path and query as sent) that Hawk signs for `url`."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6: the server reads the Host header's bracketed form
        host = f"[{host}]"
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return host, port, resource


def restricted_ext(certificate: str | dict[str, Any] | None, authorized_scopes: list[str]) -> str:
    """The `ext` that carries a certificate (if any) and `authorizedScopes`: the request is then
    allowed only what both the credentials and those scopes allow."""
    ext: dict[str, Any] = {"authorizedScopes": authorized_scopes}
    if certificate:
        ext["certificate"] = json.loads(certificate) if isinstance(certificate, str) else certificate
    raw = json.dumps(ext, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode()


def bewit_url(
    url: str,
    client_id: str,
    access_token: str,
    *,
    ext: str | None = None,
    ttl: float = 3600,
    now: float | None = None,
) -> str:
    """`url` with a `bewit` query parameter that lets anyone GET it for `ttl` seconds, as Hawk's
    client signs it (the MAC of the URL without the bewit, then the bewit appended)."""
    host, port, resource = _target(url)
    exp = str(int((time.time() if now is None else now) + ttl))
    artifacts = hawk.MacInput(
        ts=exp, nonce="", method="GET", resource=resource, host=host, port=port, ext=ext or ""
    )
    mac = hawk.calculate_mac("bewit", access_token, artifacts)
    raw = f"{client_id}\\{exp}\\{mac}\\{ext or ''}".encode()
    bewit = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return f"{url}{'&' if '?' in url else '?'}bewit={bewit}"
