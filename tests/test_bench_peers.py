"""bench/peers.py without its peers: its options, the table it ends with, how it reads bench/worker.py,
and `make bench` running it. Nothing here installs a peer or starts a server."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from bench import peers

ROOT = Path(__file__).parent.parent


def test_by_default_every_system_runs_twice_on_2000_jobs_taskyard_first() -> None:
    args = peers.parse_args([])
    assert (args.jobs, args.rounds, args.worker_tasks) == (2000, 2, 500)
    assert args.systems == list(peers.SYSTEMS)
    assert args.systems[0] == peers.BASELINE
    assert args.venv == ROOT / "bench" / ".peers-venv"


def test_quick_is_one_small_round_and_explicit_figures_win() -> None:
    quick = peers.parse_args(["--quick"])
    assert (quick.jobs, quick.rounds, quick.worker_tasks) == (400, 1, 100)
    chosen = peers.parse_args(["--quick", "--jobs", "50", "--systems", "celery-threads, taskyard"])
    assert chosen.jobs == 50
    assert chosen.systems == ["celery-threads", "taskyard"]


@pytest.mark.parametrize("argv", [["--systems", "dramatiq"], ["--systems", ","], ["--jobs", "-1"]])
def test_a_bad_option_is_refused_with_a_message(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        peers.parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--systems" in err or "--jobs" in err


def cells(text: str, name: str) -> list[str]:
    """The cells after a system's label: jobs/s, ratio, enqueue/s, worker/s, CPU ms/job, rounds."""
    label = peers.SYSTEMS[name].label
    line = next(line for line in text.splitlines() if line.startswith(label))
    return line.removeprefix(label).split(maxsplit=5)


def test_the_table_gives_medians_and_ratios_to_taskyards_lifecycle_rate() -> None:
    figures = {name: peers.Figures() for name in ("taskyard", "procrastinate", "celery-prefork")}
    for rate in (300.0, 340.0, 320.0):
        figures["taskyard"].add({"jobs_per_s": rate, "enqueue_per_s": None})
    cpu = {"sender": 1.0, "worker": 2.5, "postgres": 1.75}
    figures["procrastinate"].add(
        {"jobs_per_s": 160.0, "enqueue_per_s": 4000.0, "worker_per_s": 200.0, "cpu_ms_per_job": cpu}
    )
    figures["celery-prefork"].notes.append("round 1 failed")

    text = peers.table(figures, ["taskyard", "procrastinate", "celery-prefork", "celery-threads"])

    head = text.splitlines()[0]
    assert head.split() == ["system", "jobs/s", "ratio", "enqueue/s", "worker/s", "CPU", "ms/job", "rounds"]
    assert cells(text, "taskyard") == ["320", "1.00", "-", "-", "-", "300, 340, 320"]
    assert cells(text, "procrastinate") == ["160", "0.50", "4000", "200", "5.2", "160"]
    assert cells(text, "celery-prefork") == ["-", "-", "-", "-", "-", "round 1 failed"]
    assert cells(text, "celery-threads") == ["-", "-", "-", "-", "-", "not run"]


def test_without_a_taskyard_figure_there_is_no_ratio() -> None:
    figures = {"procrastinate": peers.Figures()}
    figures["procrastinate"].add({"jobs_per_s": 160.0})
    assert cells(peers.table(figures, ["procrastinate"]), "procrastinate")[:2] == ["160", "-"]


def test_the_worker_benchs_rate_and_cpu_are_read_from_its_table() -> None:
    output = "\n                                               p50      p99      max\n"
    output += f"{'tasks/s (498/500 completed)':<42}{36.21:>9.1f}\n{'claim to report, ms':<42}{58.0:>9.1f}\n"
    output += f"{'server CPU ms per task':<42}{20.04:>9.1f}\n{'worker CPU ms per task':<42}{12.2:>9.1f}\n"
    output += f"{'  its `true` commands, CPU ms per task':<42}{1.0:>9.1f}\n"
    assert peers.parse_worker_rate(output) == pytest.approx(36.2)
    assert peers.parse_worker_cpu(output) == {"server": 20.0, "worker": 12.2, "its `true` commands": 1.0}
    assert peers.parse_worker_rate("taskyard up did not start") is None
    assert peers.parse_worker_cpu("taskyard up did not start") == {}


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_bench_runs_the_peers_after_taskyards_own_benches_and_before_the_aims_table() -> None:
    done = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), "bench"], capture_output=True, text=True, check=True, timeout=30
    )
    commands = done.stdout
    assert (
        commands.index("bench/lifecycle.py")
        < commands.index("bench/worker.py")
        < commands.index("bench/peers.py")
        < commands.index("bench/aims.py")
    )
