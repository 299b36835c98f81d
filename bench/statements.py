"""Where PostgreSQL's time goes in a lifecycle: each statement's calls, execution, planning and
WAL per task lifecycle, from PostgreSQL's own accounting.

It makes a private PostgreSQL cluster (as the tests' `PgCluster` does, but durable like a real
one) with `pg_stat_statements` loaded and planning tracked, runs bench/lifecycle.py's throughput
phase against it, and prints the statements that cost most, each named by its query in
`storage/sql/` where it can be told. A deferred write shows as its `PREPARE ty_<query>` (its
`EXECUTE`s are counted there).

Run: .venv/bin/python bench/statements.py [--tasks 3000] [--top 20] [--taskyard CMD] [--shape S] [--json FILE]
     .venv/bin/python bench/statements.py --compare OLD.json NEW.json [...]
`--json` keeps a run's statements per lifecycle; `--compare` prints runs' calls side by side (two
checkouts', `--taskyard`), each statement's calls per lifecycle, plans and WAL bytes: counts, not
timings, so they compare across a noisy machine.
Figures are this machine's, printed, never asserted; see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the test suite's cluster helper is imported from tests/
    sys.path.insert(0, str(ROOT))

from tests.pgcluster import PgCluster  # noqa: E402
from tests.pgcluster import unavailable_reason as pg_unavailable  # noqa: E402

from taskyard.storage import _queries  # noqa: E402

SETTINGS = {  # durable, as a real server is; the private cluster's defaults skip the flushes
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "shared_buffers": "128MB",
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.track_planning": "on",
}
STATS = """
SELECT query, calls, plans, total_exec_time AS exec_ms, total_plan_time AS plan_ms, wal_bytes
  FROM pg_stat_statements
 WHERE query !~* '^(CREATE|DROP) DATABASE' AND query !~* 'pg_stat_statements'
"""


def label(query: str, names: dict[str, str]) -> str:
    """The statement's query name in storage/sql/, else its start; a NOTIFY by its channel (its
    payload is a literal, so each payload is a statement of its own to `pg_stat_statements`)."""
    prepared = re.match(r"PREPARE (ty_[a-z0-9_]+) AS", query)
    if prepared:
        return f"{prepared[1][3:]} (deferred)"
    notify = re.match(r"NOTIFY ([a-z0-9_]+)", query)
    if notify:
        return f"NOTIFY {notify[1]}"
    text = " ".join(query.split())
    return names.get(text) or names.get(query.strip().splitlines()[0]) or text[:60]


def query_names() -> dict[str, str]:
    """Our queries by their text (whitespace folded) and by their first line, where that is a
    comment: `pg_stat_statements` shows a query's constants as parameters, so the whole text may
    not match."""
    found = {}
    for name, sql in _queries.load("postgres").items():
        found[" ".join(sql.split())] = name
        first = sql.strip().splitlines()[0]
        if first.startswith("--"):
            found.setdefault(first, name)
    return found


def by_label(rows: list[Any], names: dict[str, str]) -> list[dict[str, Any]]:
    """The rows summed by statement label, schema changes (the migrations) left out."""
    found: dict[str, dict[str, Any]] = {}
    for r in rows:
        if re.match(r"\s*(CREATE|ALTER|COMMENT|INSERT INTO schema_migrations)", r["query"]):
            continue
        name = label(r["query"], names)
        into = found.setdefault(
            name, {"query": name, "calls": 0, "plans": 0, "exec_ms": 0.0, "plan_ms": 0.0, "wal_bytes": 0}
        )
        for key in ("calls", "plans", "exec_ms", "plan_ms", "wal_bytes"):
            into[key] += r[key]
    return list(found.values())


def per_lifecycle(rows: list[Any], lifecycles: int) -> dict[str, dict[str, float]]:
    """{statement: {calls, plans, exec_us, plan_us, wal_bytes}} per lifecycle, for --json."""
    per = float(lifecycles)
    return {
        r["query"]: {
            "calls": r["calls"] / per,
            "plans": r["plans"] / per,
            "exec_us": r["exec_ms"] * 1000 / per,
            "plan_us": r["plan_ms"] * 1000 / per,
            "wal_bytes": int(r["wal_bytes"]) / per,
        }
        for r in rows
    }


def compare(runs: list[tuple[str, dict[str, dict[str, float]]]]) -> None:
    """Runs' statements side by side: calls per lifecycle (plans, WAL bytes), the ones that differ."""
    names = sorted(
        {n for _, run in runs for n in run},
        key=lambda n: -max(run.get(n, {}).get("calls", 0.0) for _, run in runs),
    )
    header = f"{'statement':<40}" + "".join(f"{title[-24:]:>26}" for title, _ in runs)
    print(header + "\n" + "-" * len(header))
    totals = [[0.0, 0.0, 0.0] for _ in runs]
    for name in names:
        cells = [run.get(name, {}) for _, run in runs]
        values = [(c.get("calls", 0.0), c.get("plans", 0.0), c.get("wal_bytes", 0.0)) for c in cells]
        for total, value in zip(totals, values, strict=True):
            for i in range(3):
                total[i] += value[i]
        first = values[0]
        if all(
            abs(v[0] - first[0]) < 0.02 and abs(v[1] - first[1]) < 0.03 and abs(v[2] - first[2]) < 40
            for v in values
        ):
            continue  # the same in every run (within the runs' own spread)
        print(f"{name[:40]:<40}" + "".join(f"{c:>9.2f} {p:>6.2f}p {w:>6.0f}B" for c, p, w in values))
    print(f"{'all statements':<40}" + "".join(f"{c:>9.2f} {p:>6.2f}p {w:>6.0f}B" for c, p, w in totals))
    print("\n(calls, plans and WAL bytes per lifecycle; statements the same in every run are left out)")


