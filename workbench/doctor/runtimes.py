"""Which stack's ONNX Runtime was faster, measured per CPU class: quoted on the current stack when this machine has no
profile of its own under onnxruntime 1.19.2. docs/stacks.md gives the milliseconds, the command and the kernels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class RuntimeRatio:
    """One measurement of the two stacks' runtimes on a CPU class (benchmarks/bench_stacks.py): latency of
    ``current`` over that of 1.19.2 (above 1: the current one is slower)."""

    cpu_class: str  # the CPU flags that set which kernels ONNX Runtime's MLAS picks, in words
    requires: tuple[str, ...]  # keys of MachineProfile.flags that must be set ...
    excludes: tuple[str, ...]  # ... and that must not
    machine: str
    measured: str
    current: str  # the onnxruntime version compared with 1.19.2
    fp32: float  # fused FP32 at 1x128
    int8: float  # per-channel INT8 at 1x128
    large_fp32: float  # the same at 32x47
    large_int8: float

    def matches(self, flags: dict) -> bool:
        return all(flags.get(f) for f in self.requires) and not any(flags.get(f) for f in self.excludes)


# Measured, per CPU class; the first row whose flags match a CPU speaks for it.
RUNTIME_RATIOS = (
    RuntimeRatio("AVX-512 VNNI", ("avx512_vnni",), (), "a 2-core Intel Xeon (AVX-512 VNNI, AVX-VNNI)", "November 2026",
                 "1.32.0", fp32=14.4 / 12.8, int8=7.8 / 6.4, large_fp32=152 / 132, large_int8=80 / 62),
    RuntimeRatio("AVX2 + FMA without AVX-512", ("avx2",), ("avx512f",), "a 2-core AMD EPYC (Zen 3: AVX2, FMA)",
                 "2026-11-25", "1.32.0", fp32=21.14 / 19.18, int8=14.90 / 11.74, large_fp32=223.05 / 208.95,
                 large_int8=142.86 / 123.44),
)
PUBLISHED_SLOWER = 1.05  # a measured ratio above this is said (below it the two runtimes are called even)


def published_runtime_ratio(flags: dict) -> Optional[RuntimeRatio]:
    """The measurement of :data:`RUNTIME_RATIOS` for a CPU with these flags (MachineProfile.flags)."""
    return next((r for r in RUNTIME_RATIOS if r.matches(flags)), None)


def published_note(profile, training_version: str) -> Optional[str]:
    """One line quoting the measurement of this CPU's class when it found the training stack's runtime faster."""
    ratio = published_runtime_ratio(profile.flags)
    if ratio is None or max(ratio.fp32, ratio.int8) <= PUBLISHED_SLOWER:
        return None
    return (f"onnxruntime {training_version} (the training stack) ran the same graphs faster than onnxruntime "
            f"{ratio.current} on CPUs of this class ({ratio.cpu_class}): the fused FP32 MiniLM took {ratio.fp32:.2f}x "
            f"and its per-channel INT8 {ratio.int8:.2f}x the time at 1x128 ({ratio.large_fp32:.2f}x and "
            f"{ratio.large_int8:.2f}x at 32x47) under {ratio.current}, measured on {ratio.machine}, {ratio.measured}; "
            "not measured on this machine (`workbench machine` on both stacks compares them here); the training "
            "stack (`make setup`) runs the same graphs faster on such CPUs")
