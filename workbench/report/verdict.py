"""The verdict: which INT8 variant meets the budget (or why none does, or why it is incomplete)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..quant import load_quant_result
from ..quant.choice import BUSY
from .rows import slice_row, describe_config
from .schema import EXIT_INCOMPLETE, EXIT_MEETS, EXIT_NONE_MEETS

if TYPE_CHECKING:
    from .inputs import ReportInputs


def _load_candidate(c, by_path: dict):
    if c.result_path is None:
        return None
    key = str(Path(c.result_path).resolve())
    if key in by_path:
        return by_path[key]
    if Path(c.result_path).is_file():
        return load_quant_result(c.result_path)
    return None


def build_verdict(inp: ReportInputs, search, by_path: dict, machine: Optional[dict] = None, budget_words: str = "",
                  unjudged: str = "") -> dict:
    """A failed step makes it ``incomplete`` whatever the variants show, so summary.json and the exit code agree.
    Speeds timed on a busy machine are never stated as measured; ``unjudged``: why no variant has a budget (``no_labels``)."""
    if unjudged:
        return {"status": "no_labels", "exit_code": EXIT_NONE_MEETS, "chosen": None, "text": unjudged}
    v = _verdict_of_variants(inp, search, by_path, machine, budget_words)
    failed = [s for s in inp.stages if s.get("status") == "failed"]
    if failed and v["status"] != "incomplete":
        steps = "; ".join(f"{s['name']} ({s.get('message', '')})" for s in failed)
        v.update(status="incomplete", exit_code=EXIT_INCOMPLETE,
                 text=f"Incomplete: a step failed, so this is not a verdict on everything asked for. Failed: {steps}. "
                      f"Of what did run: {v['text']}")
    return v


def hardware_sentence(r, machine: Optional[dict]) -> str:
    """The variant's share of its floor and what the instruction sets say; the general 2-4x of VNNI/AMX is marked unmeasured."""
    if not machine:
        return ""
    parts = []
    lat = r.latency[0] if getattr(r, "latency", None) else None
    if lat is not None and lat.of_floor:
        parts.append(f"{100 * lat.of_floor:.0f}% of what this CPU's matrix multiplies allow at {lat.batch}x{lat.seq} "
                     f"(floor {lat.floor_ms:.2f} ms)")
    flags = machine.get("flags") or {}
    ratio = machine.get("int8_over_fp32")
    cpu = f"{machine.get('cpu_model', 'this CPU')} ({machine.get('isa', '')})"
    if flags.get("avx512_vnni") or flags.get("avx_vnni") or flags.get("amx"):
        parts.append(f"{cpu} has VNNI: its INT8 matrix multiply measured {ratio:.1f}x its FP32 one" if ratio else f"{cpu} has VNNI")
    else:
        measured = f" (here {ratio:.1f}x)" if ratio else ""
        parts.append(f"{cpu} has no VNNI: its INT8 matrix multiply runs only modestly faster than FP32{measured}; CPUs with "
                     "VNNI or AMX run INT8 matrix multiplies 2-4x faster than FP32 (not measured here)")
    return "; ".join(parts)


def _speed_words(r) -> str:
    """'1.7x faster (1.6-1.8)'; older results without an interval: the point figure."""
    ratio = getattr(r, "speedup_ratio", None)
    if ratio is None:
        return _faster(r.speedup)
    if ratio.value >= 1:
        return f"{ratio.value:.2f}x faster ({ratio.lo:.2f}-{ratio.hi:.2f})"
    return f"{1 / ratio.value:.2f}x slower ({ratio.lo:.2f}-{ratio.hi:.2f}x FP32's speed)"


