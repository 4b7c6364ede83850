"""The search over variants already quantized (no re-quantizing, no re-timing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from .. import runs
from ..runs import layout


def search_over_results(results: Sequence[Any], budget_overall: float, budget_per_slice: float,
                        include_small_slices: bool = False, objective: str = "latency",
                        out_dir: Optional[Path] = None, min_speedup: Optional[float] = None):
    """A :class:`~workbench.quant.search.SearchResult` over quantized variants that were already
    scored and timed (no re-quantizing, no re-timing): each one's drops are checked against the
    budgets, its speed-up against the speed guard (``min_speedup``, default
    :data:`~workbench.quant.budget.DEFAULT_MIN_SPEEDUP`; 0 turns it off), with the same candidate
    constructor and message as :func:`~workbench.quant.search.run_search`. The FP32 graph is a
    candidate too (its latency measured beside the first variant): the answer when no INT8 variant
    is both within budget and fast enough. Saved as ``out_dir/search.json`` when given."""
    from ..quant import (DEFAULT_MIN_SPEEDUP, BudgetCheck, SearchCandidate, SearchResult, check_budget, check_min_speedup,
                         select_candidate)
    from ..quant.search import choice_message, int8_candidate

    guard = check_min_speedup(DEFAULT_MIN_SPEEDUP if min_speedup is None else min_speedup)
    cands = []
    if results:
        r0 = results[0]
        ok_o, ok_s = budget_overall >= 0, budget_per_slice >= 0
        zero = BudgetCheck(0.0, "", 0.0, ok_o, ok_s, [] if ok_o and ok_s else ["FP32 is the reference (no change)"], 0, [])
        lat = r0.fp32_latency[0] if r0.fp32_latency else None
        cands.append(SearchCandidate(
            name=f"{r0.graph_kind}/fp32", graph=r0.graph_kind, precision="fp32", config=None, onnx_path=Path(r0.source_path),
            result_path=None, latency_ms=r0.fp32_latency_ms, size_mib=r0.fp32_size_mib,
            accuracy=r0.report.overall.reference.accuracy, accuracy_delta=0.0, check=zero, feasible=zero.feasible,
            speedup=1.0, speedup_lo=1.0, speedup_hi=1.0, floor_ms=lat.floor_ms if lat else None,
            of_floor=lat.of_floor if lat else None))
    for r in results:
        reps = [r.report] + ([r.golden] if r.golden is not None else [])
        cands.append(int8_candidate(r.name, r.graph_kind, r, check_budget(reps, budget_overall, budget_per_slice,
                                                                          include_small_slices), guard))
    # an INT8 variant within budget and past the guard; the FP32 graph only when none is
    best = select_candidate([c for c in cands if c.precision == "int8"], objective) or select_candidate(cands, objective)
    message = choice_message(cands, best, budget_overall, budget_per_slice, guard)
    out = Path(out_dir) if out_dir is not None else Path(".")
    result = SearchResult(cands, best.name if best else None, budget_overall, budget_per_slice, objective,
                          include_small_slices, False, out.resolve(), message, guard)
    if out_dir is not None:
        runs.save_result(result, out / layout.SEARCH_FILE)
    return result
