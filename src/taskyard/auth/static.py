"""The deployment's built-in clients: the root client, and the queue's own client.

They are looked up before the clients in the database (`service.Auth.lookup`), and the API
refuses to change any client whose id starts with `static/`. The queue's client signs the
temporary credentials handed out with claims; its access token is derived from the root's, so
every process of one deployment agrees on it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from taskyard.auth import hawk

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
