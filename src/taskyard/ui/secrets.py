"""`GET /secrets`: the secrets' names and expiry; `GET /secrets/{name}`: one secret's value.

The list reads `api.pages.SECRETS` as the viewer (the secrets service's `list` scope,
`secrets:list-secrets`): names and expiry, never a value. A value is shown only on its own page,
one click on, read with the service's `get` as the viewer (`secrets:get:<name>`); a viewer
without that scope gets the refusal page naming it. Pages are never cached.
"""

from __future__ import annotations

import json
from typing import cast

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from taskyard.api import calls, pages
from taskyard.secrets.store import SecretBody
from taskyard.ui import access
from taskyard.ui.render import UI, view


async def secrets_page(ui: UI, request: Request) -> Response:
    """A page of secrets: names and expiry, a link to the value of those the viewer may read."""
    token = request.query_params.get("continuationToken", "")
    query = {"continuationToken": token} if token else {}
    found = await access.read(ui, request, pages.SECRETS, {}, query)
    return await ui.page(
        request,
        "secrets.html",
        secrets=found.secrets,
        next_token=found.next_token,
        first_page=not token,
        shown=pages.SECRETS_SHOWN,
    )


async def secret_page(ui: UI, request: Request) -> Response:
    """One secret's value and expiry, for a viewer holding `secrets:get:<name>`."""
    name = request.path_params["name"]
    found = cast(SecretBody, await access.read(ui, request, calls.route("get", "secrets"), {"name": name}))
    shown = json.dumps(found["secret"], indent=2, sort_keys=True)
    return await ui.page(request, "secret.html", name=name, value=shown, expires=found["expires"])


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/secrets", view(secrets_page)(ui), methods=["GET"]),
        Route("/secrets/{name:path}", view(secret_page)(ui), methods=["GET"]),
    ]
