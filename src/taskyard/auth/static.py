"""The deployment's built-in clients: the root client, and the queue's own client.

Until clients and roles live in the database, these two are the only clients there are.
The queue's client signs the temporary credentials handed out with claims; its access token
is derived from the root's, so every process of one deployment agrees on it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Awaitable, Callable

from taskyard.auth import hawk
from taskyard.model import dates

ROOT_CLIENT_ID = "static/taskyard/root"
QUEUE_CLIENT_ID = "static/taskyard/queue"


def derived_token(root_access_token: str, client_id: str) -> str:
    mac = hmac.new(root_access_token.encode(), f"static-client:{client_id}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")


def static_clients(root_access_token: str) -> dict[str, hawk.ClientSecret]:
    return {
        ROOT_CLIENT_ID: hawk.ClientSecret(ROOT_CLIENT_ID, root_access_token, ("*",), None, False),
        QUEUE_CLIENT_ID: hawk.ClientSecret(
            QUEUE_CLIENT_ID, derived_token(root_access_token, QUEUE_CLIENT_ID), ("*",), None, False
        ),
    }


def authenticator(root_access_token: str) -> Callable[[hawk.Request], Awaitable[hawk.Authenticated | None]]:
    """Authenticate Hawk requests signed by a static client or by credentials it issued."""
    clients = static_clients(root_access_token)

    async def lookup(client_id: str) -> hawk.ClientSecret | None:
        return clients.get(client_id)

    async def authenticate(request: hawk.Request) -> hawk.Authenticated | None:
        return await hawk.authenticate(request, lookup, now_ms=dates.now_ms())

    return authenticate
