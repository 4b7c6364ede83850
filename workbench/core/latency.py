"""Timing discipline shared by every stage: warm up, repeat, report medians."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence


@dataclass(frozen=True)
class LatencyStats:
    median_ms: float
    p90_ms: float
    mean_ms: float
    min_ms: float
    repeats: int
    warmup: int
    samples_ms: list[float] = field(default_factory=list)

    def quantile_ms(self, q: float) -> float:
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
        return self.p75_ms - self.p25_ms


def quantile(samples, q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default method)."""
    import numpy as np

    if not len(samples) or not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1] with at least one sample, got q={q} and {len(samples)} samples")
    return float(np.quantile(samples, q))


def summarize(samples_ms, warmup: int = 0) -> LatencyStats:
    samples = [float(x) for x in samples_ms]
    if not samples:
        raise ValueError("summarize needs at least one timed run")
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return LatencyStats(median_ms=statistics.median(samples), p90_ms=p90, mean_ms=statistics.fmean(samples),
                        min_ms=ordered[0], repeats=len(samples), warmup=warmup, samples_ms=samples)


def measure(fn: Callable[[], object], warmup: int = 3, repeats: int = 20, max_seconds: float | None = None,
            min_repeats: int = 3) -> LatencyStats:
    """``max_seconds`` stops early (after ``min_repeats``) so a slow variant cannot hold a notebook hostage."""
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
        if max_seconds is not None and i + 1 >= min_repeats and time.perf_counter() - start > max_seconds:
            break
    return summarize(samples, warmup)


# ---- interleaved, paired timing --------------------------------------------------------------
def interleaved(fns: Mapping[str, Callable[[], object]], rounds: int = 10, repeats: int = 3, warmup: int = 3,
                max_seconds: Optional[float] = None, order: Optional[list] = None,
                runs: Optional[dict] = None) -> dict[str, LatencyStats]:
    """Variants in rotating rounds in one process, so load that comes and goes hits them alike (pyperf's
    discipline). ``samples_ms[i]`` is round ``i``'s median: the pairs :func:`paired_ratio` needs."""
    names = list(fns)
    if not names:
        raise ValueError("interleaved needs at least one variant to time")
    if rounds < 1 or repeats < 1:
        raise ValueError(f"rounds and repeats must be at least 1, got rounds={rounds}, repeats={repeats}")
    for _ in range(max(0, warmup)):
        for name in names:
            fns[name]()
    per_round: dict[str, list[float]] = {n: [] for n in names}
    start = time.perf_counter()
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            fn, times = fns[name], []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1000.0)
                if runs is not None:
                    runs.setdefault(name, []).append(times[-1])
                if order is not None:
                    order.append(name)
            per_round[name].append(statistics.median(times))
        if max_seconds is not None and r >= 2 and time.perf_counter() - start > max_seconds:
            break
    return {n: summarize(per_round[n], warmup) for n in names}


@dataclass(frozen=True)
class Ratio:
    """How many times faster a variant ran than a base, over paired rounds, with its spread."""

    value: float  # median over rounds of base_i / variant_i (>1: the variant is faster)
    lo: float  # bootstrap interval over the paired rounds
    hi: float
    rounds: int
    level: float = 0.95

    def text(self) -> str:
        return f"{self.value:.2f}x ({self.lo:.2f}-{self.hi:.2f})"

    @property
    def is_gain(self) -> bool:
        """Faster beyond doubt at this level: the whole interval is above 1.0."""
        return self.lo > 1.0

    @property
    def is_loss(self) -> bool:
        return self.hi < 1.0


def paired_ratio(base_ms: Sequence[float], variant_ms: Sequence[float], n_boot: int = 2000, seed: int = 0,
                 level: float = 0.95) -> Ratio:
    """The median per-round ratio, with a percentile bootstrap interval over the rounds."""
    import numpy as np

    base, var = np.asarray(base_ms, dtype=float), np.asarray(variant_ms, dtype=float)
    if base.shape != var.shape or base.ndim != 1:
        raise ValueError(f"paired_ratio needs two equally long lists of per-round times, got {base.shape} and {var.shape}")
    if len(base) < 2:
        raise ValueError(f"paired_ratio needs at least 2 paired rounds, got {len(base)}")
    if (base <= 0).any() or (var <= 0).any() or not (np.isfinite(base).all() and np.isfinite(var).all()):
        raise ValueError("paired_ratio needs positive, finite times")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    ratios = base / var
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(ratios), size=(int(n_boot), len(ratios)))
    boots = np.median(ratios[idx], axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(boots, [alpha, 1.0 - alpha])
    return Ratio(value=float(np.median(ratios)), lo=float(lo), hi=float(hi), rounds=len(ratios), level=level)
