"""The actions page(s) of the UI."""

from __future__ import annotations

from starlette.routing import BaseRoute

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.ui.render import UI


def routes(ui: UI) -> list[BaseRoute]:
    return []
