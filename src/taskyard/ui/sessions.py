"""Who is signed in to the UI: sessions and CSRF tokens (a stub until sign-in lands: nobody)."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.routing import BaseRoute

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.ui.render import UI


@dataclass(frozen=True)
class Viewer:
    """A signed-in session: the client it acts as and the token its forms carry."""

    client_id: str
    csrf: str


async def current(ui: UI, request: Request) -> Viewer | None:
    """The session `request` carries (None: nobody is signed in)."""
    return None


def routes(ui: UI) -> list[BaseRoute]:
    return []
