"""The six speed aims in one table: each figure measured by the benches, beside its target, met or not.

`make bench` runs every bench with `--json` into one directory, then this script on it:

  budgets.json    bench/budgets.py    aim 2, statements per hot call (tests/api/test_statement_budgets.py)
  lifecycle.json  bench/lifecycle.py  aims 1 and 3, lifecycles/s, dispatch, queue wait, CPU per lifecycle
  worker.json     bench/worker.py     aim 5
  scale.json      bench/scale.py      aim 6, at the sizes it ran (--quick by default in `make bench`)
  peers.json      bench/peers.py      aim 4, procrastinate and Celery beside taskyard

A missing file or figure shows as "-" and its aim as "not measured". Nothing is run here.
Run: .venv/bin/python bench/aims.py DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parent.parent
if str(ROOT) not in sys.path:  # run as a script: `bench.*` is imported from the checkout
    sys.path.insert(0, str(ROOT))

from bench import worker  # noqa: E402
from bench.lifecycle import TARGETS, fmt  # noqa: E402
from bench.scaling import table as scale_table  # noqa: E402

BACKENDS = ("sqlite", "postgres")
FILES = ("budgets", "lifecycle", "worker", "scale", "peers")
MET, NOT_MET, UNMEASURED = "met", "NOT MET", "not measured"
PROCRASTINATE = ("procrastinate", "procrastinate-single")
PEERS = (*PROCRASTINATE, "celery-prefork", "celery-threads")


@dataclass(frozen=True)
class Target:
    """`op value`, where op is >= or <=."""

    op: str
    value: float

    @classmethod
    def parse(cls, text: str) -> Target:
        op, value = text.split()
        assert op in (">=", "<="), text
        return cls(op, float(value))

    def met(self, figure: float) -> bool:
        return figure >= self.value if self.op == ">=" else figure <= self.value

    def __str__(self) -> str:
        return f"{'≥' if self.op == '>=' else '≤'} {self.value:g}"


@dataclass(frozen=True)
class Row:
    """One line of the table: the aim's number, what is measured, the figure on each backend (or one
    figure for both), the target, and the verdict."""

    aim: str
    what: str
    cells: tuple[str, str] | str
    target: str
    verdict: str


Values = Mapping[str, float | None]  # backend: figure


def verdict(values: Values, targets: Mapping[str, Target]) -> str:
    """Met when every measured figure that has a target meets it; not measured when none was."""
    judged = [targets[b].met(v) for b, v in values.items() if v is not None and b in targets]
    if not judged:
        return UNMEASURED
    return MET if all(judged) else NOT_MET


def figure_row(
    aim: str, what: str, values: Values, spec: str, targets: Target | Mapping[str, Target] | None
) -> Row:
    """A row with a figure per backend; `targets` one for both, per backend, or none (shown only)."""
    if targets is None:
        per: Mapping[str, Target] = {}
    elif isinstance(targets, Target):
        per = dict.fromkeys(BACKENDS, targets)
    else:
        per = targets
    cells = (fmt(values.get("sqlite"), spec), fmt(values.get("postgres"), spec))
    if not per:
        target = ""
    elif len({str(t) for t in per.values()}) == 1 and len(per) == len(BACKENDS):
        target = str(next(iter(per.values())))
    else:
        target = ", ".join(f"{t} {'SQLite' if b == 'sqlite' else 'PG'}" for b, t in per.items())
    return Row(aim, what, cells, target, verdict(values, per) if per else "")


def dig(data: Any, *path: Any) -> Any:
    """bench/scale.py's walk into nested figures, by the keys as JSON wrote them (strings)."""
    return scale_table.dig(data, tuple(str(key) for key in path))


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value == value else None  # NaN: none


def per_backend(data: Any, *path: Any) -> dict[str, float | None]:
    return {b: number(dig(data, "backends", b, *path)) for b in BACKENDS}


# --------------------------------------------------------------------------- the aims


def lifecycle_rows(data: Any) -> list[Row]:
    """Aim 1: lifecycles/s with Hawk (8 workers), dispatch p50 to a waiting worker, queue wait."""
    options = dig(data, "options") or {}
    tasks = f", {options['tasks']:,} tasks" if "tasks" in options else ""
    workers = options.get("workers", 8)
    rate = {"sqlite": Target.parse(TARGETS["lifecycles_per_s_sqlite"])}
    rate["postgres"] = Target.parse(TARGETS["lifecycles_per_s"])
    return [
        figure_row(
            "1",
            f"lifecycles/s, Hawk, {workers} workers{tasks}",
            per_backend(data, "throughput", "lifecycles_per_s"),
            ".0f",
            rate,
        ),
        figure_row(
            "1",
            "dispatch to a waiting worker p50, ms",
            per_backend(data, "dispatch", "commit_p50"),
            ".2f",
            Target.parse(TARGETS["dispatch_commit_p50"]),
        ),
        figure_row(
            "1",
            "queue wait under load beyond the backlog ahead, max s",
            per_backend(data, "throughput", "queue_wait", "excess_max_s"),
            ".2f",
            Target.parse(TARGETS["queue_wait_excess_s"]),
        ),
        figure_row(
            "1", "  queue wait p50, s", per_backend(data, "throughput", "queue_wait", "p50_s"), ".2f", None
        ),
    ]


