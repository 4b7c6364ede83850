"""One row per quantized variant: the CLI's ``--json``, the report and the panel read it, so their figures cannot drift apart."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .run import QuantResult


@dataclass(frozen=True)
class VariantRow:
    """One quantized variant's figures (fractions for accuracy, ms, MiB; None where not measured)."""

    name: str
    mode: str
    graph_kind: str  # which FP32 graph was quantized: exported or fused
    validation_passed: bool
    accuracy: float
    fp32_accuracy: float
    accuracy_delta: float  # candidate - FP32, overall
    max_slice_drop: float  # the largest accuracy drop on a slice big enough to judge (0: none dropped)
    worst_slice: Optional[str]  # where that drop is (None when no judged slice dropped)
    n_flips: int
    latency_ms: float
    fp32_latency_ms: float
    speedup: float  # FP32 latency / quantized latency, first timing shape (median of paired rounds)
    speedup_ci: Optional[tuple[float, float]]  # its 95% interval (None in results saved before interleaved timing)
    floor_ms: Optional[float]  # the quantized graph's floor: its multiply-adds at this CPU's measured throughput
    of_floor: Optional[float]  # floor / latency (1.0: as fast as the machine allows)
    fp32_floor_ms: Optional[float]
    fp32_of_floor: Optional[float]
    contended: bool  # the speed figures were taken while other work used the CPU: not a measured fact
    size_mib: float
    fp32_size_mib: float
    nodes_kept_fp32: int  # nodes left in FP32 (nodes_to_exclude and exclude_worst's choice)

    @property
    def speedup_is_gain(self) -> Optional[bool]:
        """True when the whole interval is above 1, False when below, None when it straddles 1 or is unknown."""
        if self.speedup_ci is None:
            return None
        lo, hi = self.speedup_ci
        return True if lo > 1.0 else (False if hi < 1.0 else None)

    def as_dict(self, keys: Optional[tuple[str, ...]] = None) -> dict:
        """JSON-ready, under the names ``summary.json`` and ``workbench quantize --json`` use (``keys``: only those)."""
        out = dataclasses.asdict(self)
        out["speedup_ci"] = list(self.speedup_ci) if self.speedup_ci is not None else None
        return out if keys is None else {k: out[k] for k in keys}


# the figures the report's summary.json takes from the row (the rest of its entry is the report's own)
SUMMARY_KEYS = ("name", "size_mib", "fp32_size_mib", "latency_ms", "fp32_latency_ms", "speedup", "speedup_ci", "floor_ms",
                "of_floor", "fp32_floor_ms", "fp32_of_floor", "contended", "accuracy", "fp32_accuracy", "accuracy_delta")


def variant_row(result: "QuantResult") -> VariantRow:
    rep = result.report
    drop = rep.max_slice_drop()
    worst = rep.worst_slices(k=1, include_small=False)
    ratio = result.speedup_ratio
    first = result.latency[0] if result.latency else None
    fp32_first = result.fp32_latency[0] if result.fp32_latency else None
    return VariantRow(
        name=result.name, mode=result.config.mode.value, graph_kind=result.graph_kind,
        validation_passed=bool(result.validation.passed),
        accuracy=result.accuracy, fp32_accuracy=rep.overall.reference.accuracy, accuracy_delta=result.accuracy_delta,
        max_slice_drop=drop, worst_slice=worst[0].slice if worst and drop > 0 else None, n_flips=len(rep.flips),
        latency_ms=result.latency_ms, fp32_latency_ms=result.fp32_latency_ms, speedup=result.speedup,
        speedup_ci=(ratio.lo, ratio.hi) if ratio is not None else None,
        floor_ms=first.floor_ms if first is not None else None, of_floor=result.of_floor,
        fp32_floor_ms=fp32_first.floor_ms if fp32_first is not None else None,
        fp32_of_floor=fp32_first.of_floor if fp32_first is not None else None,
        contended=result.contended, size_mib=result.size_mib, fp32_size_mib=result.fp32_size_mib,
        nodes_kept_fp32=len(result.excluded_nodes),
    )
