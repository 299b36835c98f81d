"""The route tables of every service, by the name in `/api/<service>/v1/`.

`build_app()` mounts them, `taskyard api` reads them, and the call pipeline (`api/calls.py`) finds
a route in them by name for a caller that is no HTTP request (a page of the web UI).
"""

from __future__ import annotations

from taskyard.api import (
    artifacts_v1,
    auth_v1,
    hooks_v1,
    index_v1,
    notify_v1,
    queue_v1,
    scheduler_v1,
    secrets_v1,
    worker_manager_v1,
)
from taskyard.api.routing import Route


def service_tables() -> dict[str, list[Route]]:
    """Each service's routes, by the name in `/api/<service>/v1/` (`taskyard api` reads these too)."""
    return {
        "queue": queue_v1.ROUTES + artifacts_v1.ROUTES,
        "auth": auth_v1.ROUTES,
        "scheduler": scheduler_v1.ROUTES,
        "secrets": secrets_v1.ROUTES,
        "index": index_v1.ROUTES,
        "hooks": hooks_v1.ROUTES,
        "notify": notify_v1.ROUTES,
        "worker-manager": worker_manager_v1.ROUTES,
    }
