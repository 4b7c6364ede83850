"""Plain rows of result objects, shared by the verdict and ``summary.json``."""

from __future__ import annotations


def slice_row(d) -> dict:
    return {"slice": d.slice, "n": int(d.n), "delta": d.delta, "ci95": [d.ci_low, d.ci_high], "significant": bool(d.significant),
            "too_small": bool(d.too_small), "flips": int(d.flips), "description": d.description, "group": d.group,
            "fp32_accuracy": d.reference.accuracy, "int8_accuracy": d.candidate.accuracy}


def describe_config(cfg) -> str:
    """'dynamic per-channel INT8', 'static INT8 (QDQ, MinMax calibration on 128 texts)'."""
    if cfg is None:
        return "FP32"
    mode = getattr(cfg.mode, "value", cfg.mode)
    if mode == "weight-only":
        level = getattr(cfg, "accuracy_level", 0)
        return (f"weight-only INT{cfg.bits} (MatMulNBits, blocks of {cfg.block_size}, accuracy_level {level}: "
                f"{'INT8' if level == 4 else 'FP32'} compute)")
    bits = []
    if cfg.per_channel:
        bits.append("per-channel")
    if cfg.reduce_range:
        bits.append("7-bit (reduce-range)")
    if getattr(cfg.weight_type, "value", "") == "quint8":
        bits.append("unsigned-weight")
    if cfg.nodes_to_exclude:
        bits.append(f"{len(cfg.nodes_to_exclude)} nodes left in FP32,")
    text = f"{mode} {' '.join(bits) + ' ' if bits else ''}INT8"
    if mode == "static":
        text += f" (QDQ, {cfg.calibration.method.value} calibration on {cfg.calibration.samples} texts)"
    return text


def latency_map(lat) -> dict:
    return {f"{s.batch}x{s.seq}": s.stats.median_ms for s in lat}
