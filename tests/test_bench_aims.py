"""bench/aims.py without running a bench: the table of the six aims from a dict of figures, each row
met or not; bench/worker.py's figures read from its printed output; bench/lifecycle.py's queue
wait; and `make bench` ending with the table. Nothing here starts a server."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from bench import aims, budgets
from bench.lifecycle import queue_wait

ROOT = Path(__file__).parent.parent


def figures() -> dict[str, object]:
    """What the benches write with --json (JSON: every dict key a string), trimmed to the figures read."""
    lifecycle = {
        "options": {"workers": 8, "tasks": 2000, "backlog": 100000, "quick": False},
        "backends": {
            "sqlite": {
                "throughput": {
                    "lifecycles_per_s": 650.0,
                    "queue_wait": {"p50_s": 0.5, "excess_max_s": 0.25},
                    "cpu_ms_per_lifecycle": {"server": 1.25, "client": 0.5, "postgres": 0.0},
                },
                "dispatch": {"commit_p50": 3.0},
            },
            "postgres": {
                "throughput": {
                    "lifecycles_per_s": 420.0,
                    "queue_wait": {"p50_s": 0.75, "excess_max_s": 2.5},
                    "cpu_ms_per_lifecycle": {"server": 1.75, "client": 0.5, "postgres": 2.0},
                },
                "dispatch": {"commit_p50": 4.0},
            },
        },
    }
    spent = {"claimWork": {"sqlite": [7, 7], "postgres": [8, 7]}, "status": {"sqlite": [1, 1]}}
    budget = {
        "claimWork": {"sqlite": [7, 7], "postgres": [7, 7]},
        "status": {"sqlite": [1, 1], "postgres": [1, 1]},
        "reclaimTask": {"sqlite": [2, 2], "postgres": [2, 2]},
    }
    peers = {
        "systems": {
            "taskyard": {"jobs_per_s": 300.0},
            "taskyard-worker": {"jobs_per_s": 50.0},
            "procrastinate": {"jobs_per_s": 150.0},
            "procrastinate-single": {"jobs_per_s": 100.0},
            "celery-threads": {"jobs_per_s": 600.0},
        }
    }
    scale = {
        "options": {"sizes": [1000, 50000], "group_sizes": [10, 10000], "dependents": 1000, "quick": True},
        "backends": {
            "sqlite": {
                "claim": {
                    "p50": {"1000": 2.0, "50000": 2.5},
                    "ratio": 1.25,
                    "memory_filled": {"VmRSS": 60.0},
                },
                "group": {
                    "first": {"10": 1.0, "10000": 1.5},
                    "last": {"10": 1.0, "10000": 2.0},
                    "ratio": 2.0,
                },
                "dependents": {"all_pending_s": 0.5},
                "ready_fresh_ms": 1500.0,
            },
            "postgres": None,
        },
    }
    worker = {"overhead_p50_ms": 25.0, "overhead_p99_ms": 120.0, "tasks_per_s": 61.0}
    return {
        "lifecycle": lifecycle,
        "budgets": {"budgets": budget, "spent": spent, "passed": False},
        "peers": peers,
        "worker": worker,
        "scale": scale,
    }


def row(table: list[aims.Row], start: str) -> aims.Row:
    (found,) = [r for r in table if r.what.startswith(start)]
    return found


def test_each_aim_is_judged_on_every_backend_it_was_measured_on() -> None:
    table = aims.rows(figures())
    rate = row(table, "lifecycles/s")
    assert (rate.aim, rate.cells, rate.verdict) == ("1", ("650", "420"), aims.NOT_MET)  # PG < 500
    assert rate.target == "≥ 600 SQLite, ≥ 500 PG"
    assert row(table, "dispatch").verdict == aims.MET
    assert row(table, "queue wait under load").cells == ("0.25", "2.50")
    assert row(table, "queue wait under load").verdict == aims.NOT_MET
    cpu = row(table, "server CPU ms")
    assert (cpu.aim, cpu.cells, cpu.target, cpu.verdict) == ("3", ("1.25", "1.75"), "≤ 1.5", aims.NOT_MET)
    assert row(table, "  PostgreSQL CPU").cells == ("-", "2.00")
    assert row(table, "  load generator").verdict == ""  # shown, not judged


def test_the_budgets_are_judged_per_call_and_together() -> None:
    table = aims.rows(figures())
    assert row(table, "  claimWork").cells == ("7 / 7", "8 / 7")
    assert row(table, "  claimWork").verdict == aims.NOT_MET  # one statement over on PostgreSQL
    assert (row(table, "  status").cells, row(table, "  status").verdict) == (("1 / 1", "-"), aims.MET)
    assert row(table, "  reclaimTask").verdict == aims.UNMEASURED
    assert row(table, "statements").verdict == aims.NOT_MET
    assert "a call is off its budget" in " ".join(aims.notes(figures()))


def test_taskyard_must_be_ahead_of_every_procrastinate_and_each_peer_is_set_beside_both_rates() -> None:
    table = aims.rows(figures())
    assert row(table, "taskyard lifecycles/s").verdict == aims.MET  # 300 > 150 and 100
    assert row(table, "  procrastinate jobs/s").cells == "150 (0.50x, 3.00x)"
    assert row(table, "  celery-threads").cells == "600 (2.00x, 12.00x)"
    assert row(table, "  celery-prefork").cells == "-"
    slower = figures()
    slower["peers"]["systems"]["procrastinate-single"]["jobs_per_s"] = 350.0  # type: ignore[index]
    assert row(aims.rows(slower), "taskyard lifecycles/s").verdict == aims.NOT_MET


def test_the_worker_and_the_scale_rows_name_what_was_measured() -> None:
    table = aims.rows(figures())
    assert [r.verdict for r in table if r.aim == "5"] == [aims.MET, aims.NOT_MET, aims.MET]
    assert row(table, "worker overhead per task p50").cells == ("25.0", "-")
    assert row(table, "claimWork p50 at 50,000 pending").cells == ("2.50", "-")
    assert row(table, "claimWork p50 ratio, 50,000 / 1,000").verdict == aims.MET
    assert row(table, "listTaskGroup page at 10,000 tasks").cells == ("2.00", "-")  # the worse page
    assert row(table, "listTaskGroup page ratio").verdict == aims.NOT_MET
    assert row(table, "1,000 dependents all pending").verdict == aims.MET
    assert row(table, "server RSS with 50,000 pending").verdict == aims.MET
    ready = row(table, "`taskyard serve` ready")
    assert (ready.target, ready.verdict) == ("≤ 1000 SQLite", aims.NOT_MET)
    assert "smaller sizes than the aims'" in " ".join(aims.notes(figures()))


def test_without_figures_every_aim_is_not_measured_and_the_table_still_renders() -> None:
    table = aims.rows({})
    judged = {r.verdict for r in table if not r.what.startswith("  ")}
    assert judged == {aims.UNMEASURED}
    text = aims.render(table)
    assert text.splitlines()[0].split() == ["aim", "figure", "SQLite", "PostgreSQL", "target", "verdict"]
    assert [line.split()[0] for line in text.splitlines()[2:] if line] == [r.aim for r in table]


def test_the_rendered_table_puts_each_figure_under_its_backend() -> None:
    lines = aims.render(aims.rows(figures())).splitlines()
    head, line = lines[0], next(line for line in lines if "lifecycles/s, Hawk" in line)
    assert line.index("650") + 3 == head.index("SQLite") + len("SQLite")
    assert line.index("420") + 3 == head.index("PostgreSQL") + len("PostgreSQL")
    assert line.index("≥ 600 SQLite, ≥ 500 PG") == head.index("target")
    assert line.endswith("NOT MET")
    assert lines[1] == "-" * len(head)


def test_the_budget_figures_take_the_tests_columns() -> None:
    shaped = budgets.collected({"status": ((1, 1), (1, 2))}, {"status": {1: (1, 2)}})
    assert shaped == {
        "budgets": {"status": {"sqlite": [1, 1], "postgres": [1, 2]}},
        "spent": {"status": {"postgres": [1, 2]}},
    }


def test_queue_wait_beyond_the_backlog_is_how_much_later_than_its_turn_a_task_was_claimed() -> None:
    # Four tasks answered at 0, 1, 2, 3 s. The queue drains slowly: claims at 10, 11, 12, and the
    # third task is passed over until 20.
    answered = {"a": 0.0, "b": 1.0, "c": 2.0, "d": 3.0}
    claimed = {"a": 10.0, "b": 11.0, "c": 20.0, "d": 12.0}
    wait = queue_wait(answered, claimed)
    assert wait is not None
    assert wait["max_s"] == 18.0
    assert wait["excess_max_s"] == 8.0  # its turn was the third claim, at 12
    fair = queue_wait(answered, {"a": 10.0, "b": 11.0, "c": 12.0, "d": 13.0})
    assert fair is not None and fair["excess_max_s"] == 0.0
    assert queue_wait(answered, {}) is None


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_bench_runs_every_bench_with_json_into_one_directory_then_the_table() -> None:
    def commands(*variables: str) -> str:
        done = subprocess.run(
            ["make", "-n", "-B", "-C", str(ROOT), "bench", *variables],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return done.stdout

    run = commands()
    for name in ("budgets", "lifecycle", "worker", "scale", "peers"):
        assert re.search(rf"bench/{name}\.py +(--quick +)?--json \$out/{name}\.json", run), name
    lines = [line for line in run.splitlines() if not line.startswith("make")]
    assert lines[-1].endswith("bench/aims.py $out")
    assert "bench/scale.py --quick" in run and "bench/lifecycle.py --quick" not in run
    quick = commands("QUICK=1", "SCALE=full")
    assert "bench/lifecycle.py --quick" in quick and "bench/scale.py  --json" in quick
