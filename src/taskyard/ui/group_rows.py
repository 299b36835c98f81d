"""The group page's data: a group's tasks read in two queries, filtered, and its table's rows.

A group may hold 10,000 tasks and more, so the page reads only what its table shows (the
`api.pages.GROUP_TABLE` operation: the name and the last run's fields come out of the JSON in the
database),
and renders the rows with string formatting rather than a template loop, escaping every value
from the database exactly as `markupsafe.escape` does (`fast_escape`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from markupsafe import Markup

from taskyard.api.pages import GroupTask
from taskyard.model.errors import InvalidRequestArguments
from taskyard.ui import formats
from taskyard.ui.graph_layout import STATES

MAX_QUERY = 200  # characters of the text search
PAGE_ROWS = 500  # rows a page of the table shows: a browser lays out 10,000 far too slowly
MAX_PAGE = 100_000
# The table's sortable columns (`?sort=name`, `?sort=-name` for the other way); without one, rows
# are in taskId order.
SORTS = ("name", "state", "started", "duration")


@dataclass(frozen=True)
class Filter:
    """The table's filter: a state (empty: every state) and a text (empty: any) the task's name or
    taskId contains, ignoring case; the order (a column of SORTS, `-` before it for descending;
    empty: by taskId); and which page of PAGE_ROWS matching rows to show."""

    state: str = ""
    text: str = ""
    page: int = 1
    sort: str = ""

    @classmethod
    def parse(cls, query: Any) -> Filter:
        """From the query parameters `state`, `q` and `page`; 400 naming the parameter and the rule."""
        state = query.get("state", "") or ""
        if state not in ("", *STATES):
            raise InvalidRequestArguments(
                f"query parameter state {state[:40]!r} is not a state; it is one of {', '.join(STATES)} "
                "(or empty: every state)"
            )
        text = (query.get("q", "") or "").strip()
        if len(text) > MAX_QUERY:
            raise InvalidRequestArguments(f"query parameter q is {len(text)} characters; at most {MAX_QUERY}")
        if any(ord(c) < 0x20 or c == "\x7f" for c in text):
            raise InvalidRequestArguments("query parameter q may not contain control characters")
        sort = query.get("sort", "") or ""
        if sort.removeprefix("-") not in ("", *SORTS) or sort == "-":
            raise InvalidRequestArguments(
                f"query parameter sort {sort[:40]!r} is not a column; it is one of {', '.join(SORTS)}, "
                "each with '-' before it for descending order (or empty: by taskId)"
            )
        return cls(state, text, _page(query.get("page", "") or "1"), sort)

    def query(self, **changes: str) -> dict[str, str]:
        """The filter as query parameters (the empty ones left out), with `changes`."""
        found = {"state": self.state, "q": self.text, "sort": self.sort, "page": str(self.page), **changes}
        return {k: v for k, v in found.items() if v and not (k == "page" and v == "1")}

    @property
    def active(self) -> bool:
        return bool(self.state or self.text)

    def keeps(self, task_id: str, state: str, name: str) -> bool:
        if self.state and state != self.state:
            return False
        folded = self.text.casefold()
        return not folded or folded in name.casefold() or folded in task_id.casefold()


def _page(text: str) -> int:
    if not (text.isascii() and text.isdigit() and 1 <= int(text[:7]) <= MAX_PAGE):
        raise InvalidRequestArguments(f"query parameter page {text[:20]!r} is not a page: 1 to {MAX_PAGE}")
    return int(text)


def counts(rows: Sequence[GroupTask]) -> dict[str, int]:
    """How many tasks are in each state, every state listed (in the order tasks move through them)."""
    found = Counter(r["state"] for r in rows)
    ordered = {state: found.pop(state, 0) for state in STATES}
    ordered.update(found)  # a state this code does not know of still counts
    return ordered


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def run_duration(started: str | None, resolved: str | None, state: str, now: int) -> int | None:
    """How long the last run took (still running: so far), in milliseconds; None if it never started."""
    if not started:
        return None
    try:
        end = _ms(resolved) if resolved else now if state == "running" else None
        return None if end is None else max(0, end - _ms(started))
    except ValueError:
        return None


def worker_of(worker_group: str | None, worker_id: str | None) -> str:
    return f"{worker_group}/{worker_id}" if worker_group and worker_id else ""


def fast_escape(text: str) -> str:
    """`markupsafe.escape(text)` for a str, the same characters replaced the same way, in a third
    of its time (it builds no `Markup`): the table escapes three values a row, 30,000 a page."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&#34;")
        .replace("'", "&#39;")
    )


