"""Metrics that carry their unit and direction, so a view colours better and worse without special cases."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    unit: str  # "ms", "samples/s", "MiB", "s", "", "%"
    higher_is_better: bool

    def ratio_to(self, baseline: "Metric") -> float:
        """How many times better than ``baseline`` (>1 is better, whatever the direction)."""
        if baseline.value == 0 or self.value == 0:
            return float("nan")
        r = self.value / baseline.value
        return r if self.higher_is_better else 1.0 / r
