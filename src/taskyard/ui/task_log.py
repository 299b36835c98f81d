"""A run's log for the task page: found as `taskyard task log` finds it, read on the server.

The log is the run's live-log artifact (`public/logs/live.log` unless the payload's `logs.live`
names another). While the run is running it is a `reference` to the queue's live stream; once the
worker is done it is a `link` to the uploaded backing log (`public/logs/live_backing.log`). The
page reads it through the pipeline as the viewer (`api.pages.TASK_LOG`): the links are followed as
the API's getArtifact follows them, with getArtifact's scopes on every name, so the page never
shows a log the API would refuse that viewer; then the last TAIL_BYTES of the bytes (the stored
chunks of a live log, or the backing log's blob, gzip-decoded) are rendered here, and the page
says how much is hidden and links the whole log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from markupsafe import Markup
from starlette.requests import Request

from taskyard.api import log_tail, pages
from taskyard.model.artifacts import check_name
from taskyard.model.errors import InputError, InsufficientScopes, ResourceExpired, ResourceNotFound
from taskyard.ui import access, ansi
from taskyard.ui.render import UI, ReadRefused

LIVE_LOG = "public/logs/live.log"  # the worker's names (worker/payload.py), and `taskyard task log`'s
BACKING_LOG = "public/logs/live_backing.log"
TAIL_BYTES = log_tail.TAIL_BYTES  # the most of a log a page shows


@dataclass(frozen=True)
class Log:
    """What the page shows of a run's log: its text (or why there is none) and where it is whole."""

    run_id: int
    name: str
    url: str  # the artifact's URL at the queue (a 303 to the content)
    live: bool  # the run is running: the page follows the stream
    html: Markup | None  # the shown part, rendered (None: nothing to show)
    total: int  # bytes in the whole log (0 when unread)
    shown: int  # bytes of it shown
    note: str  # why nothing is shown, or empty
    stream: str = ""  # the live stream's signed URL (a path of this server), when `html` was read from it
    first_line: int | None = 1  # the number of the first line shown in the whole log (None: unknown)
    data: bytes = b""  # the shown part's bytes (the log page numbers its lines)

    @property
    def hidden(self) -> int:
        return self.total - self.shown


def log_name(definition: Any) -> str:
    """The live log's name: the payload's `logs.live` if it names one, else the worker's default."""
    payload = definition.get("payload") if isinstance(definition, dict) else None
    logs = payload.get("logs") if isinstance(payload, dict) else None
    live = logs.get("live") if isinstance(logs, dict) else None
    if not isinstance(live, str):
        return LIVE_LOG
    try:
        return check_name(live)
    except InputError:  # the worker refuses such a payload: its log has the default name
        return LIVE_LOG


def artifact_url(task_id: str, run_id: int, name: str) -> str:
    """Where the queue answers the artifact (getArtifact): a 303 to its content."""
    # Each segment percent-encoded, `.` too, so that no browser or proxy collapses it away.
    path = "/".join("%2E" if part == "." else quote(part, safe="") for part in name.split("/"))
    return f"/api/queue/v1/task/{task_id}/runs/{run_id}/artifacts/{path}"


async def read(ui: UI, request: Request, task_id: str, run_id: int, state: str, name: str) -> Log:
    """The run's log as the page shows it to the viewer (`state`: the run's)."""
    url = artifact_url(task_id, run_id, name)
    running = state == "running"

    def note(text: str) -> Log:
        return Log(run_id, name, url, running, None, 0, 0, text)

    params = {"taskId": task_id, "runId": str(run_id), "name": name}
    try:
        found = await access.read(ui, request, pages.TASK_LOG, params)
    except ResourceNotFound:
        if running:
            return note("The log shows here once the worker sends its first lines.")
        if state == "pending":
            return note("The log shows here once a worker runs the task.")
        return note(f"This run has no artifact {name}.")
    except (ReadRefused, InsufficientScopes):
        return note(
            f"The log {name} is not public: sign in as a client that may read it, "
            "or download it with credentials that may."
        )
    except (ResourceExpired, InputError) as exc:
        return note(exc.message)
    if found.note:
        return note(found.note)
    shown = ansi.bytes_to_html(found.data)
    return Log(
        run_id,
        name,
        url,
        running,
        shown,
        found.total,
        len(found.data),
        "",
        found.stream,
        found.first_line,
        found.data,
    )