def name_of(row: GroupTask) -> str:
    name = row["name"]
    return name if isinstance(name, str) and name else str(row["task_id"])


def matching(rows: Sequence[GroupTask], keep: Filter, now: int = 0) -> list[GroupTask]:
    """The rows `keep` keeps, in its order (`now`: for a running task's duration so far)."""
    kept = (
        list(rows)
        if not keep.active
        else [r for r in rows if keep.keeps(r["task_id"], r["state"], name_of(r))]
    )
    return ordered(kept, keep.sort, now) if keep.sort else kept


_STATE_ORDER = {state: i for i, state in enumerate(STATES)}


def ordered(rows: list[GroupTask], sort: str, now: int) -> list[GroupTask]:
    """`rows` (in taskId order) sorted by the column `sort` names (`-`: descending); rows without a
    value (never started) last either way; ties stay in taskId order. One key per row: 10,000 rows
    sort in a few milliseconds."""
    column = sort.removeprefix("-")
    key: Any
    if column == "name":
        key = lambda r: name_of(r).casefold()  # noqa: E731
    elif column == "state":
        key = lambda r: _STATE_ORDER.get(r["state"], len(STATES))  # noqa: E731
    elif column == "started":
        key = lambda r: r["started"] or None  # noqa: E731  (ISO 8601 in UTC: sorts as text)
    else:
        key = lambda r: run_duration(r["started"], r["resolved"], r["state"], now)  # noqa: E731
    keyed = [(key(r), r) for r in rows]
    valued = [(k, r) for k, r in keyed if k is not None]
    valued.sort(key=lambda pair: pair[0], reverse=sort.startswith("-"))
    return [r for _, r in valued] + [r for k, r in keyed if k is None]


def table_rows(rows: Sequence[GroupTask], now: int) -> Markup:
    """The table's `<tr>`s for `rows`, every value escaped."""
    out: list[str] = []
    append, duration, esc = out.append, formats.duration, fast_escape
    states: dict[str, str] = {}
    for row in rows:
        task_id, state, name = row["task_id"], row["state"], name_of(row)
        ms = run_duration(row["started"], row["resolved"], state, now)
        tid = esc(task_id)
        st = states.get(state) or states.setdefault(state, esc(state))
        reason = row.get("reason")
        why = f' <span class="reason">{esc(reason)}</span>' if state == "exception" and reason else ""
        append(
            f'<tr id="t-{tid}" data-state="{st}"><td class="name">'
            f'<a href="/tasks/{tid}">{esc(name)}</a></td><td class="id">{tid}</td>'
            f'<td class="state state-{st}">{st}{why}</td><td class="num">{row["runs"] or 0}</td>'
            f"<td>{started_text(row['started'])}</td>"
            f'<td class="num">{"" if ms is None else duration(ms)}</td>'
            f"<td>{esc(worker_of(row['worker_group'], row['worker_id']))}</td></tr>\n"
        )
    return Markup("".join(out))


def started_text(started: str | None) -> str:
    """When the last run started, as the table shows it (`2026-11-29 10:15:26Z`); nothing to escape:
    the queue wrote it, ISO 8601 (anything else shows empty)."""
    if (
        not started
        or len(started) < 19
        or not started[:19].replace("-", "").replace(":", "").replace("T", "").isdigit()
    ):
        return ""
    return f"{started[:10]} {started[11:19]}Z"


def json_rows(rows: Sequence[GroupTask], now: int) -> list[list[object]]:
    """Every row as `[taskId, name, state, runs, last run's duration, worker, started, duration in
    ms, reason]` (the page's script filters and sorts these and draws the rows it shows)."""
    duration = formats.duration
    found: list[list[object]] = []
    for row in rows:
        state = row["state"]
        ms = run_duration(row["started"], row["resolved"], state, now)
        worker = worker_of(row["worker_group"], row["worker_id"])
        found.append(
            [
                row["task_id"],
                name_of(row),
                state,
                row["runs"] or 0,
                "" if ms is None else duration(ms),
                worker,
                started_text(row["started"]),
                ms,
                row.get("reason") or "",
            ]
        )
    return found
