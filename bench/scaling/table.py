"""The table the scale bench ends with: each figure beside its aim."""

from __future__ import annotations

import argparse
from typing import Any

AIMS = {
    "claim_ratio": 1.5,  # largest backlog's p50 / smallest's
    "group_ratio": 1.5,  # a page's p50 in the largest group / in the smallest ("flat")
    "dependents_s": 2.0,
    "rss_mb": 200.0,
    "ready_s": 1.0,  # SQLite
}


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


Row = tuple[str, tuple[Any, ...], str, str]  # label, path into a backend's results, format, aim


def dig(results: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        results = results.get(key) if isinstance(results, dict) else None
    return results


def table_rows(args: argparse.Namespace) -> list[Row]:
    big = f"{args.sizes[-1]:,}"
    rows: list[Row] = [
        (f"claimWork p50, {n:,} pending (ms)", ("claim", "p50", n), ".2f", "") for n in args.sizes
    ]
    rows.append(
        (
            "  claimWork ratio, largest / smallest backlog",
            ("claim", "ratio"),
            ".2f",
            f"<= {AIMS['claim_ratio']}",
        )
    )
    rows += [
        (f"listTaskGroup {where} page, group of {n:,} (ms)", ("group", where, n), ".2f", "")
        for where in ("first", "last")
        for n in args.group_sizes
    ]
    rows.append(
        (
            "  listTaskGroup ratio, largest / smallest group (worse page)",
            ("group", "ratio"),
            ".2f",
            "flat, <= 1.5",
        )
    )
    deps = f"{args.dependents:,} dependents all pending after completion (s)"
    rows.append((deps, ("dependents", "all_pending_s"), ".2f", f"<= {AIMS['dependents_s']}"))
    for moment, key in (("filled", "memory_filled"), ("after claims", "memory_claimed")):
        rows.append(
            (
                f"server VmRSS, {big} pending, {moment} (MB)",
                ("claim", key, "VmRSS"),
                ".0f",
                f"<= {AIMS['rss_mb']:.0f}",
            )
        )
        rows.append((f"server VmHWM, {big} pending, {moment} (MB)", ("claim", key, "VmHWM"), ".0f", ""))
    for which, label in (("fresh", "fresh database"), ("existing", f"existing database with {big} pending")):
        rows.append(
            (
                f"serve ready, {label} (ms)",
                (f"ready_{which}_ms",),
                ".0f",
                f"<= {AIMS['ready_s'] * 1000:.0f} (SQLite)",
            )
        )
        rows.append(("  the server's CPU until then (ms)", (f"ready_{which}_cpu_ms",), ".0f", ""))
    return rows


def render_table(all_results: dict[str, dict[str, Any] | None], args: argparse.Namespace) -> str:
    backends = list(all_results)
    rows = table_rows(args)
    width = max(len(label) for label, _, _, _ in rows) + 2
    lines = ["".join([f"{'':<{width}}", *(f"{b:>12}" for b in backends), "   aim"])]
    for label, path, spec, aim in rows:
        cells = [
            fmt(dig(all_results[b], path), spec) if all_results[b] is not None else "skipped"
            for b in backends
        ]
        lines.append("".join([f"{label:<{width}}", *(f"{c:>12}" for c in cells), f"   {aim}"]))
    return "\n".join(lines)