def budget_rows(data: Any) -> list[Row]:
    """Aim 2: statements / round trips per hot call on each backend, within its budget."""
    budgets: dict[str, dict[str, list[int]]] = dig(data, "budgets") or {}
    spent = dig(data, "spent") or {}
    rows, verdicts = [], []
    for call, budget in budgets.items():
        cells, judged = [], []
        for b in BACKENDS:
            got = dig(spent, call, b)
            cells.append("-" if got is None else f"{got[0]} / {got[1]}")
            if got is not None:
                judged.append(got[0] <= budget[b][0] and got[1] <= budget[b][1])
        pair = {f"{s} / {t}" for s, t in budget.values()}
        target = "≤ " + (
            pair.pop() if len(pair) == 1 else ", ".join(f"{s} / {t}" for s, t in budget.values())
        )
        this = UNMEASURED if not judged else MET if all(judged) else NOT_MET
        verdicts.append(this)
        rows.append(Row("2", f"  {call}", (cells[0], cells[1]), target, this))
    overall = (
        UNMEASURED
        if not budgets or all(v == UNMEASURED for v in verdicts)
        else NOT_MET
        if NOT_MET in verdicts
        else MET
    )
    head = Row("2", "statements / round trips per hot call (each below)", ("", ""), "the budget", overall)
    return [head, *rows]


def cpu_rows(data: Any) -> list[Row]:
    """Aim 3: CPU ms per lifecycle, split by process."""
    per = ("throughput", "cpu_ms_per_lifecycle")
    postgres = {"sqlite": None, "postgres": number(dig(data, "backends", "postgres", *per, "postgres"))}
    return [
        figure_row(
            "3",
            "server CPU ms per lifecycle",
            per_backend(data, *per, "server"),
            ".2f",
            Target.parse(TARGETS["server_cpu_ms"]),
        ),
        figure_row("3", "  PostgreSQL CPU ms per lifecycle", postgres, ".2f", None),
        figure_row(
            "3", "  load generator CPU ms per lifecycle", per_backend(data, *per, "client"), ".2f", None
        ),
    ]


def peer_rows(data: Any) -> list[Row]:
    """Aim 4: taskyard's lifecycle rate ahead of procrastinate's; every peer beside taskyard's two rates."""
    systems = dig(data, "systems") or {}
    lifecycles = number(dig(systems, "taskyard", "jobs_per_s"))
    worker_rate = number(dig(systems, "taskyard-worker", "jobs_per_s"))
    best = [r for name in PROCRASTINATE if (r := number(dig(systems, name, "jobs_per_s"))) is not None]
    ahead = MET if best and lifecycles is not None and lifecycles > max(best) else NOT_MET
    ahead = ahead if best and lifecycles is not None else UNMEASURED
    rows = [
        Row(
            "4",
            "taskyard lifecycles/s (PostgreSQL; peers.py)",
            fmt(lifecycles, ".0f"),
            "> procrastinate",
            ahead,
        ),
        Row("4", "  taskyard worker tasks/s (SQLite; peers.py)", fmt(worker_rate, ".0f"), "", ""),
    ]
    for name in PEERS:
        rate = number(dig(systems, name, "jobs_per_s"))
        ratios = [f"{rate / base:.2f}x" if rate and base else "-" for base in (lifecycles, worker_rate)]
        cell = "-" if rate is None else f"{rate:.0f} ({ratios[0]}, {ratios[1]})"
        rows.append(Row("4", f"  {name} jobs/s (x lifecycles, x worker)", cell, "", ""))
    return rows


def worker_rows(data: Any) -> list[Row]:
    """Aim 5: the worker's overhead per no-op task and its rate at capacity 4 (`taskyard up`, SQLite)."""
    rows = []
    for what, key, target in (
        ("worker overhead per task p50, ms", "overhead_p50_ms", Target("<=", worker.AIM_OVERHEAD_P50_MS)),
        ("worker overhead per task p99, ms", "overhead_p99_ms", Target("<=", worker.AIM_OVERHEAD_P99_MS)),
        ("worker no-op tasks/s, capacity 4", "tasks_per_s", Target(">=", worker.AIM_TASKS_PER_S)),
    ):
        value = number(dig(data, key))
        rows.append(figure_row("5", what, {"sqlite": value, "postgres": None}, ".1f", {"sqlite": target}))
    return rows


