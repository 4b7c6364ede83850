"""The audit: ``run_audit(model, AuditConfig, out) -> AuditResult``, every step logged and recorded,
the report written at the end."""

from __future__ import annotations

import dataclasses
import json
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .. import runs
from ..runs import layout
from .config import AUDIT_FILE, AUDIT_NEEDS, STEPS, AuditConfig, AuditInputError, Log
from .inputs import CheckedInputs, ModelFacts, audit_slices, check_inputs


@dataclass(frozen=True)
class AuditResult:
    out_dir: Path
    report_path: Optional[Path]
    summary_path: Optional[Path]
    verdict: dict
    exit_code: int
    stages: list = field(default_factory=list)
    seconds: float = 0.0


def batch_dependence(qpath: Path, tokenizer, examples, max_length: int, batch_size: int, limit: int = 256) -> int:
    """How many of the first ``limit`` examples get another label when scored one at a time
    instead of in batches of ``batch_size`` (dynamic INT8's per-batch activation scales)."""
    from ..ortinfer import make_session, predict_dataset

    ds = examples.select(range(min(limit, len(examples))))
    session = make_session(qpath)
    a = predict_dataset(session, tokenizer, ds, max_length, 1).argmax(-1)
    b = predict_dataset(session, tokenizer, ds, max_length, batch_size).argmax(-1)
    return int((a != b).sum())


