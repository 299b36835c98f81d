"""Live updates for the UI's pages: a task group's or a task's changes as server-sent events.

`GET /ui/live/groups/{taskGroupId}` and `GET /ui/live/tasks/{taskId}` need the scopes of the page
they update (read through the API's call pipeline as the viewer, `ui/access.py`). They follow the
app's event feed (`services.events`, the same as the events API's stream) with bindings on the
queue's task exchanges, and send each event as one SSE message whose data is a JSON object with a
`type`: `task` (a task changed: its state, runs, last run's duration, worker, start and
reasonResolved, and its whole status), `counts` (the group's tasks by state, read from the
database: when the stream opens, then at most once a second while tasks change), `artifact` (the
task stream only: an artifact was created) and `stale` (updates were missed: reload).
docs/ui.md, "Live updates", has the format.

`?after=<position>` (the group page puts the feed's position from before it read the database,
see `group_url`) and the `Last-Event-ID` header of a reconnecting browser replay what came after
it from the event log first, so a page misses nothing between its rendering and its stream. (The
task page polls its status instead; the task stream is there for other clients.) A server
built without a feed (`services.events` None) answers 404: the page then simply is not live.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import quote

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from taskyard.api import authz, calls, pages
from taskyard.api.routing import Stream
from taskyard.api.streams import StreamAnswer
from taskyard.events.feed import Binding, Dropped, EventFeed, Follower, Item, Missed, Position
from taskyard.events.profiles import SEED_PREFIX, TC_PREFIX
from taskyard.model.errors import InvalidRequestArguments, ResourceNotFound, TaskyardError
from taskyard.queue import groups, tasks
from taskyard.ui import access, formats, group_rows
from taskyard.ui.graph_layout import STATES
from taskyard.ui.render import view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.ui.render import UI

TASK_EXCHANGES = (
    "task-defined",
    "task-pending",
    "task-running",
    "task-completed",
    "task-failed",
    "task-exception",
)
HEARTBEAT_SECONDS = 15.0
COUNTS_SECONDS = 1.0  # a group's counts are sent at most this often
RETRY_MS = 2000
HEADERS = {"cache-control": "no-store", "x-accel-buffering": "no"}


def _feed(ui: UI) -> EventFeed:
    if ui.services.events is None:
        raise ResourceNotFound(
            "this server serves no live updates (it has no event feed); reload the page instead"
        )
    return ui.services.events


def _position(ui: UI) -> str:
    feed = ui.services.events
    return "" if feed is None else f"?after={feed.position}"


def group_url(ui: UI, task_group_id: str) -> str:
    """The live updates of a group, from now on (empty: this server has none)."""
    base = f"/ui/live/groups/{quote(task_group_id, safe='')}"
    return "" if ui.services.events is None else base + _position(ui)


def bindings(feed: EventFeed, words: Sequence[str], *, artifacts: bool = False) -> list[Binding]:
    """Bindings on the task exchanges of the profile the deployment publishes (TaskCluster's if it
    does, else the seed profile's), for the routing keys whose words after the first are `words`
    (`*` any); `#` for the rest."""
    known = set(feed.profiles.exchanges())
    names = TASK_EXCHANGES + (("artifact-created",) if artifacts else ())
    if TC_PREFIX + "task-pending" in known:
        pattern = ".".join(("primary", *words, "#"))
        return [(TC_PREFIX + name, pattern) for name in names if TC_PREFIX + name in known]
    pattern = ".".join((*words, "#"))
    return [(SEED_PREFIX + name, pattern) for name in TASK_EXCHANGES if SEED_PREFIX + name in known]


def start_from(request: Request) -> Position | None:
    """The Last-Event-ID of a reconnecting browser (a bad one is ignored), else `?after`."""
    header = request.headers.get("last-event-id")
    if header:
        found = Position.parse(header.strip())
        if found is not None:
            return found
    after = request.query_params.get("after")
    if after is None or after == "":
        return None
    found = Position.parse(after)
    if found is None:
        raise InvalidRequestArguments(
            f"query parameter after {after[:40]!r} is not a position of the event log"
        )
    return found


def message(data: dict[str, Any], position: Position | None = None) -> bytes:
    head = b"" if position is None else b"id: %s\n" % str(position).encode()
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


def task_update(exchange: str, body: Any, now: int) -> dict[str, Any] | None:
    """The `task` (or `artifact`) message for an event's body; None if it carries no task status."""
    status = body.get("status") if isinstance(body, dict) else None
    if not isinstance(status, dict) or not isinstance(status.get("taskId"), str):
        return None
    event = exchange.rpartition("/")[2].removeprefix("queue:")
    if event == "artifact-created":
        return {
            "type": "artifact",
            "taskId": status["taskId"],
            "runId": body.get("runId"),
            "artifact": body.get("artifact"),
        }
    runs = status["runs"] if isinstance(status.get("runs"), list) else []
    last = runs[-1] if runs and isinstance(runs[-1], dict) else {}
    ms = group_rows.run_duration(last.get("started"), last.get("resolved"), str(status.get("state")), now)
    return {
        "type": "task",
        "event": event,
        "taskId": status["taskId"],
        "taskGroupId": status.get("taskGroupId"),
        "state": status.get("state"),
        "runs": len(runs),
        "durationMs": ms,
        "duration": "" if ms is None else formats.duration(ms),
        "worker": group_rows.worker_of(last.get("workerGroup"), last.get("workerId")),
        "started": group_rows.started_text(last.get("started")),
        "reason": last.get("reasonResolved") or "",
        "status": status,
    }


def render_item(item: Item, now: int) -> bytes | None:
    update = task_update(item.envelope.exchange, item.envelope.body, now)
    return None if update is None else message(update, item.position)


STALE = {
    "type": "stale",
    "message": "some updates were missed (the event log no longer holds them); reload the page",
}


class Extras:
    """What a stream sends besides its events: nothing (a task's); see GroupCounts."""

    def changed(self) -> None:
        """Some of the stream's tasks changed."""

    def due(self) -> float:
        """How long the stream may wait for events before `messages()` has something to send."""
        return HEARTBEAT_SECONDS

    async def messages(self) -> list[bytes]:
        return []


class GroupCounts(Extras):
    """A group's `counts` messages: one when the stream opens, then at most one a second while
    its tasks change (read from the database as `who`, the viewer: always the truth, whatever the
    page shows)."""

    def __init__(self, ui: UI, who: authz.Caller, task_group_id: str) -> None:
        self.ui, self.who, self.task_group_id = ui, who, task_group_id
        self.dirty, self.sent = True, -COUNTS_SECONDS

    def changed(self) -> None:
        self.dirty = True

    def due(self) -> float:
        if not self.dirty:
            return HEARTBEAT_SECONDS
        return max(0.0, self.sent + COUNTS_SECONDS - time.monotonic())

    async def messages(self) -> list[bytes]:
        if not self.dirty or time.monotonic() < self.sent + COUNTS_SECONDS:
            return []
        try:
            params = {"taskGroupId": self.task_group_id}
            found = await calls.call(self.ui.services, self.who, pages.GROUP_COUNTS, params)
        except TaskyardError:  # the database is away a moment: the next change tries again
            return []
        self.dirty, self.sent = False, time.monotonic()
        counts = {state: found.pop(state, 0) for state in STATES} | found
        data = {"type": "counts", "taskGroupId": self.task_group_id, "counts": counts}
        return [message({**data, "total": sum(counts.values())})]


async def _events(
    ui: UI, feed: EventFeed, follower: Follower, after: Position | None, extras: Extras
) -> AsyncIterator[bytes]:
    """The stream: its opening, what came after `after`, then events as they come (and extras)."""
    yield f": taskyard live updates\nretry: {RETRY_MS}\nid: {follower.start}\n\n".encode()
    if after is None:
        after = Position(follower.start)
    else:
        async for replayed in feed.replay(after, follower.start, follower.bindings):
            chunk = message(STALE) if isinstance(replayed, Missed) else render_item(replayed, ui.now())
            if chunk:
                yield chunk
    yield b"".join(await extras.messages()) or b": opened\n\n"
    while True:
        try:
            items = await follower.next(extras.due())
        except Dropped:
            return
        now = ui.now()
        fresh = (render_item(i, now) for i in items if after.before(i.position.seq, i.position.index or 0))
        chunks = [c for c in fresh if c]
        if chunks:
            extras.changed()
        chunks += await extras.messages()
        yield b"".join(chunks) if chunks else b": heartbeat\n\n"


def _answer(ui: UI, feed: EventFeed, request: Request, found: list[Binding], extras: Extras) -> Response:
    after = start_from(request)
    follower = feed.follow(found)
    chunks = _events(ui, feed, follower, after, extras)
    return StreamAnswer(
        Stream(chunks, "text/event-stream", follower.dropped, dict(HEADERS), lambda: feed.leave(follower))
    )


async def group_stream(ui: UI, request: Request) -> Response:
    task_group_id = groups.check_group_id(request.path_params["taskGroupId"])
    params = {"taskGroupId": task_group_id}
    await access.read(ui, request, calls.route("getTaskGroup"), params)  # the refusal, or 404 unknown
    feed = _feed(ui)
    start_from(request)  # a bad `after` is refused before the stream starts
    found = bindings(feed, ("*",) * 7 + (task_group_id,))
    counts = GroupCounts(ui, await access.viewer(ui, request), task_group_id)
    return _answer(ui, feed, request, found, counts)


async def task_stream(ui: UI, request: Request) -> Response:
    task_id = tasks.check_task_id(request.path_params["taskId"])
    await access.read(ui, request, pages.TASK_STATUS, {"taskId": task_id})  # the refusal, or 404 unknown
    feed = _feed(ui)
    start_from(request)
    return _answer(ui, feed, request, bindings(feed, (task_id,), artifacts=True), Extras())


def routes(ui: UI) -> list[BaseRoute]:
    return [
        Route("/ui/live/groups/{taskGroupId}", view(group_stream)(ui), methods=["GET"]),
        Route("/ui/live/tasks/{taskId}", view(task_stream)(ui), methods=["GET"]),
    ]
