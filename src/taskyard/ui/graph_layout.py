"""Laying out a task group's dependency graph: layers, order within a layer, boxes and lines.

Pure: no I/O and no markup. A task's layer is the longest path to it from a root of the group
(a task that depends on no task of the group), following `task.dependencies` within the group;
a dependency outside the group (or on a task that no longer exists) is not drawn and does not
count. The queue makes cycles impossible, but a layout must never hang on one: a task left on
a cycle goes one layer past the deepest of its dependencies already placed.

Layers are columns, left to right. Up to `threshold` tasks, each task is a box, ordered within
its column by the mean row of its dependencies (fewer crossing lines). Past it, the graph is
collapsed: one box per (layer, state) holding how many tasks it stands for, and one line per pair
of boxes with how many dependencies it stands for. A graph deeper than `MAX_COLUMNS` layers
(a long chain) gathers consecutive layers into bands, one column each.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

THRESHOLD = 300  # tasks drawn one box each; above this the graph is collapsed
MAX_COLUMNS = 60  # columns of a collapsed graph; deeper graphs gather layers into bands
STATES = ("unscheduled", "pending", "running", "completed", "failed", "exception")

# Sizes in SVG user units (pixels at 100%).
BOX_W, BOX_H = 190, 26
GAP_X, GAP_Y = 50, 8
MARGIN = 12


class Task(NamedTuple):
    """What the layout needs of a task (a tuple: a group may have 10,000 of them to make)."""

    task_id: str
    name: str
    state: str
    dependencies: Sequence[str] = ()


@dataclass(frozen=True)
class Box:
    """One box: a task (`count` 1, `task_id` set), or the tasks of a state in a layer or band."""

    key: str
    label: str
    state: str
    column: int
    layers: tuple[int, int]  # the first and last layer it stands for
    count: int
    task_id: str | None
    x: int
    y: int


@dataclass(frozen=True)
class Line:
    """A dependency (or, collapsed, `count` of them) from box `source` to box `target`."""

    source: str
    target: str
    count: int


@dataclass(frozen=True)
class Drawing:
    boxes: list[Box]
    lines: list[Line]
    width: int
    height: int
    collapsed: bool
    layers: int  # how many layers the graph has
    tasks: int
    banded: bool = False  # collapsed, with several layers to a column

    def box(self, key: str) -> Box:
        return next(b for b in self.boxes if b.key == key)


def in_group_edges(tasks: Sequence[Task]) -> list[tuple[str, str]]:
    """(required, dependent) for each dependency on a task of the group, once each; no self-loops."""
    known = {t.task_id for t in tasks}
    edges: list[tuple[str, str]] = []
    for task in tasks:
        seen: set[str] = set()
        for dep in task.dependencies:
            if dep in known and dep != task.task_id and dep not in seen:
                seen.add(dep)
                edges.append((dep, task.task_id))
    return edges


def layers(tasks: Sequence[Task], edges: Iterable[tuple[str, str]] | None = None) -> dict[str, int]:
    """Each task's layer: the longest path to it from a root of the group (roots are layer 0)."""
    edges = in_group_edges(tasks) if edges is None else edges
    dependents: dict[str, list[str]] = defaultdict(list)
    waiting = {t.task_id: 0 for t in tasks}
    for required, dependent in edges:
        dependents[required].append(dependent)
        waiting[dependent] += 1
    layer = dict.fromkeys(waiting, 0)
    ready = deque(task_id for task_id, n in waiting.items() if n == 0)
    placed: set[str] = set()
    while ready:
        task_id = ready.popleft()
        placed.add(task_id)
        for dependent in dependents.get(task_id, ()):
            layer[dependent] = max(layer[dependent], layer[task_id] + 1)
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                ready.append(dependent)
    if len(placed) < len(layer):  # a cycle: cannot happen in the queue; place it anyway
        _place_cycles(tasks, layer, placed)
    return layer


def _place_cycles(tasks: Sequence[Task], layer: dict[str, int], placed: set[str]) -> None:
    for task in tasks:
        if task.task_id not in placed:
            deps = [layer[d] for d in task.dependencies if d in placed and d != task.task_id]
            layer[task.task_id] = max(deps, default=-1) + 1
            placed.add(task.task_id)