def run_audit(model: str | Path, cfg: AuditConfig, out_dir: Optional[str | Path] = None, *, log: Log = print,
              checked: Optional[CheckedInputs] = None) -> AuditResult:
    """Audit the classifier in the folder ``model`` on ``cfg.data`` into ``out_dir`` (default
    ``runs/<stamp>-audit-<model>``); see the package doc. ``log`` receives every line of progress;
    ``checked`` is what :func:`check_inputs` returned for the same arguments, when the caller checked
    first (the CLI does, to exit 2 before anything else).

    Raises :class:`AuditInputError` for bad input, before anything heavy. A stage that fails
    later is recorded (its message in the report) and the audit ends with exit code 1."""
    import datasets

    from ..report import ReportInputs, search_over_results, write_report

    t_start = time.perf_counter()
    settings = {"model": str(model), **json.loads(json.dumps(dataclasses.asdict(cfg)))}  # as given, for audit.json
    checked = checked or check_inputs(model, cfg, out_dir)
    out, model, prepared = checked.out_dir, checked.model, checked.data
    facts = prepared.facts
    stages: list[dict] = []
    total = len(STEPS)
    log(f"auditing {model.folder} ({model.model_type}, {model.num_labels} classes) on {facts['source']}")
    log(f"writing into {out}")

    class Step:
        def __init__(self, i: int):
            self.name = STEPS[i]
            self.i = i

        def __enter__(self):
            self.t0 = time.perf_counter()
            log(f"[{self.i + 1}/{total}] {self.name} ...")
            return self

        def __exit__(self, et, exc, tb):
            s = time.perf_counter() - self.t0
            if et is None:
                stages.append({"name": self.name, "status": "ok", "seconds": s, "message": ""})
                log(f"      {self.name}: ok in {s:.1f} s")
                return False
            if issubclass(et, (KeyboardInterrupt, AuditInputError)):
                return False
            msg = f"{et.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            stages.append({"name": self.name, "status": "failed", "seconds": s, "message": msg})
            log(f"      {self.name}: FAILED after {s:.1f} s: {msg}")
            log("".join(traceback.format_exception(et, exc, tb, limit=-3)).rstrip())
            return True

    def skipped(i: int, why: str) -> None:
        stages.append({"name": STEPS[i], "status": "skipped", "seconds": 0.0, "message": why})
        log(f"[{i + 1}/{total}] {STEPS[i]}: skipped ({why})")

    doctor = None
    env_ok = False
    with Step(0):
        from ..env import run_doctor

        doctor = run_doctor()
        missing = [c for c in doctor.failures if c.name in AUDIT_NEEDS]
        for c in doctor.failures:
            if c.name not in AUDIT_NEEDS:
                log(f"      note: {c.name}: {c.value} (not needed for an audit)")
        if missing:
            log(doctor.as_text())
            raise RuntimeError("the environment is incomplete: " + "; ".join(f"{c.name}: {c.value}; {c.fix}" for c in missing))
        env_ok = True

    slice_set = None
    dd = None
    with Step(1):
        slice_set = audit_slices(cfg, model.class_names, prepared.scored)
        dd = datasets.DatasetDict(test=prepared.scored, train=prepared.calibration)
        sizes = {k: int(v.sum()) for k, v in slice_set.membership(prepared.scored).items()}
        log(f"      {facts['rows_in_file']} rows in the file: {facts['rows_scored']} scored, {facts['calibration_count']} held out "
            f"for calibration, {facts['rows_skipped']} skipped (no text or label); labels given as {facts['label_format']}")
        log("      slices: " + ", ".join(f"{k} {n}" for k, n in sizes.items()))

    export = fusion = None
    results: list = []
    search = None
    batch_dep: list[dict] = []
    if env_ok and dd is not None:
        with Step(2):
            from ..graph import run_export

            export = run_export(str(model.folder), cfg.export_config(), out / layout.EXPORT_DIR, data=dd)
            log(f"      {export.node_count} nodes, {export.size_mib:.1f} MiB; {export.validation.message}")
            if not export.validation.passed:
                raise RuntimeError(f"the exported graph does not reproduce the model: {export.validation.message}")
    else:
        skipped(2, "the environment check or the data step failed")
    if export is not None and export.validation.passed:
        with Step(3):
            from ..graph import run_fusion

            fusion = run_fusion(export, cfg.fusion_config(), out / layout.FUSION_DIR)
            fused = ", ".join(f"{k} {n}" for k, n in fusion.fused_op_counts.items()) or "nothing fused"
            log(f"      fused: {fused}")
            for d in fusion.diagnoses:
                log(f"      missing fusion: {d.text}")
            if not fusion.fused.validation.passed:
                log(f"      the fused graph failed validation ({fusion.fused.validation.message}); quantizing the exported graph")
        from ..flow import graph_to_quantize  # the rule the demo, the Workbench and the CLI follow

        graph = graph_to_quantize(export, fusion).path
        with Step(4):
            from ..quant import QuantConfig, prepare_baseline, run_quantization

            log(f"      FP32 graph: {graph.name}; scoring {facts['rows_scored']} rows once")
            base = prepare_baseline(graph, dd, out / layout.BASELINE, export=export, slices=slice_set, golden=False,
                                    calibration_samples=facts["calibration_count"], timing=cfg.timing(),
                                    batch_size=cfg.eval_batch_size, max_length=cfg.max_length)
            for name in cfg.presets:
                qcfg = dataclasses.replace(QuantConfig.preset(name), name=name)
                if qcfg.mode.value == "static":
                    qcfg = dataclasses.replace(qcfg, samples=facts["calibration_count"])
                res = run_quantization(None, qcfg, out / layout.quantize_dir(name), baseline=base, n_boot=cfg.n_boot, seed=cfg.seed,
                                       node_error_samples=cfg.node_error_samples if facts["calibration_count"] else 0)
                results.append(res)
                log(f"      {name}: {res.speedup:.2f}x FP32 speed, {res.size_mib:.1f} MiB (FP32 {res.fp32_size_mib:.1f}), accuracy "
                    f"{100 * res.accuracy:.1f}% ({100 * res.accuracy_delta:+.1f} points), {len(res.report.flips)} flipped")
                if qcfg.mode.value == "dynamic" and not batch_dep:
                    differ = batch_dependence(res.quantized_path, base.load_tokenizer(), prepared.scored, cfg.max_length,
                                              cfg.eval_batch_size, limit=64 if cfg.quick else 256)
                    n = min(64 if cfg.quick else 256, len(prepared.scored))
                    batch_dep.append({"variant": name, "n": n, "batch_a": 1, "batch_b": cfg.eval_batch_size, "differ": differ})
        if results:
            with Step(5):
                for r in results:
                    worst = r.report.worst_slices(include_small=cfg.include_small_slices)
                    w = next((d for d in worst if d.n), None)
                    if w is not None:
                        log(f"      {r.name}: worst slice {w.slice} (n={w.n}) {100 * w.delta:+.1f} points "
                            f"[{100 * w.ci_low:+.1f}, {100 * w.ci_high:+.1f}]")
            with Step(6):
                search = search_over_results(results, cfg.budget_overall, cfg.budget_slice, cfg.include_small_slices,
                                             out_dir=out / layout.SEARCH_DIR)
                log(f"      {search.message}")
        else:
            skipped(5, "no quantized variant")
            skipped(6, "no quantized variant")
    elif export is not None:
        for i in (3, 4, 5, 6):
            skipped(i, "the exported graph failed validation")
    else:
        for i in (3, 4, 5, 6):
            skipped(i, "needs the exported graph")

    runs.atomic_write_json(out / AUDIT_FILE, {"config": settings, "model": _model_dict(model), "data": facts, "stages": stages})
    log(f"[{total}/{total}] report ...")
    t0 = time.perf_counter()
    inputs = ReportInputs(
        kind="audit", title=f"Audit of {model.folder.name} on {Path(cfg.data).name}", run_dir=out,
        budget_overall=cfg.budget_overall, budget_per_slice=cfg.budget_slice, include_small_slices=cfg.include_small_slices,
        doctor=doctor, data=dict(facts, eval_batch_size=cfg.eval_batch_size), model=_model_dict(model), export=export,
        fusion=fusion, quant=results, search=search, stages=stages, batch_dependence=batch_dep,
        config=settings,
    )
    stages.append({"name": "report", "status": "ok", "seconds": 0.0, "message": ""})
    rpath, spath, summary = write_report(inputs, out)
    stages[-1]["seconds"] = time.perf_counter() - t0
    verdict = summary["verdict"]
    code = verdict["exit_code"]  # 1 (incomplete) when a step failed: the report decides, summary.json agrees
    log(f"      wrote {rpath} and {spath.name}")
    log(f"\nverdict: {verdict['text']}")
    return AuditResult(out, rpath, spath, verdict, code, stages, time.perf_counter() - t_start)


def _model_dict(m: ModelFacts) -> dict:
    return {"folder": str(m.folder), "model_type": m.model_type, "architectures": m.architectures,
            "num_labels": m.num_labels, "class_names": m.class_names}
