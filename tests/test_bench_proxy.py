"""bench/proxy.py against a real `taskyard serve`, at a tiny size: both kinds are answered (the
proxy signs with the credentials it is given) and measured; the figures are never asserted."""

from __future__ import annotations

import argparse

from bench import proxy


async def test_both_kinds_are_measured() -> None:
    figures = await proxy.run(argparse.Namespace(calls=20, rounds=1, json=None))
    assert set(figures) == {"direct", "proxied"}
    for kind in figures.values():
        assert 0 < kind["p50_ms"] <= kind["p90_ms"]
