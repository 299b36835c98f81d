"""How taskyard's costs grow with the size of its data, against a real `taskyard serve` process.

For each backend (SQLite in a temporary data directory, PostgreSQL in a scratch database) it starts
the server as a subprocess and drives it over HTTP with Hawk-signed requests (bench/lifecycle.py's
clients and helpers). Five measurements, each beside its aim:

1. claimWork      p50 of sequential claimWork(tasks=1) at each backlog of --sizes (1k, 100k, 1M
                  pending tasks in one task queue); aim: the largest within 1.5x of the smallest.
2. listTaskGroup  p50 of one page (--page-size tasks) at the start of groups of --group-sizes
                  tasks (10, 10k, 100k), and deep in them (from the continuationToken of the
                  group's last page of 1,000, found by paging through it); aim: flat.
3. dependents     a task with --dependents (10,000) dependents completes: the delay from its
                  reportCompleted until every dependent is pending; aim: <= 2 s.
4. memory         the server's VmRSS and VmHWM (/proc) once the largest backlog is filled, and after
                  its claims; aim: RSS <= 200 MB.
5. ready          from spawning `taskyard serve` to its first answered ping, on a fresh database
                  and again on the one holding the largest backlog; aim (SQLite): <= 1 s.

The smallest backlog and the groups' first ten tasks are created over HTTP; the rest are copies of
such a task written in SQL (its tasks, pending_runs and poll_messages rows, under new ids), as
createTask writes them. The dependents are created over HTTP. Printed, never asserted; see
bench/README.md. Run: .venv/bin/python bench/scale.py [--quick] [--json PATH]

The parts live in bench/scaling/: server.py (the timed server, its memory), database.py (the SQL
copies), steps.py (the measurements), table.py (the table and the aims), options.py.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
if str(ROOT) not in sys.path:  # run as a script: `bench.lifecycle` is imported from the checkout
    sys.path.insert(0, str(ROOT))

from bench import lifecycle as lc  # noqa: E402
from bench.lifecycle import now  # noqa: E402
from bench.scaling.database import STOP  # noqa: E402
from bench.scaling.options import parse_args  # noqa: E402
from bench.scaling.steps import run_backend  # noqa: E402
from bench.scaling.table import render_table  # noqa: E402


async def main_async(args: argparse.Namespace) -> None:
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"taskyard scale bench ({'quick' if args.quick else 'full'}); {lc.CPUS} CPUs, load average {load}")
    started = now()
    all_results = {name: await run_backend(name, args) for name in args.backends}
    print("\n" + render_table(all_results, args))
    print(f"\n(total {now() - started:.0f} s; this machine's timings, printed, never asserted)")
    if args.json:
        measured = {"sizes": args.sizes, "group_sizes": args.group_sizes, "dependents": args.dependents}
        lc.save_json(args.json, {"options": {**measured, "quick": args.quick}, "backends": all_results})


def _interrupt(signum: int, frame: object) -> None:
    STOP.set()
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # like Ctrl-C: servers stopped, scratch databases dropped
    try:
        asyncio.run(main_async(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        STOP.set()
        lc.kill_leftovers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