def report(rows: list[Any], lifecycles: int, top: int) -> None:
    names = query_names()
    rows = by_label(rows, names)
    per = float(lifecycles)
    totals = {
        "statements": sum(r["calls"] for r in rows) / per,
        "exec_us": sum(r["exec_ms"] for r in rows) * 1000 / per,
        "plan_us": sum(r["plan_ms"] for r in rows) * 1000 / per,
        "plans": sum(r["plans"] for r in rows) / per,
        "wal_bytes": sum(int(r["wal_bytes"]) for r in rows) / per,
    }
    print(f"\nper lifecycle ({lifecycles} lifecycles): {totals['statements']:.1f} statements, "
          f"{totals['exec_us']:.0f} µs executing, {totals['plan_us']:.0f} µs planning "
          f"({totals['plans']:.1f} plans), {totals['wal_bytes'] / 1024:.1f} KiB of WAL")  # fmt: skip
    print("(PostgreSQL's CPU beyond these goes on parsing, messages, commits and its own processes)\n")
    header = f"{'statement':<44} {'calls':>6} {'exec µs':>8} {'plan µs':>8} {'plans/call':>10} {'WAL B':>7}"
    print(header)
    print("-" * len(header))
    ranked = sorted(rows, key=lambda r: r["exec_ms"] + r["plan_ms"], reverse=True)
    for r in ranked[:top]:
        calls = r["calls"] or 1
        print(
            f"{r['query'][:44]:<44} {r['calls'] / per:>6.2f} {r['exec_ms'] * 1000 / per:>8.1f} "
            f"{r['plan_ms'] * 1000 / per:>8.1f} {r['plans'] / calls:>10.2f} {int(r['wal_bytes']) / per:>7.0f}"
        )
    print("\n(calls, µs and WAL bytes per lifecycle; plans/call: 1 means planned afresh every time)")


async def stats(url: str, reset: bool) -> list[Any]:
    conn = await asyncpg.connect(url)
    try:
        if reset:
            await conn.execute("SELECT pg_stat_statements_reset()")
            return []
        return list(await conn.fetch(STATS))
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=3000, help="lifecycles to run (default 3000)")
    p.add_argument("--top", type=int, default=20, help="statements to print (default 20)")
    p.add_argument(
        "--taskyard", default=None, help="command that runs taskyard, as bench/lifecycle.py takes it"
    )
    p.add_argument(
        "--shape", default="backlog", help="bench/lifecycle.py's throughput load: backlog or waiting"
    )
    p.add_argument("--json", default=None, help="also write the statements per lifecycle to FILE")
    p.add_argument("--compare", nargs="+", metavar="JSON", help="print runs' --json files side by side")
    args = p.parse_args(argv)
    if args.compare:
        runs = [(Path(path).stem, json.loads(Path(path).read_text())["statements"]) for path in args.compare]
        compare(runs)
        return 0
    reason = pg_unavailable()
    if reason is not None:
        print(f"statements: {reason}; nothing measured")
        return 1
    with PgCluster.create(settings=SETTINGS) as cluster:
        url = cluster.url()
        asyncio.run(_extension(url))
        asyncio.run(stats(url, reset=True))
        skip = "claim,auth,poll,poll-dispatch,dispatch"
        command = [sys.executable, str(ROOT / "bench" / "lifecycle.py"), "--backends", "postgres",
                   "--skip", skip, "--tasks", str(args.tasks), "--shape", args.shape]  # fmt: skip
        if args.taskyard:
            command += ["--taskyard", args.taskyard]
        env = {**os.environ, "TASKYARD_BENCH_POSTGRES": url}
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        lines = [line for line in done.stdout.splitlines() if "completed in" in line or "CPU ms per" in line]
        print("\n".join(lines[:2]) if lines else done.stdout[-2000:] + done.stderr[-2000:])
        if done.returncode != 0:
            return done.returncode
        rows = asyncio.run(stats(url, reset=False))
        report(rows, args.tasks, args.top)
        if args.json:
            found = per_lifecycle(by_label(rows, query_names()), args.tasks)
            Path(args.json).write_text(json.dumps({"lifecycles": args.tasks, "statements": found}, indent=1))
    return 0


async def _extension(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    finally:
        await conn.close()


if __name__ == "__main__":
    sys.exit(main())
