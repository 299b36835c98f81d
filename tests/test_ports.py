"""Test servers' ports: each xdist worker draws from its own slice below the ephemeral ports, so a
port one worker's restart frees is never handed to another worker's new server meanwhile."""

from __future__ import annotations

import itertools

import pytest

from tests import ports


def test_the_workers_slices_part_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    slices = []
    for index in range(4):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        slices.append(ports._slice(10_000, 32_768))
    assert slices[0][0] == 10_000 and slices[-1][1] <= 32_768
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(slices))
    low, high = slices[2]
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    assert all(low <= ports.free_port() < high for _ in range(50))
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert ports._slice(10_000, 32_768) == (10_000, 32_768)
