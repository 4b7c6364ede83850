"""``summary.json``: every number of the report as one JSON-ready dict, checked against its schema."""

from __future__ import annotations

import dataclasses
import datetime as _dt
from pathlib import Path
from typing import Optional

from ..core import serial
from ..quant import MIN_SLICE_SIZE, check_budget, load_baseline
from ..quant.rows import SUMMARY_KEYS, variant_row
from ..runs import layout
from .environment import environment_facts
from .inputs import ReportInputs
from .lengths import data_lengths, scoring_dict
from .rows import latency_map, slice_row, describe_config
from .schema import SCHEMA_VERSION, validate_summary
from .verdict import build_verdict


def _row_of(examples: Optional[list], index: int) -> int:
    example = examples[index] if examples is not None and index < len(examples) else {}
    return int(example.get("row", index)) if isinstance(example, dict) else index


def _quant_entry(r, check, examples: Optional[list]) -> dict:
    rep = r.report
    flips = [{"index": int(f.index), "row": _row_of(examples, f.index), "text": f.text, "label": f.label_name or str(f.label),
              "fp32_pred": f.reference_pred_name or str(f.reference_pred), "fp32_confidence": f.reference_confidence,
              "int8_pred": f.candidate_pred_name or str(f.candidate_pred), "int8_confidence": f.candidate_confidence,
              "kind": f.kind.value, "slices": list(f.slices)} for f in rep.flips]
    cfg = r.config
    return {
        **variant_row(r).as_dict(SUMMARY_KEYS),  # name, size, latency, speed-up, floor, contended, accuracy: the variant's row
        "description": describe_config(cfg), "mode": cfg.mode.value, "per_channel": bool(cfg.per_channel),
        "reduce_range": bool(cfg.reduce_range), "calibration": cfg.calibration.method.value if cfg.mode.value == "static" else None,
        "calibration_samples": int(r.calibration_samples), "graph": r.graph_kind, "quantized_path": str(r.quantized_path),
        "size_ratio": r.fp32_size_mib / r.size_mib if r.size_mib else None,
        "load": serial.to_dict(r.load) if r.load is not None else None,
        "latency_by_shape": [{"shape": f"{s.batch}x{s.seq}", "int8_ms": s.stats.median_ms, "fp32_ms": f.stats.median_ms,
                              "floor_ms": s.floor_ms, "of_floor": s.of_floor, "fp32_floor_ms": f.floor_ms,
                              "fp32_of_floor": f.of_floor,
                              "speedup": sp.ratio.value if sp else None, "speedup_ci": [sp.ratio.lo, sp.ratio.hi] if sp else None}
                             for s, f, sp in zip(r.latency, r.fp32_latency, list(r.speed) + [None] * len(r.latency))],
        "macro_f1": rep.overall.candidate.macro_f1, "fp32_macro_f1": rep.overall.reference.macro_f1,
        "agreement": rep.overall.candidate.agreement, "validation_passed": bool(r.validation.passed),
        "validation": r.validation.message, "overall": slice_row(rep.overall), "slices": [slice_row(d) for d in rep.slices],
        "n_flips": len(rep.flips), "flips": flips, "within_budget": bool(check.feasible), "violations": list(check.violations),
        "worst_slice": check.worst_slice or None, "worst_slice_drop": check.worst_slice_drop,
        "slices_not_judged": list(check.slices_skipped), "notes": list(r.notes),
        "scoring": scoring_dict(getattr(r, "scoring", None)), "weight_bits": cfg.bits,
        "accuracy_level": cfg.accuracy_level if cfg.mode.value == "weight-only" else None,
    }


def _training_summary(c) -> Optional[dict]:
    if c is None:
        return None
    rows = [{"backend": r.backend.value, "status": r.status.value, "steps": len(r.steps), "median_step_ms": 1000 * r.median_step_s,
             "samples_per_s": r.samples_per_s, "startup_s": r.startup_s, "peak_memory_mib": r.peak_memory_mib,
             "final_accuracy": r.final_accuracy, "executed_in_onnxruntime": r.executed_in_onnxruntime, "reason": r.reason}
            for r in c.runs]
    return {"baseline": c.baseline.value, "loss_parity": c.loss_parity, "runs": rows,
            "ratios": {x.backend.value: dataclasses.asdict(x) if dataclasses.is_dataclass(x) else str(x) for x in c.ratios},
            "notes": list(c.notes), "verdicts": _training_verdicts(c)}


def _training_verdicts(c) -> list[dict]:
    """Those saved beside compare.json (with the load while it trained), else what its figures alone support."""
    from ..train import load_verdicts, verdicts_for

    saved = load_verdicts(Path(c.run_dir)) if getattr(c, "run_dir", None) and Path(c.run_dir).is_dir() else None
    found = saved if saved is not None else verdicts_for(c)
    return [dataclasses.asdict(v) for v in found.verdicts]


