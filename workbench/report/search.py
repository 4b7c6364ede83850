"""The search over variants already quantized (no re-quantizing, no re-timing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from .. import runs
from ..runs import layout


def search_over_results(results: Sequence[Any], budget_overall: float, budget_per_slice: float,
                        include_small_slices: bool = False, objective: str = "latency",
                        out_dir: Optional[Path] = None):
    """A :class:`~workbench.quant.quantize.SearchResult` over quantized variants that were already
    scored (no re-quantizing, no re-timing): each one's drops are checked against the budgets
    with :func:`~workbench.quant.quantize.check_budget`, and the fastest (``objective``) INT8 variant
    within both is chosen. The FP32 graph is listed, as the reference, with its latency measured
    in the first variant's run; it is never chosen. Saved as ``out_dir/search.json`` when given."""
    from ..quant import BudgetCheck, SearchCandidate, SearchResult, check_budget, select_candidate

    cands = []
    if results:
        r0 = results[0]
        ok_o, ok_s = budget_overall >= 0, budget_per_slice >= 0
        zero = BudgetCheck(0.0, "", 0.0, ok_o, ok_s, [] if ok_o and ok_s else ["FP32 is the reference (no change)"], 0, [])
        cands.append(SearchCandidate(
            name=f"{r0.graph_kind}/fp32", graph=r0.graph_kind, precision="fp32", config=None, onnx_path=Path(r0.source_path),
            result_path=None, latency_ms=r0.fp32_latency_ms, size_mib=r0.fp32_size_mib,
            accuracy=r0.report.overall.reference.accuracy, accuracy_delta=0.0, check=zero, feasible=zero.feasible))
    for r in results:
        reps = [r.report] + ([r.golden] if r.golden is not None else [])
        chk = check_budget(reps, budget_overall, budget_per_slice, include_small_slices)
        cands.append(SearchCandidate(
            name=r.name, graph=r.graph_kind, precision="int8", config=r.config, onnx_path=Path(r.quantized_path),
            result_path=Path(r.out_dir) / layout.QUANTIZE_FILE, latency_ms=r.latency_ms, size_mib=r.size_mib,
            accuracy=r.accuracy, accuracy_delta=r.accuracy_delta, check=chk, feasible=chk.feasible))
    int8 = [c for c in cands if c.precision == "int8"]
    best = select_candidate(int8, objective) if int8 else None
    if best is not None:
        message = (f"{best.name}: {best.latency_ms:.2f} ms, {best.size_mib:.1f} MiB, accuracy {best.accuracy:.1%} "
                   f"({-best.check.overall_drop:+.2%}), worst slice {best.check.worst_slice or '-'} {-best.check.worst_slice_drop:+.2%}")
    elif int8:
        closest = min(int8, key=lambda c: (len(c.check.violations), c.check.worst_slice_drop))
        message = (f"no INT8 variant is within {budget_overall:.1%} overall and {budget_per_slice:.1%} per slice; closest: "
                   f"{closest.name} ({'; '.join(closest.check.violations[:2])})")
    else:
        message = "no quantized variant to choose from"
    out = Path(out_dir) if out_dir is not None else Path(".")
    result = SearchResult(cands, best.name if best else None, budget_overall, budget_per_slice, objective,
                          include_small_slices, False, out.resolve(), message)
    if out_dir is not None:
        runs.save_result(result, out / layout.SEARCH_FILE)
    return result
