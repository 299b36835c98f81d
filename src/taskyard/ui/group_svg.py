"""A group's dependency graph as SVG, drawn on the server: no script needed to see it.

Each box links to its task's page (or, collapsed, to the group's table filtered by that state),
is coloured by state through the stylesheet's classes (the pages' security policy allows no
inline style), and carries a `<title>` with its whole name. Every text is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

import orjson
from markupsafe import Markup, escape

from taskyard.api.pages import GroupTask
from taskyard.ui.graph_layout import BOX_H, BOX_W, Box, Drawing, Task, draw

LABEL_CHARS = 26  # what fits in a box


def tasks_of(rows: Sequence[GroupTask]) -> list[Task]:
    """Graph tasks from `ui_group_graph` rows (id, state, name, dependencies as JSON text)."""
    found = []
    for row in rows:
        task_id, name = row["task_id"], row["name"]
        deps = _dependencies(row["dependencies"])
        found.append(Task(task_id, name if isinstance(name, str) and name else task_id, row["state"], deps))
    return found


def _dependencies(text: str | None) -> tuple[str, ...]:
    if not text or text == "[]":
        return ()
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return ()
    return tuple(d for d in value if isinstance(d, str)) if isinstance(value, list) else ()


def short(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def svg(drawing: Drawing, task_group_id: str, title: str) -> Markup:
    """The drawing as an `<svg>` element, every box a link."""
    w, h = max(drawing.width, 1), max(drawing.height, 1)
    parts = [
        f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" aria-labelledby="graph-title">',
        f'<title id="graph-title">{escape(title)}</title>',
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" class="arrowhead"/></marker></defs>',
        '<g class="edges">',
    ]
    where = {b.key: b for b in drawing.boxes}
    for line in drawing.lines:
        source, target = where[line.source], where[line.target]
        parts.append(_edge(source, target, line.count, drawing.collapsed))
    parts.append('</g><g class="nodes">')
    group = quote(task_group_id, safe="")
    parts += [_node(box, group, drawing.collapsed) for box in drawing.boxes]
    parts.append("</g></svg>")
    return Markup("".join(parts))


def _edge(source: Box, target: Box, count: int, collapsed: bool) -> str:
    x1, y1 = source.x + BOX_W, source.y + BOX_H // 2
    x2, y2 = target.x, target.y + BOX_H // 2
    bend = max(30, abs(x2 - x1) // 2)
    d = f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"
    if not collapsed:
        return f'<path d="{d}" marker-end="url(#arrow)"/>'
    width = 1 + min(6, len(str(count)) - 1) * 1.2
    word = "dependency" if count == 1 else "dependencies"
    tip = f"<title>{count:,} {word}</title>"
    return f'<path d="{d}" stroke-width="{width:.1f}" marker-end="url(#arrow)">{tip}</path>'


def _node(box: Box, group: str, collapsed: bool) -> str:
    state = escape(box.state)
    if collapsed:
        first, last = box.layers
        where = f"layer {first}" if first == last else f"layers {first} to {last}"
        href = f"/groups/{group}?state={quote(box.state, safe='')}"
        tip = f"{where}: {box.label} task{'s' if box.count != 1 else ''}"
    else:
        href = f"/tasks/{quote(box.task_id or '', safe='')}"
        tip = f"{box.label} ({box.state})"
    return (
        f'<a href="{escape(href)}" class="node s-{state}"><title>{escape(tip)}</title>'
        f'<rect x="{box.x}" y="{box.y}" width="{BOX_W}" height="{BOX_H}" rx="4"/>'
        f'<text x="{box.x + 8}" y="{box.y + BOX_H // 2 + 5}">{escape(short(box.label))}</text></a>'
    )


def graph_svg(rows: Sequence[GroupTask], task_group_id: str, threshold: int) -> tuple[Drawing, Markup]:
    drawing = draw(tasks_of(rows), threshold)
    title = f"Dependency graph of task group {task_group_id}"
    return drawing, svg(drawing, task_group_id, title)
