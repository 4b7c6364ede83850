"""The audit: ``run_audit(model, AuditConfig, out) -> AuditResult``, every step logged and recorded,
the report written at the end."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .. import runs
from ..runs import layout
from ..flow.sequence import Stage, run_stages
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
    from ..runtime.ortinfer import make_session, predict_dataset

    ds = examples.select(range(min(limit, len(examples))))
    session = make_session(qpath)
    a = predict_dataset(session, tokenizer, ds, max_length, 1).argmax(-1)
    b = predict_dataset(session, tokenizer, ds, max_length, batch_size).argmax(-1)
    return int((a != b).sum())


def order_dependence(qpath: Path, tokenizer, examples, max_length: int, batch_size: int, limit: int = 256) -> int:
    """How many of the first ``limit`` examples get another label when batches of ``batch_size``
    are sorted by length instead of taken in file order (dynamic INT8's batch effect, again)."""
    from ..runtime.ortinfer import make_session, predict_dataset

    ds = examples.select(range(min(limit, len(examples))))
    session = make_session(qpath)
    a = predict_dataset(session, tokenizer, ds, max_length, batch_size, order="file").argmax(-1)
    b = predict_dataset(session, tokenizer, ds, max_length, batch_size, order="length").argmax(-1)
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
    log(f"auditing {model.folder} ({model.model_type}, {model.num_labels} classes) on {facts['source']}")
    log(f"writing into {out}")
    env: dict = {}  # what the report takes besides the stages' results (the doctor's report)
    batch_dep: list[dict] = []

    def environment(st):
        from ..doctor.checks import run_doctor

        doctor = env["doctor"] = run_doctor()
        missing = [c for c in doctor.failures if c.name in AUDIT_NEEDS]
        for c in doctor.failures:
            if c.name not in AUDIT_NEEDS:
                log(f"      note: {c.name}: {c.value} (not needed for an audit)")
        if missing:
            log(doctor.as_text())
            raise RuntimeError("the environment is incomplete: " + "; ".join(f"{c.name}: {c.value}; {c.fix}" for c in missing))
        return doctor

    def data_and_slices(st):
        slice_set = audit_slices(cfg, model.class_names, prepared.scored)
        dd = datasets.DatasetDict(test=prepared.scored, train=prepared.calibration)
        sizes = {k: int(v.sum()) for k, v in slice_set.membership(prepared.scored).items()}
        log(f"      {facts['rows_in_file']} rows in the file: {facts['rows_scored']} scored, {facts['calibration_count']} held out "
            f"for calibration, {facts['rows_skipped']} skipped (no text or label); labels given as {facts['label_format']}")
        log("      slices: " + ", ".join(f"{k} {n}" for k, n in sizes.items()))
        return slice_set, dd

    def export_stage(st):
        from ..graph import run_export

        export = run_export(str(model.folder), cfg.export_config(), out / layout.EXPORT_DIR, data=st.inputs[STEPS[1]][1])
        log(f"      {export.node_count} nodes, {export.size_mib:.1f} MiB; {export.validation.message}")
        if not export.validation.passed:
            raise RuntimeError(f"the exported graph does not reproduce the model: {export.validation.message}")
        return export

    def fuse(st):
        from ..graph import run_fusion

        fusion = run_fusion(st.inputs[STEPS[2]], cfg.fusion_config(), out / layout.FUSION_DIR)
        fused = ", ".join(f"{k} {n}" for k, n in fusion.fused_op_counts.items()) or "nothing fused"
        log(f"      fused: {fused}")
        for d in fusion.diagnoses:
            log(f"      missing fusion: {d.text}")
        if not fusion.fused.validation.passed:
            log(f"      the fused graph failed validation ({fusion.fused.validation.message}); quantizing the exported graph")
        return fusion

    def quantize(st):
        from ..flow.handoffs import graph_to_quantize  # the rule the demo, the Workbench and the CLI follow
        from ..quant import BaselineConfig, EvalConfig, QuantConfig, prepare_baseline, run_quantization

        from ..data.token_lengths import length_stats, with_data_shapes

        slice_set, dd = st.inputs[STEPS[1]]
        graph = graph_to_quantize(st.inputs[STEPS[2]], st.inputs.get(STEPS[3])).path
        lengths = length_stats(prepared.scored, st.inputs[STEPS[2]].load_tokenizer(), cfg.max_length)
        timing = cfg.timing()
        timing = dataclasses.replace(timing, shapes=with_data_shapes(timing.shapes, lengths))
        log(f"      the data's token lengths: {lengths.text()}; timed at "
            + ", ".join(f"{b}x{s}" for b, s in timing.shapes) + " (batch 1 at the median and 95th percentile)")
        log(f"      FP32 graph: {graph.name}; scoring {facts['rows_scored']} rows once, in batches sorted by length")
        bcfg = BaselineConfig(golden=False, calibration_samples=facts["calibration_count"], timing=timing,
                              batch_size=cfg.eval_batch_size, max_length=cfg.max_length)
        base = prepare_baseline(graph, dd, out / layout.BASELINE, bcfg, export=st.inputs[STEPS[2]], slices=slice_set)
        if base.scoring_work is not None:
            log(f"      {base.scoring_work.text()}")
        if base.fp32_scoring is not None:
            log(f"      FP32 scoring: {base.fp32_scoring.text()}")
        results: list = []
        ev = EvalConfig(n_boot=cfg.n_boot, seed=cfg.seed,
                        node_error_samples=cfg.node_error_samples if facts["calibration_count"] else 0)
        for name in cfg.presets:
            qcfg = dataclasses.replace(QuantConfig.preset(name), name=name)
            if qcfg.mode.value == "static":
                qcfg = dataclasses.replace(qcfg, samples=facts["calibration_count"])
            res = run_quantization(base, qcfg, out / layout.quantize_dir(name), evaluation=ev)
            results.append(res)
            st.partial = results  # the drift and the search take what was quantized before a failure
            log(f"      {name}: {res.speedup:.2f}x FP32 speed, {res.size_mib:.1f} MiB (FP32 {res.fp32_size_mib:.1f}), accuracy "
                f"{100 * res.accuracy:.1f}% ({100 * res.accuracy_delta:+.1f} points), {len(res.report.flips)} flipped")
            if res.scoring is not None:
                log(f"      {name} scoring: {res.scoring.text()}")
            if qcfg.mode.value == "dynamic" and not batch_dep:
                differ = batch_dependence(res.quantized_path, base.load_tokenizer(), prepared.scored, cfg.max_length,
                                          cfg.eval_batch_size, limit=64 if cfg.quick else 256)
                n = min(64 if cfg.quick else 256, len(prepared.scored))
                batch_dep.append({"variant": name, "n": n, "batch_a": 1, "batch_b": cfg.eval_batch_size, "differ": differ})
                if base.scoring_order == "length":
                    moved = order_dependence(res.quantized_path, base.load_tokenizer(), prepared.scored, cfg.max_length,
                                             cfg.eval_batch_size, limit=n)
                    batch_dep.append({"variant": name, "n": n, "batch_a": f"{cfg.eval_batch_size} sorted by length",
                                      "batch_b": f"{cfg.eval_batch_size} in file order", "differ": moved})
                    log(f"      {name}: {moved} of {n} predictions differ between length-sorted and file-order batches")
        return results or None  # no variant: the drift and the search are skipped

    def slice_drift(st):
        for r in st.inputs[STEPS[4]]:
            worst = r.report.worst_slices(include_small=cfg.include_small_slices)
            w = next((d for d in worst if d.n), None)
            if w is not None:
                log(f"      {r.name}: worst slice {w.slice} (n={w.n}) {100 * w.delta:+.1f} points "
                    f"[{100 * w.ci_low:+.1f}, {100 * w.ci_high:+.1f}]")
        return True

    def search_stage(st):
        found = search_over_results(st.inputs[STEPS[4]], cfg.budget_overall, cfg.budget_slice, cfg.include_small_slices,
                                    out_dir=out / layout.SEARCH_DIR, min_speedup=cfg.min_speedup)
        log(f"      {found.message}")
        return found

    report_out: dict = {}

    def report(st):
        done = st.inputs
        stages = [{"name": o.name, "status": o.status, "seconds": o.seconds, "message": o.message} for o in st.before]
        runs.atomic_write_json(out / AUDIT_FILE, {"config": settings, "model": _model_dict(model), "data": facts, "stages": stages})
        inputs = ReportInputs(
            kind="audit", title=f"Audit of {model.folder.name} on {Path(cfg.data).name}", run_dir=out,
            budget_overall=cfg.budget_overall, budget_per_slice=cfg.budget_slice, include_small_slices=cfg.include_small_slices,
            min_speedup=cfg.min_speedup, doctor=env.get("doctor"), data=dict(facts, eval_batch_size=cfg.eval_batch_size),
            model=_model_dict(model),
            export=done.get(STEPS[2]), fusion=done.get(STEPS[3]), quant=done.get(STEPS[4]) or [], search=done.get(STEPS[6]),
            stages=stages + [{"name": "report", "status": "ok", "seconds": 0.0, "message": ""}],
            batch_dependence=batch_dep, config=settings,
        )
        try:
            rpath, spath, summary = write_report(inputs, out)
        except Exception as exc:  # the verdict needs the report: the front hears the original error
            report_out["error"] = exc
            raise
        report_out.update(rpath=rpath, spath=spath, summary=summary)
        log(f"      wrote {rpath} and {spath.name}")
        return rpath

    # the audit's list (STEPS, the report last, whatever happened before it); what each step takes
    # from the one before is workbench.flow.handoffs's rule
    sequence = run_stages([
        Stage(STEPS[0], environment),
        Stage(STEPS[1], data_and_slices),
        Stage(STEPS[2], export_stage, needs=(STEPS[0], STEPS[1]), skip_reason="the environment check or the data step failed"),
        Stage(STEPS[3], fuse, needs=(STEPS[2],), skip_reason="needs an exported graph that passed validation"),
        Stage(STEPS[4], quantize, needs=(STEPS[1], STEPS[2]), skip_reason="needs an exported graph that passed validation"),
        Stage(STEPS[5], slice_drift, needs=(STEPS[4],), skip_reason="no quantized variant"),
        Stage(STEPS[6], search_stage, needs=(STEPS[4],), skip_reason="no quantized variant"),
        Stage(STEPS[7], report, finally_=True),
    ], log=log, style="steps", fatal=(AuditInputError,))
    if "summary" not in report_out:  # the report itself failed: nothing to decide the verdict with
        raise report_out["error"]
    stages = [{"name": o.name, "status": o.status, "seconds": o.seconds, "message": o.message} for o in sequence.outcomes]
    verdict = report_out["summary"]["verdict"]
    code = verdict["exit_code"]  # 1 (incomplete) when a step failed: the report decides, summary.json agrees
    log(f"\nverdict: {verdict['text']}")
    return AuditResult(out, report_out["rpath"], report_out["spath"], verdict, code, stages, time.perf_counter() - t_start)


def _model_dict(m: ModelFacts) -> dict:
    return {"folder": str(m.folder), "model_type": m.model_type, "architectures": m.architectures,
            "num_labels": m.num_labels, "class_names": m.class_names}
