"""The scale bench's options: the aims' sizes by default, smaller ones with --quick."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

FULL: dict[str, Any] = {
    "sizes": "1000,100000,1000000",
    "group_sizes": "10,10000,100000",
    "dependents": 10_000,
}
QUICK: dict[str, Any] = {"sizes": "1000,10000,50000", "group_sizes": "10,1000,10000", "dependents": 1000}


def sizes(text: str) -> list[int]:
    try:
        values = sorted({int(v.replace("_", "")) for v in text.split(",") if v.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected whole numbers separated by commas, got {text!r}"
        ) from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"expected sizes of at least 1, got {text!r}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="How taskyard's costs grow with the size of its data.")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a fast sanity run: backlogs {QUICK['sizes']}, groups {QUICK['group_sizes']},"
        f" {QUICK['dependents']} dependents",
    )
    p.add_argument("--sizes", type=sizes, default=None, help=f"claimWork backlogs (default {FULL['sizes']})")
    p.add_argument(
        "--group-sizes", type=sizes, default=None, help=f"task group sizes (default {FULL['group_sizes']})"
    )
    p.add_argument(
        "--dependents",
        type=int,
        default=None,
        help=f"dependents of the one task (default {FULL['dependents']:,})",
    )
    p.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    p.add_argument("--skip", default="", help="comma-separated steps to leave out: dependents, group, claim")
    p.add_argument(
        "--claim-samples", type=int, default=200, help="timed claimWork calls per backlog (default 200)"
    )
    p.add_argument(
        "--page-samples", type=int, default=20, help="timed listTaskGroup calls per page (default 20)"
    )
    p.add_argument(
        "--page-size", type=int, default=10, help="listTaskGroup limit: tasks per page (default 10)"
    )
    p.add_argument(
        "--http-tasks",
        type=int,
        default=1000,
        help="backlog tasks created over HTTP before SQL copies (default 1000)",
    )
    p.add_argument(
        "--create-inflight", type=int, default=16, help="createTask requests in flight (default 16)"
    )
    p.add_argument(
        "--json", type=Path, default=None, help="also write the figures to this file (bench/aims.py)"
    )
    args = p.parse_args(argv)
    preset = QUICK if args.quick else FULL
    args.sizes = args.sizes or sizes(str(preset["sizes"]))
    args.group_sizes = args.group_sizes or sizes(str(preset["group_sizes"]))
    args.dependents = args.dependents or int(preset["dependents"])
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    args.skip = {s for s in args.skip.split(",") if s}
    if unknown := [b for b in args.backends if b not in ("sqlite", "postgres")]:
        p.error(f"--backends: unknown {unknown}; choose from sqlite, postgres")
    if unknown := args.skip - {"dependents", "group", "claim"}:
        p.error(f"--skip: unknown {sorted(unknown)}; choose from dependents, group, claim")
    if args.sizes[0] < args.claim_samples + 20:
        p.error(f"--sizes: the smallest backlog must exceed --claim-samples ({args.claim_samples}) by 20")
    return args
