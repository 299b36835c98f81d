"""Counters a process keeps about itself, for a metrics endpoint to read.

    metrics = Counters()
    metrics.inc("resolver_rows_set_aside_total", resolver="dependency-resolver")
    metrics.value("resolver_rows_set_aside_total", resolver="dependency-resolver")  # 1

A counter is a name and a set of labels; it only goes up, and starts at zero in every process.
"""

from __future__ import annotations

from dataclasses import dataclass

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: int


class Counters:
    """Named counters with labels, in memory."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, Labels], int] = {}

    def inc(self, name: str, by: int = 1, **labels: str) -> None:
        if by < 0:
            raise ValueError(f"counter {name} only goes up")
        key = (name, tuple(sorted(labels.items())))
        self._values[key] = self._values.get(key, 0) + by

    def value(self, name: str, **labels: str) -> int:
        return self._values.get((name, tuple(sorted(labels.items()))), 0)

    def samples(self) -> list[Sample]:
        """Every counter that has been incremented, sorted by name and labels."""
        return [Sample(name, dict(labels), value) for (name, labels), value in sorted(self._values.items())]
