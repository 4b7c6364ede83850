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

    def quantile_ms(self, q: float) -> float:
        """The ``q`` quantile (0..1) of the timed runs, linearly interpolated (the median at 0.5)."""
        return quantile(self.samples_ms, q) if self.samples_ms else self.median_ms

    @property
    def p10_ms(self) -> float:
        return self.quantile_ms(0.10)

    @property
    def p25_ms(self) -> float:
        return self.quantile_ms(0.25)

    @property
    def p75_ms(self) -> float:
        return self.quantile_ms(0.75)

    @property
    def iqr_ms(self) -> float:
        """Interquartile range: the spread of the middle half of the runs."""
        return self.p75_ms - self.p25_ms


def quantile(samples, q: float) -> float:
    """Linearly interpolated quantile ``q`` in [0, 1] of a non-empty sequence."""
    if not samples:
        raise ValueError("quantile of no samples")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q}")
    ordered = sorted(samples)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(samples_ms, warmup: int = 0) -> LatencyStats:
    """Statistics of timed runs collected elsewhere (e.g. several interleaved rounds of :func:`measure`)."""
    samples = [float(x) for x in samples_ms]
    if not samples:
        raise ValueError("summarize needs at least one timed run")
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return LatencyStats(median_ms=statistics.median(samples), p90_ms=p90, mean_ms=statistics.fmean(samples),
                        min_ms=ordered[0], repeats=len(samples), warmup=warmup, samples_ms=samples)


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
    return summarize(samples, warmup)