def _machine(inp: ReportInputs, results: list, notes: list) -> tuple[Optional[dict], list[str]]:
    """(the profile as a dict, why each speed was taken under load)."""
    profile = inp.machine
    if profile is None and results:
        try:
            from ..perf.machine_profile import machine_profile

            profile = machine_profile()  # cached: what the quantization timing was judged against
        except Exception as exc:  # noqa: BLE001 - a report is still written without the profile; it says why
            notes.append(f"the machine profile could not be read ({type(exc).__name__}: {exc})")
    machine = None
    if profile is not None:
        from ..doctor.checks import slower_runtime_note

        if (slower := slower_runtime_note(profile)) is not None:  # the current stack on a machine where 1.19.2 measured faster
            notes.append(slower)
        machine = serial.to_dict(profile)
        machine.update(isa=profile.isa_text(), int8_over_fp32=profile.int8_over_fp32, description=profile.text())
    contended = [f"{r.name}: {r.load.text()}" for r in results if getattr(r, "contended", False)]
    return machine, contended


def _eval_set_facts(results: list, data: dict, notes: list) -> tuple[Optional[list], list[dict]]:
    """From the first variant's baseline; fills what ``data`` does not give from it."""
    examples = None
    slices: list[dict] = []
    if not results:
        return examples, slices
    try:
        base = load_baseline(results[0].baseline_path)
        eset = base.eval_sets[0]
        examples = eset.load_examples()
        slices = [{"name": s.name, "description": s.description, "group": s.group, "n": len(s.indices),
                   "too_small": len(s.indices) < MIN_SLICE_SIZE} for s in eset.slices]
        data.setdefault("rows_scored", eset.n)
        data.setdefault("eval_batch_size", base.batch_size)
        data.setdefault("max_length", base.max_length)
        data.setdefault("timing", {"shapes": [f"{b}x{s}" for b, s in base.timing.shapes], "warmup": base.timing.warmup,
                                   "repeats": base.timing.repeats, "threads": base.timing.threads})
        for k, val in data_lengths(base).items():
            data.setdefault(k, val)
    except (FileNotFoundError, OSError, KeyError, ValueError) as exc:
        notes.append(f"the evaluation examples could not be read back ({exc}); flips are listed without row numbers")
    return examples, slices


def _export_summary(e) -> Optional[dict]:
    if e is None:
        return None
    return {"onnx_path": str(e.onnx_path), "opset": e.opset, "attn_implementation": e.attn_implementation,
            "node_count": e.node_count, "size_mib": e.size_mib, "export_seconds": e.export_seconds,
            "class_names": list(e.class_names), "max_length": e.max_length, "model_type": e.model_info.model_type,
            "num_parameters": e.model_info.num_parameters, "validation": serial.to_dict(e.validation),
            "top_ops": dict(list(e.op_histogram.items())[:12]), "trained_in": e.trained_in}


def _fusion_summary(f) -> Optional[dict]:
    from ..graph.views import choice_summary

    if f is None:
        return None
    return {"fused_ops": dict(f.fused_op_counts) if any(v.name.value == "transformer" for v in f.variants) else {},
            "expected_fusions": dict(f.expected_fusions), "diagnoses": [d.text for d in f.diagnoses],
            "pytorch_latency_ms": latency_map(f.pytorch_latency), "fused_path": str(f.fused_path) if f.fused_path else None,
            "variants": [{"name": v.name.value, "session_optimization": v.session_optimization, "node_count": v.node_count,
                          "size_mib": v.size_mib, "validation_passed": bool(v.validation.passed),
                          "max_abs_diff": v.validation.max_abs_diff, "latency_ms": latency_map(v.latency)}
                         for v in f.variants],
            "threads": f.config.threads, "notes": list(f.notes), "choice": choice_summary(f)}


def _search_summary(search) -> Optional[dict]:
    if search is None:
        return None
    return {"objective": search.objective, "chosen": search.chosen, "message": search.message,
            "min_speedup": search.min_speedup,
            "candidates": [{"name": c.name, "precision": c.precision, "description": describe_config(c.config),
                            "latency_ms": c.latency_ms, "size_mib": c.size_mib, "accuracy": c.accuracy,
                            "accuracy_delta": c.accuracy_delta, "feasible": bool(c.feasible),
                            "speedup": c.speedup, "speedup_ci": [c.speedup_lo, c.speedup_hi] if c.speedup_lo is not None else None,
                            "fast_enough": bool(c.fast_enough), "too_slow": c.too_slow, "contended": bool(c.contended),
                            "floor_ms": c.floor_ms, "of_floor": c.of_floor,
                            "worst_slice": c.check.worst_slice or None, "worst_slice_drop": c.check.worst_slice_drop,
                            "violations": list(c.check.violations)} for c in search.candidates]}


