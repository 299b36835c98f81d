"""The group graph's layout: layers by longest path, order within a layer, collapsing, and
robustness to what the queue never makes (cycles) or no longer holds (missing tasks)."""

from __future__ import annotations

from taskyard.ui import graph_layout
from taskyard.ui.graph_layout import BOX_H, BOX_W, Task, draw, layers


def t(task_id: str, *deps: str, state: str = "pending") -> Task:
    return Task(task_id, f"name of {task_id}", state, deps)


def test_a_layer_is_the_longest_path_from_a_root() -> None:
    # a -> b -> c, and a -> c directly: c is two layers down, not one.
    found = layers([t("c", "a", "b"), t("b", "a"), t("a"), t("lone")])
    assert found == {"a": 0, "b": 1, "c": 2, "lone": 0}


def test_dependencies_outside_the_group_and_missing_tasks_do_not_count() -> None:
    found = layers([t("a", "elsewhere"), t("b", "a", "gone", "a")])
    assert found == {"a": 0, "b": 1}
    drawing = draw([t("a", "elsewhere"), t("b", "a", "gone", "a")])
    assert [(line.source, line.target) for line in drawing.lines] == [("a", "b")]


def test_a_cycle_or_a_self_loop_is_placed_and_never_hangs() -> None:
    found = layers([t("root"), t("x", "root", "z"), t("y", "x"), t("z", "y"), t("self", "self")])
    assert found["root"] == 0 and found["self"] == 0
    assert {found["x"], found["y"], found["z"]} <= set(range(1, 5))
    drawing = draw([t("x", "y"), t("y", "x")])
    assert {b.key for b in drawing.boxes} == {"x", "y"}


def test_every_task_gets_a_box_in_its_layers_column_without_overlap() -> None:
    tasks = [
        t("r1"),
        t("r2"),
        *(t(f"m{i}", "r1" if i % 2 else "r2") for i in range(10)),
        t("end", "m0", "m9"),
    ]
    drawing = draw(tasks)
    assert not drawing.collapsed and drawing.layers == 3 and drawing.tasks == 13
    where = {b.key: b for b in drawing.boxes}
    assert len(where) == 13
    assert where["r1"].column == 0 and where["m3"].column == 1 and where["end"].column == 2
    assert where["r1"].x < where["m3"].x < where["end"].x
    spots = {(b.x, b.y) for b in drawing.boxes}
    assert len(spots) == 13  # no two boxes in one place
    assert all(b.x + BOX_W <= drawing.width and b.y + BOX_H <= drawing.height for b in drawing.boxes)
    assert all(b.task_id == b.key and b.count == 1 for b in drawing.boxes)
    assert len(drawing.lines) == 12


def test_a_layer_is_ordered_by_where_its_dependencies_are() -> None:
    # b-children depend on b, a-children on a; each sits near its parent, not by name alone.
    tasks = [t("a"), t("b"), t("0-of-b", "b"), t("1-of-a", "a")]
    rows = {b.key: b.y for b in draw(tasks).boxes}
    assert rows["a"] < rows["b"]
    assert rows["1-of-a"] < rows["0-of-b"]


def test_above_the_threshold_the_graph_collapses_to_one_box_per_layer_and_state() -> None:
    tasks = [t("r0", state="completed"), t("r1", state="failed")]
    tasks += [
        t(f"d{i}", "r0" if i < 6 else "r1", state="pending" if i < 6 else "unscheduled") for i in range(9)
    ]
    drawing = draw(tasks, threshold=5)
    assert drawing.collapsed and not drawing.banded
    boxes = {b.key: b for b in drawing.boxes}
    assert set(boxes) == {"0:completed", "0:failed", "1:pending", "1:unscheduled"}
    assert boxes["1:pending"].count == 6 and boxes["1:unscheduled"].count == 3
    assert boxes["1:pending"].label == "6 pending" and boxes["1:pending"].task_id is None
    lines = {(line.source, line.target): line.count for line in drawing.lines}
    assert lines == {("0:completed", "1:pending"): 6, ("0:failed", "1:unscheduled"): 3}


def test_boxes_of_a_column_follow_the_order_of_states() -> None:
    states = ["exception", "completed", "running", "pending"]
    drawing = draw([t(f"x{i}", state=s) for i, s in enumerate(states)], threshold=1)
    column = sorted(drawing.boxes, key=lambda b: b.y)
    assert [b.state for b in column] == ["pending", "running", "completed", "exception"]


def test_a_long_chain_collapses_into_bands_of_layers() -> None:
    n = 10_000
    chain = [t("c0")] + [t(f"c{i}", f"c{i - 1}") for i in range(1, n)]
    drawing = draw(chain)
    assert drawing.collapsed and drawing.banded and drawing.layers == n
    assert len(drawing.boxes) <= graph_layout.MAX_COLUMNS
    assert sum(b.count for b in drawing.boxes) == n
    first = min(drawing.boxes, key=lambda b: b.column)
    assert first.layers[0] == 0 and first.layers[1] > 0
    assert max(b.layers[1] for b in drawing.boxes) == n - 1
    assert all(line.source != line.target for line in drawing.lines)


def test_ten_thousand_tasks_make_a_small_drawing() -> None:
    tasks = [t(f"r{i}", state="completed") for i in range(100)]
    tasks += [t(f"m{i}", f"r{i % 100}", f"r{(i + 1) % 100}", state="running") for i in range(4900)]
    tasks += [t(f"l{i}", f"m{i % 4900}", state="unscheduled") for i in range(5000)]
    drawing = draw(tasks)
    assert drawing.tasks == 10_000 and drawing.layers == 3
    assert [(b.key, b.count) for b in drawing.boxes] == [
        ("0:completed", 100),
        ("1:running", 4900),
        ("2:unscheduled", 5000),
    ]
    assert {(line.source, line.target): line.count for line in drawing.lines} == {
        ("0:completed", "1:running"): 9800,
        ("1:running", "2:unscheduled"): 5000,
    }


def test_an_empty_group_draws_nothing() -> None:
    drawing = draw([])
    assert drawing.boxes == [] and drawing.lines == [] and drawing.layers == 0
