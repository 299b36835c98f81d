"""Task routes that ask for notifications (`notify.<kind>.<target>.on-<event>`), as TaskCluster's
notify service reads them, and the default email a task event makes.

A route's kind is its second segment; its target is everything between the second segment and
the last (an email address or a pulse routing key may hold dots); its last segment names the
event. Which events send: `on-transition` always; `on-any` and `on-resolved` when the task is
resolved (completed, failed or exception); `on-defined` when it is unscheduled; any other
`on-<state>` when the task is in that state. A task resolved as exception for a reason in
`IGNORED_REASONS` sends nothing, whatever its routes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from taskyard.model.types import LooseJSON

KINDS = ("email", "pulse", "matrix-room", "slack-channel")
# The kinds taskyard delivers; the others are recorded as refused when their event comes.
DELIVERED = ("email", "pulse")
RESOLVED = ("completed", "failed", "exception")
IGNORED_REASONS = ("canceled", "deadline-exceeded")
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
MAX_ROUTING_KEY = 255


@dataclass(frozen=True)
class NotifyRoute:
    kind: str  # "email", "pulse", "slack-channel", ... (any second segment)
    target: str  # the address, routing key, room or channel
    event: str  # the last segment without its `on-`


def parse(route: str) -> NotifyRoute | None:
    """The notification `route` asks for; None when it is not a `notify.` route with a target and
    an `on-<event>` (TaskCluster ignores such routes too)."""
    parts = route.split(".")
    if len(parts) < 4 or parts[0] != "notify" or not parts[-1].startswith("on-"):
        return None
    return NotifyRoute(parts[1], ".".join(parts[2:-1]), parts[-1].removeprefix("on-"))


def fires(event: str, state: str) -> bool:
    """Whether a route's `on-<event>` sends for a task event leaving the task in `state`."""
    if event == "transition":
        return True
    if event in ("any", "resolved"):
        return state in RESOLVED
    if event == "defined":
        return state == "unscheduled"
    return event == state


def ignored(status: LooseJSON) -> bool:
    """A task resolved as exception for a reason nobody is told of (canceled, deadline-exceeded)."""
    runs = status.get("runs") or []
    last = runs[-1] if runs else {}
    return status.get("state") == "exception" and last.get("reasonResolved") in IGNORED_REASONS


def refusal(r: NotifyRoute) -> str | None:
    """Why taskyard cannot deliver `r` (None: it can)."""
    if r.kind not in DELIVERED:
        return f"taskyard has no {r.kind} transport: only email and pulse routes are delivered"
    if r.kind == "email" and not EMAIL.fullmatch(r.target):
        return f"{r.target!r} is not an email address"
    if r.kind == "pulse" and not 0 < len(r.target) <= MAX_ROUTING_KEY:
        return f"the pulse routing key must be 1 to {MAX_ROUTING_KEY} characters"
    return None


@dataclass(frozen=True)
class Email:
    subject: str
    content: str  # Markdown
    link: tuple[str, str] | None  # (text, href)


def task_email(task_id: str, status: LooseJSON, task: LooseJSON | None, ui_url: str) -> Email:
    """The email for a task event, as TaskCluster's: its subject, Markdown content and link to the
    task's page (a task's `extra.notify.email` overrides are `notify/custom.py`'s)."""
    metadata = (task or {}).get("metadata") or {}
    name = str(metadata.get("name", task_id))
    state = str(status.get("state", ""))
    runs = len(status.get("runs") or [])
    href = f"{ui_url}/tasks/{task_id}"
    group = str(status.get("taskGroupId", ""))
    content = "\n".join(
        [
            f"Task [`{task_id}`]({href}) in task group [`{group}`]({ui_url}/groups/{group}) is {state}.",
            "",
            f"**Status:** {state} (in {runs} run{'' if runs == 1 else 's'})",
            f"**Name:** {name}",
            f"**Description:** {metadata.get('description', '')}",
            f"**Owner:** {metadata.get('owner', '')}",
            f"**Source:** {metadata.get('source', '')}",
        ]
    )
    return Email(f"Task {state}: {name} - {task_id}", content, ("Inspect Task", href))