def _method_notes(inp: ReportInputs, data: dict, n_boot: Optional[int], contended: list[str]) -> list[str]:
    """How the numbers were obtained, in sentences (the bootstrap, small slices, batching, timing, load)."""
    notes = [
        "Accuracy changes are INT8 minus FP32 on the same examples; 95% intervals come from a paired bootstrap "
        f"({n_boot} replicates): every replicate draws the same examples for both models, so the interval measures the change.",
        f"Slices with fewer than {MIN_SLICE_SIZE} examples are shown but not held to the per-slice budget"
        f"{' (here they are: --include-small)' if inp.include_small_slices else ''}: one flipped prediction moves such a slice by more "
        f"than 2 points.",
        "Dynamic INT8 quantizes activations with scales computed per batch at run time, so one example's prediction can "
        "depend on which examples share its batch; FP32 and static INT8 do not. Every variant was scored in batches of "
        f"{data.get('eval_batch_size', 32)} padded to the longest, the same batches for all"
        + (" (batches of rows sorted by token length, results in row order: a dynamic INT8 prediction can differ from "
           "file-order scoring by its batch-mates)." if data.get("scoring_order") == "length" else "."),
        "Latency: FP32 and each INT8 graph timed side by side in alternating rounds in one process (warm-up first, the "
        "same synthetic batches of the shapes listed), so load that comes and goes hits both; each speed-up is the median "
        "of the per-round ratios with a 95% bootstrap interval over the rounds, and counts as a gain only when the whole "
        f"interval is above the speed guard ({inp.min_speedup:.2f}x). Each latency carries its floor: the graph's "
        "multiply-adds at this machine's measured matrix-multiply throughput (the machine section); of_floor = floor / latency.",
    ]
    if contended:
        notes.append("These speed figures were taken while other work used the CPU (" + "; ".join(contended) +
                     "): they are written down, not stated as measured; time again on a quiet machine.")
    for b in inp.batch_dependence or ():
        notes.append(f"Measured here: {b['variant']}: {b['differ']} of {b['n']} predictions differ between batch "
                     f"{b['batch_a']} and batch {b['batch_b']}.")
    return notes


def task_summary(task: str, kind: str, title: str, fields: dict, doctor=None) -> dict:
    """``summary.json`` of any task: the common fields around the task's ``fields``, JSON-ready and checked."""
    summary = serial.to_dict({"schema_version": SCHEMA_VERSION, "kind": kind, "task": task, "title": title,
                              "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                              "environment": environment_facts(doctor), **fields})
    validate_summary(summary)
    return summary


def build_summary(inp: ReportInputs) -> dict:
    """A classifier's ``summary.json``."""
    data, notes = dict(inp.data), list(inp.notes)  # the inputs stay as given; the summary adds what it read
    results = list(inp.quant)
    search = inp.searched()
    by_path = {str((Path(r.out_dir) / layout.QUANTIZE_FILE).resolve()): r for r in results}
    checks = {c.name: c.check for c in search.candidates} if search is not None else {}
    examples, slices = _eval_set_facts(results, data, notes)
    data.setdefault("rows_scored", 0)  # nothing was scored (no quantized variant)
    data.setdefault("source", "")  # a run folder read back does not say where its data came from
    quant = []
    for r in results:
        chk = checks.get(r.name) or check_budget([r.report], inp.budget_overall, inp.budget_per_slice, inp.include_small_slices)
        quant.append(_quant_entry(r, chk, examples))
    n_boot = results[0].report.n_boot if results else None
    machine, contended = _machine(inp, results, notes)
    return task_summary("classification", inp.kind, inp.title, doctor=inp.doctor, fields={
        "run_dir": str(Path(inp.run_dir).resolve()) if inp.run_dir else "",
        "verdict": build_verdict(inp, search, by_path, machine),
        "budget": {"metric": "accuracy", "overall": inp.budget_overall, "per_slice": inp.budget_per_slice,
                   "include_small_slices": inp.include_small_slices, "min_slice_size": MIN_SLICE_SIZE},
        "machine": machine,
        "contended": bool(contended),
        "contended_because": contended,
        "model": inp.model,
        "data": data,
        "slices": slices,
        "stages": [{"name": s["name"], "status": s["status"], "seconds": float(s.get("seconds", 0.0)),
                    "message": s.get("message", "")} for s in inp.stages],
        "training": _training_summary(inp.comparison),
        "export": _export_summary(inp.export),
        "fusion": _fusion_summary(inp.fusion),
        "quantization": quant,
        "search": _search_summary(search),
        "method": {"bootstrap": {"replicates": n_boot, "confidence_level": results[0].report.confidence_level if results else None,
                                 "paired": True, "seed": results[0].report.seed if results else None},
                   "eval_batch_size": data.get("eval_batch_size"), "timing": data.get("timing"),
                   "batch_dependence": list(inp.batch_dependence), "notes": _method_notes(inp, data, n_boot, contended)},
        "config": inp.config,
        "notes": notes,
    })
