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
from ..flow.sequence import run_stages
from ..runtime.engine import scoring_engine
from ..runtime.progress import ProgressHook, scoring_progress
from ..workflows.stages import stages_for
from .config import AUDIT_FILE, AUDIT_NEEDS, AuditConfig, AuditInputError, Log
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
    a = predict_dataset(session, tokenizer, ds, max_length, 1, label=f"{qpath.parent.name}, one row at a time").argmax(-1)
    b = predict_dataset(session, tokenizer, ds, max_length, batch_size, label=f"{qpath.parent.name}, batches again").argmax(-1)
    return int((a != b).sum())


def order_dependence(qpath: Path, tokenizer, examples, max_length: int, batch_size: int, limit: int = 256) -> int:
    """How many of the first ``limit`` examples get another label when batches of ``batch_size``
    are sorted by length instead of taken in file order (dynamic INT8's batch effect, again)."""
    from ..runtime.ortinfer import make_session, predict_dataset

    ds = examples.select(range(min(limit, len(examples))))
    session = make_session(qpath)
    a = predict_dataset(session, tokenizer, ds, max_length, batch_size, order="file",
                        label=f"{qpath.parent.name}, file order").argmax(-1)
    b = predict_dataset(session, tokenizer, ds, max_length, batch_size, order="length",
                        label=f"{qpath.parent.name}, length order").argmax(-1)
    return int((a != b).sum())


def run_audit(model: str | Path, cfg: AuditConfig, out_dir: Optional[str | Path] = None, *, log: Log = print,
              checked: Optional[CheckedInputs] = None, progress: Optional[ProgressHook] = None) -> AuditResult:
    """Audit the classifier in the folder ``model`` on ``cfg.data`` into ``out_dir`` (default
    ``runs/<stamp>-audit-<model>``); see the package doc. ``log`` receives every line of progress;
    ``checked`` is what :func:`check_inputs` returned for the same arguments, when the caller checked
    first (the CLI does, to exit 2 before anything else). ``progress`` hears each graph's rows as they are
    scored, on either engine (:mod:`workbench.runtime.progress`).

    The stages are the registry's audit route (:data:`workbench.workflows.stages.AUDIT_STAGES`).
    Raises :class:`AuditInputError` for bad input, before anything heavy. A stage that fails
    later is recorded (its message in the report) and the audit ends with exit code 1."""
    t_start = time.perf_counter()
    settings = {"model": str(model), **json.loads(json.dumps(dataclasses.asdict(cfg)))}  # as given, for audit.json
    checked = checked or check_inputs(model, cfg, out_dir)
    facts = checked.data.facts
    log(f"auditing {checked.model.folder} ({checked.model.model_type}, {checked.model.num_labels} classes) on {facts['source']}")
    log(f"writing into {checked.out_dir}")
    # what each stage takes from the one before is workbench.flow.handoffs's rule
    audit = AuditStages(cfg, checked, settings, log)
    # engine ray: the rows scored on a pool of actors, shut down after; each graph's rows reported to ``progress``
    with scoring_engine(cfg.engine_config(), log=log), scoring_progress(progress):
        sequence = run_stages(stages_for("audit", audit.bodies()), log=log, style="steps", fatal=(AuditInputError,))
    if "summary" not in audit.written:  # the report itself failed: nothing to decide the verdict with
        raise audit.written["error"]
    stages = [{"name": o.name, "status": o.status, "seconds": o.seconds, "message": o.message} for o in sequence.outcomes]
    verdict = audit.written["summary"]["verdict"]
    code = verdict["exit_code"]  # 1 (incomplete) when a step failed: the report decides, summary.json agrees
    log(f"\nverdict: {verdict['text']}")
    return AuditResult(checked.out_dir, audit.written["rpath"], audit.written["spath"], verdict, code, stages,
                       time.perf_counter() - t_start)


