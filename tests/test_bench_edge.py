"""bench/edge.py against a real `taskyard serve`, at a tiny size: both kinds are answered and
measured (the figures themselves are never asserted)."""

from __future__ import annotations

import argparse

from bench import edge


async def test_both_kinds_are_measured() -> None:
    args = argparse.Namespace(requests=64, connections=4, rounds=1, taskyard=None, json=None)
    figures = await edge.run(args)
    assert set(figures) == {"ping", "signed"}
    for kind in figures.values():
        assert kind["per_s"] > 0 and kind["cpu_us"] >= 0 and 0 <= kind["kernel_share"] <= 1
