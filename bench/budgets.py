"""The statement budgets of the hot calls (aim 2), measured: what each call spends beside its budget.

It runs tests/api/test_statement_budgets.py under pytest, on SQLite and PostgreSQL (the test's own
scenarios and its counting with `taskyard.storage.counting`, through the real app; nothing is
counted twice or differently here), collects what each call spent, prints it beside the test's
BUDGETS and with --json writes it for bench/aims.py. This file is also the pytest plugin that
collects the figures (`-p bench.budgets --budgets-json PATH`). The budgets and why each statement
is there: bench/README.md, "Statement budgets". Run: .venv/bin/python bench/budgets.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parent.parent
TEST = "tests/api/test_statement_budgets.py"
MODULE = "tests.api.test_statement_budgets"
BACKENDS = ("sqlite", "postgres")  # the test's BUDGETS columns, in order


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--budgets-json", default=None, help="write what each call spent to this file")


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    path = session.config.getoption("--budgets-json")
    module = sys.modules.get(MODULE)
    if path and module is not None:
        figures = collected(module.BUDGETS, module.SPENT)
        Path(path).write_text(json.dumps({**figures, "passed": exitstatus == 0}, indent=2))


def collected(
    budgets: dict[str, tuple[tuple[int, int], ...]], spent: dict[str, dict[int, tuple[int, int]]]
) -> dict[str, Any]:
    """{"budgets": {call: {backend: [statements, trips]}}, "spent": the same shape, as counted}."""
    return {
        "budgets": {
            call: dict(zip(BACKENDS, map(list, pair), strict=True)) for call, pair in budgets.items()
        },
        "spent": {
            call: {BACKENDS[column]: list(v) for column, v in by_column.items()}
            for call, by_column in spent.items()
        },
    }


def measure(path: Path) -> int:
    """Run the test with this plugin; its exit status (1: a call is off its budget)."""
    command = [sys.executable, "-m", "pytest", "-p", "bench.budgets", "--budgets-json", str(path)]
    command += ["-q", "-p", "no:cacheprovider", "-o", "addopts=--strict-markers", TEST]
    return subprocess.run(command, cwd=ROOT, check=False).returncode


def render(figures: dict[str, Any]) -> str:
    """One line per call: statements / round trips spent on each backend, and the budget."""

    def cell(call: str, backend: str) -> str:
        got = figures.get("spent", {}).get(call, {}).get(backend)
        budget = figures["budgets"][call][backend]
        return f"{'-' if got is None else f'{got[0]} / {got[1]}'} ({budget[0]} / {budget[1]})"

    width = max(len(call) for call in figures["budgets"]) + 2
    lines = [f"{'statements / round trips (budget)':<{width}}{'sqlite':>16}{'postgres':>16}"]
    lines += [
        f"{call:<{width}}" + "".join(f"{cell(call, b):>16}" for b in BACKENDS) for call in figures["budgets"]
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--json", type=Path, default=None, help="also write the figures to this file (bench/aims.py)"
    )
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="taskyard-budgets-") as tmp:
        path = args.json or Path(tmp) / "budgets.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        status = measure(path)
        if not path.exists():
            print(f"{TEST} wrote no figures (exit {status})", file=sys.stderr)
            return status or 1
        print("\n" + render(json.loads(path.read_text())))
    if status:
        print(f"\n{TEST} failed: a call is off its budget (above), or the test broke")
    return status


if __name__ == "__main__":
    sys.exit(main())
