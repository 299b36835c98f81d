"""Custom notification messages: a task's `extra.notify.email` (`subject`, `content`, `link`),
JSON-e templates rendered as TaskCluster renders them.

`subject` and `content` are rendered with the context `{task, status, taskId, rootUrl}`, `link`
with `{task, status, rootUrl}`. A template JSON-e cannot render becomes the text "Error parsing
custom message: ..." (a link that does not render, or is no `{text, href}`, leaves the default),
so one bad template never stops the notification.
"""

from __future__ import annotations

from typing import Any

import jsone

from taskyard.model.notify_routes import Email
from taskyard.model.types import LooseJSON


def render_message(template: object, context: dict[str, Any]) -> str:
    try:
        rendered = jsone.render(template, context)
    except Exception as exc:  # JSON-e's errors have no common base worth naming
        return f"Error parsing custom message: {exc}"
    return rendered if isinstance(rendered, str) else str(rendered)


def task_email(
    default: Email, task_id: str, status: LooseJSON, task: LooseJSON | None, root_url: str
) -> Email:
    """`default`, with what the task's `extra.notify.email` overrides."""
    extra = ((task or {}).get("extra") or {}).get("notify")
    custom = extra.get("email") if isinstance(extra, dict) else None
    if not isinstance(custom, dict) or task is None:
        return default
    context = {"task": task, "status": status, "taskId": task_id, "rootUrl": root_url}
    subject = render_message(custom["subject"], context) if custom.get("subject") else default.subject
    content = render_message(custom["content"], context) if custom.get("content") else default.content
    link = default.link
    if custom.get("link"):
        try:
            rendered = jsone.render(custom["link"], {"task": task, "status": status, "rootUrl": root_url})
        except Exception:
            rendered = None
        if (
            isinstance(rendered, dict)
            and isinstance(rendered.get("text"), str)
            and isinstance(rendered.get("href"), str)
        ):
            link = (rendered["text"], rendered["href"])
    return Email(subject[:255] or default.subject, content, link)