class AuditStages:
    """The bodies of the audit's stages (``body(record) -> result``, the audit route of
    :mod:`workbench.workflows.stages`) over the checked inputs; ``env`` keeps the doctor's report,
    ``batch_dep`` the batch-dependence counts, ``written`` what the report stage wrote (or its error)."""

    def __init__(self, cfg: AuditConfig, checked: CheckedInputs, settings: dict, log: Log = print) -> None:
        self.cfg, self.settings, self.log = cfg, settings, log
        self.out, self.model, self.prepared = checked.out_dir, checked.model, checked.data
        self.facts = self.prepared.facts
        self.env: dict = {}
        self.batch_dep: list[dict] = []
        self.written: dict = {}

    def bodies(self) -> dict:
        return {"doctor": self.doctor, "data": self.data, "export": self.export, "fuse": self.fuse, "quantize": self.quantize,
                "evaluate": self.evaluate, "search": self.search, "ship": self.ship, "report": self.report}

    def doctor(self, st):
        from ..doctor.checks import run_doctor

        doctor = self.env["doctor"] = run_doctor()
        missing = [c for c in doctor.failures if c.name in AUDIT_NEEDS]
        for c in doctor.failures:
            if c.name not in AUDIT_NEEDS:
                self.log(f"      note: {c.name}: {c.value} (not needed for an audit)")
        if missing:
            self.log(doctor.as_text())
            raise RuntimeError("the environment is incomplete: " + "; ".join(f"{c.name}: {c.value}; {c.fix}" for c in missing))
        return doctor

    def data(self, st):
        import datasets

        prepared, facts = self.prepared, self.facts
        slice_set = audit_slices(self.cfg, self.model.class_names, prepared.scored)
        dd = datasets.DatasetDict(test=prepared.scored, train=prepared.calibration)
        sizes = {k: int(v.sum()) for k, v in slice_set.membership(prepared.scored).items()}
        self.log(f"      {facts['rows_in_file']} rows in the file: {facts['rows_scored']} scored, {facts['calibration_count']} held "
                 f"out for calibration, {facts['rows_skipped']} skipped (no text or label); labels given as {facts['label_format']}")
        self.log("      slices: " + ", ".join(f"{k} {n}" for k, n in sizes.items()))
        return slice_set, dd

    def export(self, st):
        from ..graph import run_export

        export = run_export(str(self.model.folder), self.cfg.export_config(), self.out / layout.EXPORT_DIR, data=st.inputs["data"][1])
        self.log(f"      {export.node_count} nodes, {export.size_mib:.1f} MiB; {export.validation.message}")
        if not export.validation.passed:
            raise RuntimeError(f"the exported graph does not reproduce the model: {export.validation.message}")
        return export

    def fuse(self, st):
        from ..graph import run_fusion

        fusion = run_fusion(st.inputs["export"], self.cfg.fusion_config(), self.out / layout.FUSION_DIR)
        fused = ", ".join(f"{k} {n}" for k, n in fusion.fused_op_counts.items()) or "nothing fused"
        self.log(f"      fused: {fused}")
        for d in fusion.diagnoses:
            self.log(f"      missing fusion: {d.text}")
        if not fusion.fused.validation.passed:
            self.log(f"      the fused graph failed validation ({fusion.fused.validation.message}); quantizing the exported graph")
        return fusion

    def quantize(self, st):
        from ..quant import machine_preset, run_quantization
        from ..quant.config import machine_defaults

        cfg, facts, log = self.cfg, self.facts, self.log
        base = self._baseline(st)
        results: list = []
        ev = cfg.eval_config(None if facts["calibration_count"] else 0)  # no calibration rows: no per-node error
        log(f"      INT8 weights on this CPU: {machine_defaults().why}")  # the presets follow it (each variant's notes say so)
        for name in cfg.presets:
            qcfg = machine_preset(name, name=name)
            if qcfg.mode.value == "static":
                qcfg = dataclasses.replace(qcfg, calibration=dataclasses.replace(qcfg.calibration, samples=facts["calibration_count"]))
            res = run_quantization(base, qcfg, self.out / layout.quantize_dir(name), evaluation=ev)
            results.append(res)
            st.partial = results  # the drift and the search take what was quantized before a failure
            log(f"      {name}: {res.speedup:.2f}x FP32 speed, {res.size_mib:.1f} MiB (FP32 {res.fp32_size_mib:.1f}), accuracy "
                f"{100 * res.accuracy:.1f}% ({100 * res.accuracy_delta:+.1f} points), {len(res.report.flips)} flipped")
            if res.scoring is not None:
                log(f"      {name} scoring: {res.scoring.text()}")
            if qcfg.mode.value == "dynamic" and not self.batch_dep:
                self._measure_batch_dependence(name, res, base)
        return results or None  # no variant: the drift and the search are skipped

    def _baseline(self, st):
        """The FP32 graph's baseline (flow's graph to quantize), timed at the data's own token lengths."""
        from ..data.token_lengths import length_stats, with_data_shapes
        from ..flow.handoffs import graph_to_quantize  # the rule the demo, the Workbench and the CLI follow
        from ..quant import prepare_baseline

        cfg, facts = self.cfg, self.facts
        slice_set, dd = st.inputs["data"]
        graph = graph_to_quantize(st.inputs["export"], st.inputs.get("fuse")).path
        lengths = length_stats(self.prepared.scored, st.inputs["export"].load_tokenizer(), cfg.max_length)
        timing = cfg.timing()
        timing = dataclasses.replace(timing, shapes=with_data_shapes(timing.shapes, lengths))
        self.log(f"      the data's token lengths: {lengths.text()}; timed at "
                 + ", ".join(f"{b}x{s}" for b, s in timing.shapes) + " (batch 1 at the median and 95th percentile)")
        self.log(f"      FP32 graph: {graph.name}; scoring {facts['rows_scored']} rows once, in batches sorted by length")
        base = prepare_baseline(graph, dd, self.out / layout.BASELINE, cfg.baseline_config(facts["calibration_count"], timing),
                                export=st.inputs["export"], slices=slice_set)
        if base.scoring_work is not None:
            self.log(f"      {base.scoring_work.text()}")
        if base.fp32_scoring is not None:
            self.log(f"      FP32 scoring: {base.fp32_scoring.text()}")
        return base

    def _measure_batch_dependence(self, name: str, res, base) -> None:
        cfg, scored = self.cfg, self.prepared.scored
        limit = 64 if cfg.quick else 256
        differ = batch_dependence(res.quantized_path, base.load_tokenizer(), scored, cfg.max_length, cfg.eval_batch_size, limit=limit)
        n = min(limit, len(scored))
        self.batch_dep.append({"variant": name, "n": n, "batch_a": 1, "batch_b": cfg.eval_batch_size, "differ": differ})
        if base.scoring_order == "length":
            moved = order_dependence(res.quantized_path, base.load_tokenizer(), scored, cfg.max_length, cfg.eval_batch_size, limit=n)
            self.batch_dep.append({"variant": name, "n": n, "batch_a": f"{cfg.eval_batch_size} sorted by length",
                                   "batch_b": f"{cfg.eval_batch_size} in file order", "differ": moved})
            self.log(f"      {name}: {moved} of {n} predictions differ between length-sorted and file-order batches")

    def evaluate(self, st):
        """The slice drift: each variant's worst slice, with its interval."""
        for r in st.inputs["quantize"]:
            worst = r.report.worst_slices(include_small=self.cfg.include_small_slices)
            w = next((d for d in worst if d.n), None)
            if w is not None:
                self.log(f"      {r.name}: worst slice {w.slice} (n={w.n}) {100 * w.delta:+.1f} points "
                         f"[{100 * w.ci_low:+.1f}, {100 * w.ci_high:+.1f}]")
        return True

    def search(self, st):
        from ..quant.search import search_results

        found = search_results(st.inputs["quantize"], self.cfg.search_config(), self.out / layout.SEARCH_DIR)
        self.log(f"      {found.message}")
        return found

    def ship(self, st):
        """The graph the verdict keeps (the chosen INT8 variant, else the FP32 graph measured) into chosen/,
        with its tokenizer, labels, settings.json and a predict.py that needs no PyTorch."""
        from ..quant.ship import ship_search

        shipped = ship_search(st.inputs["search"], self.out / layout.CHOSEN_DIR, unfused=self.out / layout.EXPORTED_GRAPH)
        self.log(f"      {shipped.text}")
        return shipped

    def report(self, st):
        from ..models.hub import model_name
        from ..report import ReportInputs, write_report

        cfg, out, done, model = self.cfg, self.out, st.inputs, _model_dict(self.model)
        stages = [{"name": o.name, "status": o.status, "seconds": o.seconds, "message": o.message} for o in st.before]
        runs.atomic_write_json(out / AUDIT_FILE, {"config": self.settings, "model": model, "data": self.facts, "stages": stages})
        inputs = ReportInputs(
            kind="audit", title=f"Audit of {model_name(self.model.folder)} on {Path(cfg.data).name}", run_dir=out,
            budget_overall=cfg.budget_overall, budget_per_slice=cfg.budget_slice, include_small_slices=cfg.include_small_slices,
            min_speedup=cfg.min_speedup, doctor=self.env.get("doctor"), data=dict(self.facts, eval_batch_size=cfg.eval_batch_size),
            model=model, export=done.get("export"), fusion=done.get("fuse"), quant=done.get("quantize") or [],
            search=done.get("search"), stages=stages + [{"name": "report", "status": "ok", "seconds": 0.0, "message": ""}],
            batch_dependence=self.batch_dep, config=self.settings,
        )
        try:
            rpath, spath, summary = write_report(inputs, out)
        except Exception as exc:  # the verdict needs the report: the front hears the original error
            self.written["error"] = exc
            raise
        self.written.update(rpath=rpath, spath=spath, summary=summary)
        self.log(f"      wrote {rpath} and {spath.name}")
        return rpath


def _model_dict(m: ModelFacts) -> dict:
    return {"folder": str(m.folder), "model_type": m.model_type, "architectures": m.architectures,
            "num_labels": m.num_labels, "class_names": m.class_names}