def _verdict_of_variants(inp: ReportInputs, search, by_path: dict, machine: Optional[dict] = None, budget_words: str = "") -> dict:
    bo, bs = inp.budget_overall, inp.budget_per_slice
    budget_words = budget_words or f"{_pts(bo)} overall and {_pts(bs)} on every slice"
    failed = [s for s in inp.stages if s.get("status") == "failed"]
    int8 = [c for c in (search.candidates if search else []) if c.precision == "int8"]
    if not int8:
        why = f"; failed: {', '.join(s['name'] + ' (' + s.get('message', '') + ')' for s in failed)}" if failed else ""
        return {"status": "incomplete", "exit_code": EXIT_INCOMPLETE, "chosen": None,
                "text": f"No quantized variant was evaluated, so there is no verdict{why}."}
    busy_words = under_load_words(int8)
    guard = getattr(search, "min_speedup", 0.0) or 0.0
    chosen = next((c for c in int8 if c.name == search.chosen), None)
    if chosen is None:
        accurate = [c for c in int8 if c.check.feasible]
        if accurate:  # within the accuracy budget, but none past the speed guard: the FP32 graph it is
            quickest = max(accurate, key=lambda c: c.speedup_lo if c.speedup_lo is not None else (c.speedup or 0.0))
            r = _load_candidate(quickest, by_path)
            text = (f"Keep the FP32 graph: {len(accurate)} INT8 variant{'s stay' if len(accurate) > 1 else ' stays'} within the "
                    f"budget ({budget_words}), but none is at least {guard:.2f}x faster beyond doubt on this machine. The "
                    f"quickest, {describe_config(quickest.config)} ({quickest.name}), runs at "
                    f"{quickest.too_slow or _speed_words(r) if r is not None else quickest.too_slow}.")
            if r is not None:
                hw = hardware_sentence(r, machine)
                text += f" {hw[0].upper() + hw[1:]}." if hw else ""
            return {"status": "no_candidate_meets_budget", "exit_code": EXIT_NONE_MEETS, "chosen": None,
                    "text": text + busy_words, "closest": quickest.name, "reason": "speed_guard"}
        closest = min(int8, key=lambda c: (len(c.check.violations), c.check.worst_slice_drop))
        r = _load_candidate(closest, by_path)
        detail = "; ".join(closest.check.violations[:2]) or "over budget"
        text = (f"No INT8 variant meets the budget ({budget_words}). Closest: {describe_config(closest.config)} "
                f"({closest.name}): {detail}.")
        if r is not None and r.latency_ms > 0:
            text += (f" It would have been {_speed_words(r) if not closest.contended else 'of unmeasured speed (timed under load)'} and "
                     f"{r.fp32_size_mib / r.size_mib:.1f}x smaller than the FP32 graph.")
        text += " Keep the FP32 graph, raise a budget knowingly, or try other presets (per-channel, static calibration)."
        return {"status": "no_candidate_meets_budget", "exit_code": EXIT_NONE_MEETS, "chosen": None, "text": text + busy_words,
                "closest": closest.name, "reason": "accuracy"}
    r = _load_candidate(chosen, by_path)
    out = {"status": "meets_budget", "exit_code": EXIT_MEETS, "chosen": chosen.name}
    if r is None:  # no quantization result to read (another task's variant): the candidate's own figures
        said = search.message.split(BUSY)[0]  # which speeds were busy: the verdict's own words below, said once
        out["text"] = f"{describe_config(chosen.config)} ({chosen.name}) meets the budget ({budget_words}): {said}." + busy_words
        if chosen.speedup_lo is not None and not chosen.contended:
            out.update(speedup=chosen.speedup, speedup_ci=[chosen.speedup_lo, chosen.speedup_hi])
        out.update(accuracy_delta=chosen.accuracy_delta)
        return out
    pool = r.report.worst_slices(include_small=inp.include_small_slices)
    worst = next((d for d in pool if d.n > 0), None)
    o = r.report.overall
    busy = bool(chosen.contended)  # the chosen variant's own timing: another variant's busy moment says nothing of it
    speed = "of unmeasured speed (timed while other work used the CPU)" if busy else _speed_words(r)
    text = (f"{describe_config(r.config)} is {speed} and {r.fp32_size_mib / r.size_mib:.1f}x smaller than the "
            f"{r.graph_kind} FP32 graph here; accuracy {100 * r.accuracy:.1f}% against {100 * o.reference.accuracy:.1f}% "
            f"({100 * o.delta:+.1f} points [{100 * o.ci_low:+.1f}, {100 * o.ci_high:+.1f}]); no slice loses more than the "
            f"{_pts(bs)} budget")
    if worst is not None:
        verb = "loses" if worst.delta < 0 else "changes"
        amount = f"{100 * abs(worst.delta):.1f} points" if worst.delta < 0 else f"{100 * worst.delta:+.1f} points"
        text += f"; '{worst.slice}' (n={worst.n}) {verb} {amount} [{100 * worst.ci_low:+.1f}, {100 * worst.ci_high:+.1f}]"
    text += "."
    hw = hardware_sentence(r, machine)
    if hw and not busy:
        text += f" Speed: {hw}."
    text += busy_words
    ratio = getattr(r, "speedup_ratio", None)
    out.update(text=text, speedup=None if busy else r.speedup, size_ratio=r.fp32_size_mib / r.size_mib, accuracy_delta=o.delta,
               speedup_ci=[ratio.lo, ratio.hi] if ratio is not None and not busy else None,
               worst_slice=slice_row(worst) if worst is not None else None)
    return out


def under_load_words(int8) -> str:
    """Only the busy variants' speed goes unstated; the others' figures stand."""
    busy = [c.name for c in int8 if getattr(c, "contended", False)]
    if not busy:
        return ""
    quiet = len(int8) - len(busy)
    return (f" The speed of {', '.join(busy)} was taken while other work used the CPU, even after timing again, so it is not "
            "stated as measured" + (f"; the other {quiet} variant{'s were' if quiet > 1 else ' was'} timed on a quiet machine"
                                    if quiet else "") + ": time again on a quiet machine.")


def _faster(speedup: float) -> str:
    if not speedup or speedup != speedup:
        return "of unmeasured speed"
    return f"{speedup:.1f}x faster" if speedup >= 1 else f"{1 / speedup:.1f}x slower"


def _pts(fraction: float) -> str:
    v = 100 * fraction
    return f"{v:g}-point" if v == int(v) else f"{v:.2g}-point"
