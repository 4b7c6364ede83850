"""Timing discipline shared by every stage: warm up, repeat, report medians.

A test never asserts on these numbers; benchmarks and reports print them.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class LatencyStats:
    median_ms: float
    p90_ms: float
    mean_ms: float
    min_ms: float
    repeats: int
    warmup: int
    samples_ms: list[float] = field(default_factory=list)

    @property
    def unit(self) -> str:
        return "ms"


def measure(fn: Callable[[], object], warmup: int = 3, repeats: int = 20, max_seconds: float | None = None) -> LatencyStats:
    """Call ``fn`` ``warmup`` times untimed, then up to ``repeats`` times timed.

    ``max_seconds`` stops the timed loop early (after at least 3 repeats) so a slow variant
    cannot hold a notebook hostage; the number actually taken is reported.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    for _ in range(max(0, warmup)):
        fn()
    samples: list[float] = []
    start = time.perf_counter()
    for i in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000.0)
        if max_seconds is not None and i >= 2 and time.perf_counter() - start > max_seconds:
            break
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return LatencyStats(
        median_ms=statistics.median(samples),
        p90_ms=p90,
        mean_ms=statistics.fmean(samples),
        min_ms=ordered[0],
        repeats=len(samples),
        warmup=warmup,
        samples_ms=samples,
    )