def scale_rows(data: Any) -> list[Row]:
    """Aim 6: the cost curve, at the sizes bench/scale.py ran (named in each row)."""
    options = dig(data, "options") or {}
    sizes, groups = options.get("sizes") or [], options.get("group_sizes") or []
    rows = [
        figure_row(
            "6", f"claimWork p50 at {n:,} pending, ms", per_backend(data, "claim", "p50", n), ".2f", None
        )
        for n in sizes
    ]
    span = f"{sizes[-1]:,} / {sizes[0]:,}" if sizes else "largest / smallest"
    ratio = Target("<=", scale_table.AIMS["claim_ratio"])
    rows.append(
        figure_row(
            "6", f"claimWork p50 ratio, {span} pending", per_backend(data, "claim", "ratio"), ".2f", ratio
        )
    )
    rows += [
        figure_row(
            "6",
            f"listTaskGroup page at {n:,} tasks (worse of first/last), ms",
            worse_page(data, n),
            ".2f",
            None,
        )
        for n in groups
    ]
    span = f"{groups[-1]:,} / {groups[0]:,}" if groups else "largest / smallest"
    flat = Target("<=", scale_table.AIMS["group_ratio"])
    rows.append(
        figure_row(
            "6", f"listTaskGroup page ratio, {span} tasks", per_backend(data, "group", "ratio"), ".2f", flat
        )
    )
    deps = options.get("dependents")
    rows.append(
        figure_row(
            "6",
            f"{deps:,} dependents all pending, s" if deps else "dependents all pending, s",
            per_backend(data, "dependents", "all_pending_s"),
            ".2f",
            Target("<=", scale_table.AIMS["dependents_s"]),
        )
    )
    big = f"{sizes[-1]:,}" if sizes else "the largest backlog"
    rows.append(
        figure_row(
            "6",
            f"server RSS with {big} pending, MB",
            per_backend(data, "claim", "memory_filled", "VmRSS"),
            ".0f",
            Target("<=", scale_table.AIMS["rss_mb"]),
        )
    )
    ready = Target("<=", scale_table.AIMS["ready_s"] * 1000)
    rows.append(
        figure_row(
            "6",
            "`taskyard serve` ready, fresh database, ms",
            per_backend(data, "ready_fresh_ms"),
            ".0f",
            {"sqlite": ready},
        )
    )
    return rows


def worse_page(data: Any, size: int) -> dict[str, float | None]:
    pages = {
        b: [number(dig(data, "backends", b, "group", w, size)) for w in ("first", "last")] for b in BACKENDS
    }
    return {b: max((v for v in values if v is not None), default=None) for b, values in pages.items()}


SECTIONS: tuple[tuple[str, Callable[[Any], list[Row]]], ...] = (
    ("lifecycle", lifecycle_rows),
    ("budgets", budget_rows),
    ("lifecycle", cpu_rows),
    ("peers", peer_rows),
    ("worker", worker_rows),
    ("scale", scale_rows),
)


def rows(figures: Mapping[str, Any]) -> list[Row]:
    """Every row of the table from the benches' figures (`{file stem: its JSON}`; any may be missing)."""
    return [row for key, section in SECTIONS for row in section(figures.get(key))]


def notes(figures: Mapping[str, Any]) -> list[str]:
    """What the reader must know about the sizes measured."""
    said = []
    scale = dig(figures, "scale", "options") or {}
    if scale.get("quick") or (scale.get("sizes") and scale["sizes"][-1] < 1_000_000):
        said.append(
            "aim 6 was measured at smaller sizes than the aims' (1M pending, groups of 100k, 10,000"
            " dependents): `make bench SCALE=full` runs bench/scale.py at the aims' sizes"
        )
    if dig(figures, "lifecycle", "options", "quick"):
        said.append("bench/lifecycle.py ran with --quick (fewer tasks and samples)")
    if dig(figures, "budgets", "passed") is False:
        said.append("tests/api/test_statement_budgets.py failed: a call is off its budget")
    return said


def render(table: list[Row]) -> str:
    head = Row("aim", "figure", ("SQLite", "PostgreSQL"), "target", "verdict")
    width = max(len(r.what) for r in [head, *table]) + 2
    target_width = max(len(r.target) for r in [head, *table]) + 2

    def line(r: Row) -> str:
        cells = f"{r.cells[0]:>12}{r.cells[1]:>12}" if isinstance(r.cells, tuple) else f"{r.cells:>24}"
        return f"{r.aim:<4}{r.what:<{width}}{cells}  {r.target:<{target_width}}{r.verdict}".rstrip()

    out = [line(head), "-" * len(line(head))]
    previous = None
    for r in table:
        if previous is not None and r.aim != previous:
            out.append("")
        out.append(line(r))
        previous = r.aim
    return "\n".join(out)


def load(directory: Path) -> dict[str, Any]:
    """The figures the benches wrote into `directory`."""
    figures: dict[str, Any] = {}
    for name in FILES:
        path = directory / f"{name}.json"
        if path.exists():
            figures[name] = json.loads(path.read_text())
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("directory", type=Path, help="where the benches wrote their --json files")
    args = p.parse_args(argv)
    figures = load(args.directory)
    table = rows(figures)
    print(f"\n== the six speed aims (figures from {args.directory}) ==\n")
    print(render(table))
    for note in notes(figures):
        print(f"\nnote: {note}")
    judged = [r.verdict for r in table if not r.what.startswith("  ")]
    said = ", ".join(f"{judged.count(v)} {v}" for v in (MET, NOT_MET, UNMEASURED))
    print(f"\n{said} (of the rows with a target; indented rows are details)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