def draw(tasks: Sequence[Task], threshold: int = THRESHOLD) -> Drawing:
    """The drawing of the group's graph: a box per task up to `threshold` tasks, else collapsed."""
    edges = in_group_edges(tasks)
    layer = layers(tasks, edges)
    depth = max(layer.values(), default=-1) + 1
    if len(tasks) <= threshold:
        return _detailed(tasks, edges, layer, depth)
    return _collapsed(tasks, edges, layer, depth)


def _detailed(
    tasks: Sequence[Task], edges: list[tuple[str, str]], layer: Mapping[str, int], depth: int
) -> Drawing:
    columns: list[list[Task]] = [[] for _ in range(depth)]
    for task in sorted(tasks, key=lambda t: (t.name, t.task_id)):
        columns[layer[task.task_id]].append(task)
    requires: dict[str, list[str]] = defaultdict(list)
    for required, dependent in edges:
        requires[dependent].append(required)
    row: dict[str, int] = {}
    for column in columns:
        column.sort(key=lambda t: _barycenter(requires.get(t.task_id, ()), row))
        row.update((t.task_id, i) for i, t in enumerate(column))
    boxes = [
        Box(t.task_id, t.name, t.state, c, (c, c), 1, t.task_id, *_position(c, row[t.task_id]))
        for c, column in enumerate(columns)
        for t in column
    ]
    lines = [Line(required, dependent, 1) for required, dependent in edges]
    return _finish(boxes, lines, collapsed=False, depth=depth, tasks=len(tasks))


def _barycenter(required: Iterable[str], row: Mapping[str, int]) -> float:
    rows = [row[r] for r in required if r in row]
    return sum(rows) / len(rows) if rows else math.inf


def _collapsed(
    tasks: Sequence[Task], edges: list[tuple[str, str]], layer: Mapping[str, int], depth: int
) -> Drawing:
    band = max(1, math.ceil(depth / MAX_COLUMNS))
    counts: dict[tuple[int, str], int] = defaultdict(int)
    state_of = {}
    for task in tasks:
        state_of[task.task_id] = task.state
        counts[(layer[task.task_id] // band, task.state)] += 1
    order = {state: i for i, state in enumerate(STATES)}
    keys = sorted(counts, key=lambda k: (k[0], order.get(k[1], len(order)), k[1]))
    boxes: list[Box] = []
    rows: dict[int, int] = defaultdict(int)
    for column, state in keys:
        first, last = column * band, min(depth, (column + 1) * band) - 1
        n = counts[(column, state)]
        boxes.append(
            Box(_key(column, state), _label(n, state), state, column, (first, last), n, None,
                *_position(column, rows[column]))
        )  # fmt: skip
        rows[column] += 1
    joined: dict[tuple[str, str], int] = defaultdict(int)
    for required, dependent in edges:
        source = _key(layer[required] // band, state_of[required])
        target = _key(layer[dependent] // band, state_of[dependent])
        if source != target:
            joined[(source, target)] += 1
    lines = [Line(s, t, n) for (s, t), n in sorted(joined.items())]
    drawing = _finish(boxes, lines, collapsed=True, depth=depth, tasks=len(tasks))
    return dataclasses.replace(drawing, banded=band > 1)


def _key(column: int, state: str) -> str:
    return f"{column}:{state}"


def _label(count: int, state: str) -> str:
    return f"{count:,} {state}"


def _position(column: int, row: int) -> tuple[int, int]:
    return MARGIN + column * (BOX_W + GAP_X), MARGIN + row * (BOX_H + GAP_Y)


def _finish(boxes: list[Box], lines: list[Line], *, collapsed: bool, depth: int, tasks: int) -> Drawing:
    width = max((b.x + BOX_W for b in boxes), default=0) + MARGIN
    height = max((b.y + BOX_H for b in boxes), default=0) + MARGIN
    return Drawing(boxes, lines, width, height, collapsed, depth, tasks)
