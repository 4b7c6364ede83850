"""The verdict: which INT8 variant meets the budget (or why none does, or why it is incomplete)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .rows import _slice_row, describe_config
from .schema import EXIT_INCOMPLETE, EXIT_MEETS, EXIT_NONE_MEETS

if TYPE_CHECKING:
    from .inputs import ReportInputs

def _load_candidate(c, by_path: dict):
    from ..quant import load_quant_result

    if c.result_path is None:
        return None
    key = str(Path(c.result_path).resolve())
    if key in by_path:
        return by_path[key]
    if Path(c.result_path).is_file():
        return load_quant_result(c.result_path)
    return None


def _verdict(inp: ReportInputs, search, by_path: dict) -> dict:
    """The verdict of what was evaluated; when a step failed it is ``incomplete`` (exit code 1)
    whatever the variants that did run show, so summary.json and the exit code always agree."""
    v = _verdict_of_variants(inp, search, by_path)
    failed = [s for s in inp.stages if s.get("status") == "failed"]
    if failed and v["status"] != "incomplete":
        steps = "; ".join(f"{s['name']} ({s.get('message', '')})" for s in failed)
        v.update(status="incomplete", exit_code=EXIT_INCOMPLETE,
                 text=f"Incomplete: a step failed, so this is not a verdict on everything asked for. Failed: {steps}. "
                      f"Of what did run: {v['text']}")
    return v


def _verdict_of_variants(inp: ReportInputs, search, by_path: dict) -> dict:
    bo, bs = inp.budget_overall, inp.budget_per_slice
    budget_words = f"{_pts(bo)} overall and {_pts(bs)} on every slice"
    failed = [s for s in inp.stages if s.get("status") == "failed"]
    int8 = [c for c in (search.candidates if search else []) if c.precision == "int8"]
    if not int8:
        why = f"; failed: {', '.join(s['name'] + ' (' + s.get('message', '') + ')' for s in failed)}" if failed else ""
        return {"status": "incomplete", "exit_code": EXIT_INCOMPLETE, "chosen": None,
                "text": f"No quantized variant was evaluated, so there is no verdict{why}."}
    chosen = next((c for c in int8 if c.name == search.chosen), None)
    if chosen is None:
        from ..quant import select_candidate

        chosen = select_candidate(int8, search.objective)
    if chosen is None:
        closest = min(int8, key=lambda c: (len(c.check.violations), c.check.worst_slice_drop))
        r = _load_candidate(closest, by_path)
        detail = "; ".join(closest.check.violations[:2]) or "over budget"
        text = (f"No INT8 variant meets the budget ({budget_words}). Closest: {describe_config(closest.config)} "
                f"({closest.name}): {detail}.")
        if r is not None and r.latency_ms > 0:
            text += f" It would have been {_faster(r.speedup)} and {r.fp32_size_mib / r.size_mib:.1f}x smaller than the FP32 graph."
        text += " Keep the FP32 graph, raise a budget knowingly, or try other presets (per-channel, static calibration)."
        return {"status": "no_candidate_meets_budget", "exit_code": EXIT_NONE_MEETS, "chosen": None, "text": text,
                "closest": closest.name}
    r = _load_candidate(chosen, by_path)
    out = {"status": "meets_budget", "exit_code": EXIT_MEETS, "chosen": chosen.name}
    if r is None:
        out["text"] = f"{describe_config(chosen.config)} ({chosen.name}) meets the budget ({budget_words}): {search.message}."
        return out
    pool = r.report.worst_slices(include_small=inp.include_small_slices)
    worst = next((d for d in pool if d.n > 0), None)
    o = r.report.overall
    text = (f"{describe_config(r.config)} is {_faster(r.speedup)} and {r.fp32_size_mib / r.size_mib:.1f}x smaller than the "
            f"{r.graph_kind} FP32 graph; accuracy {100 * r.accuracy:.1f}% against {100 * o.reference.accuracy:.1f}% "
            f"({100 * o.delta:+.1f} points [{100 * o.ci_low:+.1f}, {100 * o.ci_high:+.1f}]); no slice loses more than the "
            f"{_pts(bs)} budget")
    if worst is not None:
        verb = "loses" if worst.delta < 0 else "changes"
        amount = f"{100 * abs(worst.delta):.1f} points" if worst.delta < 0 else f"{100 * worst.delta:+.1f} points"
        text += f"; '{worst.slice}' (n={worst.n}) {verb} {amount} [{100 * worst.ci_low:+.1f}, {100 * worst.ci_high:+.1f}]"
    text += "."
    out.update(text=text, speedup=r.speedup, size_ratio=r.fp32_size_mib / r.size_mib, accuracy_delta=o.delta,
               worst_slice=_slice_row(worst) if worst is not None else None)
    return out


def _faster(speedup: float) -> str:
    """'2.8x faster', or '1.2x slower' (the FP32 graph's median latency over the variant's)."""
    if not speedup or speedup != speedup:
        return "of unmeasured speed"
    return f"{speedup:.1f}x faster" if speedup >= 1 else f"{1 / speedup:.1f}x slower"


def _pts(fraction: float) -> str:
    v = 100 * fraction
    return f"{v:g}-point" if v == int(v) else f"{v:.2g}-point"
