"""bench/scale.py (its parts in bench/scaling/) without servers: its options and the table it ends
with. Nothing here starts a server or touches a database."""

from __future__ import annotations

import pytest
from bench.scaling import options
from bench.scaling import table as scale_table


def test_by_default_the_sizes_are_the_aims_sizes_on_both_backends() -> None:
    args = options.parse_args([])
    assert args.sizes == [1000, 100_000, 1_000_000]
    assert args.group_sizes == [10, 10_000, 100_000]
    assert args.dependents == 10_000
    assert args.backends == ["sqlite", "postgres"]
    assert args.skip == set()


def test_quick_uses_smaller_sizes_and_explicit_sizes_win() -> None:
    quick = options.parse_args(["--quick"])
    assert quick.sizes[-1] < 1_000_000 and quick.group_sizes[-1] < 100_000 and quick.dependents < 10_000
    chosen = options.parse_args(
        ["--quick", "--sizes", "5000,1_000", "--group-sizes", "7", "--dependents", "3"]
    )
    assert (chosen.sizes, chosen.group_sizes, chosen.dependents) == ([1000, 5000], [7], 3)


@pytest.mark.parametrize(
    "argv",
    [
        ["--sizes", "1000,lots"],
        ["--sizes", "0,1000"],
        ["--backends", "mysql"],
        ["--skip", "everything"],
        ["--sizes", "100"],  # smaller than the claimWork samples it must hold
    ],
)
def test_bad_options_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        options.parse_args(argv)
    assert exit_.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_the_table_puts_each_figure_beside_its_aim() -> None:
    args = options.parse_args(
        ["--sizes", "1000,100000", "--group-sizes", "10,100000", "--backends", "sqlite,postgres"]
    )
    sqlite = {
        "claim": {
            "p50": {1000: 2.0, 100000: 2.5},
            "ratio": 1.25,
            "memory_filled": {"VmRSS": 61.4, "VmHWM": 70.2},
            "memory_claimed": {"VmRSS": 62.0, "VmHWM": 70.2},
        },
        "group": {"first": {10: 1.0, 100000: 1.1}, "last": {10: 1.0, 100000: 3.0}, "ratio": 3.0},
        "dependents": {"all_pending_s": 0.75},
        "ready_fresh_ms": 500.0,
        "ready_existing_ms": 625.0,
    }
    table = scale_table.render_table({"sqlite": sqlite, "postgres": None}, args).splitlines()
    assert table[0].split() == ["sqlite", "postgres", "aim"]

    def row(start: str) -> list[str]:
        (line,) = [line for line in table if line.startswith(start)]
        return line[len(start) :].split()

    assert row("claimWork p50, 100,000 pending (ms)") == ["2.50", "skipped"]
    assert row("  claimWork ratio, largest / smallest backlog") == ["1.25", "skipped", "<=", "1.5"]
    assert row("listTaskGroup last page, group of 100,000 (ms)") == ["3.00", "skipped"]
    assert row("10,000 dependents all pending after completion (s)") == ["0.75", "skipped", "<=", "2.0"]
    assert row("server VmRSS, 100,000 pending, filled (MB)") == ["61", "skipped", "<=", "200"]
    assert row("serve ready, fresh database (ms)") == ["500", "skipped", "<=", "1000", "(SQLite)"]
    assert row("serve ready, existing database with 100,000 pending (ms)")[:2] == ["625", "skipped"]


def test_a_step_that_failed_shows_a_dash() -> None:
    args = options.parse_args(["--backends", "sqlite"])
    table = scale_table.render_table({"sqlite": {"ready_fresh_ms": 400.0}}, args)
    assert "claimWork p50, 1,000,000 pending (ms)" in table
    line = next(line for line in table.splitlines() if line.startswith("claimWork p50, 1,000 pending"))
    assert line.split()[-1] == "-"
