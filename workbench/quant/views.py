"""Quantization results as the CLI prints them; the panels draw :mod:`workbench.plots.quant` instead."""

from __future__ import annotations

from .run import QuantResult
from .search import SearchResult


def result_text(result: QuantResult, k: int = 5) -> str:
    """One quantization as text: size, latency, accuracy with its interval, the ``k`` worst slices and nodes, notes."""
    rep, o = result.report, result.report.overall
    lat, flat = result.latency[0], result.fp32_latency[0]
    speed = (f"{result.speedup_ratio.text()} over {result.speedup_ratio.rounds} interleaved rounds"
             if result.speedup_ratio is not None else f"{result.speedup:.2f}x; medians, same process")
    floors = ""
    if lat.floor_ms and flat.floor_ms:
        floors = (f"\nfloor:      {lat.floor_ms:.2f} ms ({100 * lat.of_floor:.0f}% of it reached) vs FP32 {flat.floor_ms:.2f} ms "
                  f"({100 * flat.of_floor:.0f}%): this machine's matrix-multiply throughput x the graph's work")
    lines = [
        f"{result.name} on the {result.graph_kind} graph {result.source_path}",
        f"size:       {result.size_mib:.1f} MiB (FP32 {result.fp32_size_mib:.1f})",
        f"latency:    {result.latency_ms:.2f} ms vs FP32 {result.fp32_latency_ms:.2f} ms ({speed}; "
        f"shape {lat.batch}x{lat.seq}){floors}",
        f"accuracy:   {100 * result.accuracy:.1f}% vs FP32 {100 * o.reference.accuracy:.1f}% "
        f"({100 * o.delta:+.1f} pts, 95% CI [{100 * o.ci_low:+.1f}, {100 * o.ci_high:+.1f}]); "
        f"{len(rep.flips)} of {rep.n} predictions flipped",
        f"validation: {result.validation.message}",
        "slices, worst first (pts, 95% CI):",
    ]
    for d in rep.worst_slices(k=k):
        flag = " significant" if d.significant else ""
        small = f" (too small: n < {rep.min_slice_size})" if d.too_small else ""
        lines.append(f"  {d.slice:<28} n={d.n:<5} {100 * d.delta:+6.1f} [{100 * d.ci_low:+.1f}, {100 * d.ci_high:+.1f}]{flag}{small}")
    if result.golden is not None:
        lines.append(f"golden set: {len(result.golden.flips)} of {result.golden.n} flipped")
    if result.node_errors:
        lines.append("worst nodes (own quantization SQNR, dB):")
        lines += [f"  {e.node:<55} {e.op_type:<8} {e.local_sqnr_db:6.1f}" for e in result.node_errors[:k]]
    lines += [f"note: {n}" for n in result.notes]
    if result.contended:
        lines.append(f"WARNING: speed {result.load.text()}; the speed-up above is not a measured fact")
    return "\n".join(lines)


def search_text(found: SearchResult) -> str:
    """One row per candidate, then the search's verdict."""
    lines = [f"{'candidate':<34} {'ms':>8} {'speed-up (95% CI)':>19} {'floor':>6} {'MiB':>7} {'acc %':>6} {'Δ pts':>6} "
             f"{'worst slice':>28} {'ok':>3}"]
    for c in found.candidates:
        worst = (c.check.worst_slice or "-") + f" {-100 * c.check.worst_slice_drop:+.1f}"
        speed = (f"{c.speedup:.2f}x ({c.speedup_lo:.2f}-{c.speedup_hi:.2f})" if c.speedup_lo is not None
                 else (f"{c.speedup:.2f}x" if c.speedup is not None else "-"))
        floor = f"{100 * c.of_floor:.0f}%" if c.of_floor else "-"
        ok = "yes" if c.feasible else ("no" if c.check.feasible is False or c.fast_enough else "slow")
        lines.append(f"{c.name:<34} {c.latency_ms:>8.2f} {speed:>19} {floor:>6} {c.size_mib:>7.1f} {100 * c.accuracy:>6.1f} "
                     f"{100 * c.accuracy_delta:>+6.1f} {worst:>28} {ok:>4}")
    if found.min_speedup:
        lines.append(f"(speed guard: an INT8 variant needs at least {found.min_speedup:.2f}x FP32 at the lower end of its "
                     "interval; 'slow' = within the accuracy budget but not past the guard)")
    lines.append(f"\n{found.message}")
    return "\n".join(lines)
