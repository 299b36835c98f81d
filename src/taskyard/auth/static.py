"""The deployment's built-in clients: the root client, the queue's own and the worker-manager's.

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
# The worker-manager's client signs the credentials registered workers get: it holds what those
# may hold, and no more.
WORKER_MANAGER_CLIENT_ID = "static/taskyard/worker-manager"
WORKER_MANAGER_SCOPES = (
    "assume:worker-type:*",
    "assume:worker-pool:*",
    "assume:worker-id:*",
    "queue:worker-id:*",
    "secrets:get:worker-type:*",
    "secrets:get:worker-pool:*",
    "queue:claim-work:*",
    "queue:status:*",
    "worker-manager:remove-worker:*",
    "worker-manager:reregister-worker:*",
    "worker-manager:should-worker-terminate:*",
    "auth:create-client:worker/*",
)


def derived_token(root_access_token: str, client_id: str) -> str:
    mac = hmac.new(root_access_token.encode(), f"static-client:{client_id}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")


def static_clients(root_access_token: str) -> dict[str, hawk.ClientSecret]:
    return {
        ROOT_CLIENT_ID: hawk.ClientSecret(ROOT_CLIENT_ID, root_access_token, ("*",), None, False),
        QUEUE_CLIENT_ID: hawk.ClientSecret(
            QUEUE_CLIENT_ID, derived_token(root_access_token, QUEUE_CLIENT_ID), ("*",), None, False
        ),
        WORKER_MANAGER_CLIENT_ID: hawk.ClientSecret(
            WORKER_MANAGER_CLIENT_ID,
            derived_token(root_access_token, WORKER_MANAGER_CLIENT_ID),
            WORKER_MANAGER_SCOPES,
            None,
            False,
        ),
    }
