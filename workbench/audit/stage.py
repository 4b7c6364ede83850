"""The audit: ``run_audit(model, AuditConfig, out) -> AuditResult``, every step logged and recorded, the report last."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .. import runs
from ..flow.sequence import run_stages
from ..runtime.engine import scoring_engine
from ..runtime.progress import ProgressHook, scoring_progress
from ..workflows.stages import stages_for
from ..workflows.steps import DoctorStep, Job, QuantizeStep
from ..runs.layout import AUDIT_FILE
from .config import AUDIT_NEEDS, AuditConfig, AuditInputError, Log
from .inputs import CheckedInputs, audit_slices, check_inputs


@dataclass(frozen=True)
class AuditResult:
    out_dir: Path
    report_path: Optional[Path]
    summary_path: Optional[Path]
    verdict: dict
    exit_code: int
    stages: list = field(default_factory=list)
    seconds: float = 0.0


def batch_dependence(qpath: Path, tokenizer, examples, max_length: int, batch_size: int, limit: int = 256,
                     by_length: bool = False) -> dict[str, int]:
    """How many of the first ``limit`` examples get another label when scored one at a time instead of
    in batches of ``batch_size`` sorted by length (``"batch"``), and with ``by_length`` when those batches are
    taken in file order instead (``"order"``): dynamic INT8's per-batch activation scales."""
    from ..runtime.ortinfer import make_session, predict_dataset

    ds = examples.select(range(min(limit, len(examples))))
    session = make_session(qpath)

    def labels(batch: int, order: str):
        return predict_dataset(session, tokenizer, ds, max_length, batch, order=order,
                               label=f"{qpath.parent.name}, batches of {batch} in {order} order").argmax(-1)

    sorted_batches = labels(batch_size, "length")
    found = {"batch": int((labels(1, "length") != sorted_batches).sum())}
    if by_length:
        found["order"] = int((labels(batch_size, "file") != sorted_batches).sum())
    return found


def run_audit(model: str | Path, cfg: AuditConfig, out_dir: Optional[str | Path] = None, *, log: Log = print,
              checked: Optional[CheckedInputs] = None, progress: Optional[ProgressHook] = None) -> AuditResult:
    """Audit the classifier in ``model`` on ``cfg.data`` into ``out_dir`` (default ``runs/<stamp>-audit-<model>``).
    ``checked``: :func:`check_inputs`'s return for the same arguments when the caller checked first (the CLI, to exit 2
    before anything else). A stage that fails is recorded in the report and the audit exits 1."""
    import datasets

    t_start = time.perf_counter()
    settings = {"model": str(model), **json.loads(json.dumps(dataclasses.asdict(cfg)))}  # as given, for audit.json
    checked = checked or check_inputs(model, cfg, out_dir)
    facts = checked.data.facts
    log(f"auditing {checked.model.folder} ({checked.model.model_type}, {checked.model.num_labels} classes) on {facts['source']}")
    log(f"writing into {checked.out_dir}")
    configs = audit_configs(cfg, checked)
    hooks = AuditHooks(cfg, checked, configs["quantize"].slices, settings, log)
    job = Job(checked.out_dir, configs, log=log, hooks=hooks.hooks(), model=str(checked.model.folder),
              data=datasets.DatasetDict(test=checked.data.scored, train=checked.data.calibration), report=hooks.report)
    # engine ray: the rows scored on a pool of actors, shut down after; each graph's rows reported to ``progress``
    with scoring_engine(cfg.engine_config(), log=log), scoring_progress(progress):
        sequence = run_stages(stages_for("audit", job), log=log, style="steps", fatal=(AuditInputError,))
    stages = [{"name": o.name, "status": o.status, "seconds": o.seconds, "message": o.message} for o in sequence.outcomes]
    runs.atomic_write_json(checked.out_dir / AUDIT_FILE, {"config": settings, "model": hooks.model, "data": facts, "stages": stages[:-1]})
    report = sequence.results.get("report")
    if report is None:  # the report itself failed: nothing to decide the verdict with
        raise RuntimeError(f"the report was not written: {sequence.outcome('report').message}")
    rpath, spath, summary = report
    verdict = summary["verdict"]
    log(f"\nverdict: {verdict['text']}")  # exit code 1 (incomplete) when a step failed: the report decides, summary.json agrees
    return AuditResult(checked.out_dir, rpath, spath, verdict, verdict["exit_code"], stages, time.perf_counter() - t_start)


def audit_configs(cfg: AuditConfig, checked: CheckedInputs) -> dict:
    """Each stage's config of the audit route, from the audit's config and its checked inputs."""
    from ..quant import machine_preset

    calibration = checked.data.facts["calibration_count"]
    presets = {}
    for name in cfg.presets:
        q = machine_preset(name, name=name)
        if q.mode.value == "static":
            q = dataclasses.replace(q, calibration=dataclasses.replace(q.calibration, samples=calibration))
        presets[name] = q
    slices = audit_slices(cfg, checked.model.class_names, checked.data.scored)
    return {"doctor": DoctorStep(frozenset(AUDIT_NEEDS)), "export": cfg.export_config(), "fuse": cfg.fusion_config(),
            "quantize": QuantizeStep(cfg.baseline_config(calibration, cfg.timing()), presets,
                                     cfg.eval_config(None if calibration else 0), slices, length_rows=checked.data.scored),
            "evaluate": cfg.include_small_slices, "search": cfg.search_config()}


class AuditHooks:
    """What the audit adds after its stages: its log, the exported graph's check, batch dependence and ``audit.json``."""

    def __init__(self, cfg: AuditConfig, checked: CheckedInputs, slices, settings: dict, log: Log = print) -> None:
        from ..models.hub import model_name

        self.cfg, self.log, self.checked, self.slices = cfg, log, checked, slices
        m = checked.model
        self.facts, self.model = checked.data.facts, {"folder": str(m.folder), "model_type": m.model_type,
                                                      "architectures": m.architectures, "num_labels": m.num_labels,
                                                      "class_names": m.class_names}
        self.report = {"kind": "audit", "title": f"Audit of {model_name(checked.model.folder)} on {Path(cfg.data).name}",
                       "budget_overall": cfg.budget_overall, "budget_per_slice": cfg.budget_slice,
                       "include_small_slices": cfg.include_small_slices, "min_speedup": cfg.min_speedup,
                       "data": dict(self.facts, eval_batch_size=cfg.eval_batch_size), "model": self.model,
                       "batch_dependence": [], "config": settings}

    def hooks(self) -> dict:
        return {"data": self.data, "export": self.export, "fuse": self.fuse, "quantize": self.quantize}

    def data(self, st, dd) -> None:
        facts = self.facts
        sizes = {k: int(v.sum()) for k, v in self.slices.membership(dd["test"]).items()}
        self.log(f"      {facts['rows_in_file']} rows in the file: {facts['rows_scored']} scored, {facts['calibration_count']} held "
                 f"out for calibration, {facts['rows_skipped']} skipped (no text or label); labels given as {facts['label_format']}")
        self.log("      slices: " + ", ".join(f"{k} {n}" for k, n in sizes.items()))

    def export(self, st, export) -> None:
        if not export.validation.passed:
            raise RuntimeError(f"the exported graph does not reproduce the model: {export.validation.message}")

    def fuse(self, st, fusion) -> None:
        if not fusion.fused.validation.passed:
            self.log(f"      the fused graph failed validation ({fusion.fused.validation.message}); quantizing the exported graph")

    def quantize(self, st, quantized) -> None:
        """Dynamic INT8's batch effect, measured on the first dynamic variant."""
        base, results = quantized or (None, [])
        res = next((r for r in results if r.config.mode.value == "dynamic"), None)
        if res is None:
            return
        cfg, scored, name, found = self.cfg, self.checked.data.scored, res.name, self.report["batch_dependence"]
        n = min(64 if cfg.quick else 256, len(scored))
        differ = batch_dependence(res.quantized_path, base.load_tokenizer(), scored, cfg.max_length, cfg.eval_batch_size, limit=n,
                                  by_length=base.scoring_order == "length")
        found.append({"variant": name, "n": n, "batch_a": 1, "batch_b": cfg.eval_batch_size, "differ": differ["batch"]})
        if "order" in differ:
            found.append({"variant": name, "n": n, "batch_a": f"{cfg.eval_batch_size} sorted by length",
                          "batch_b": f"{cfg.eval_batch_size} in file order", "differ": differ["order"]})
            self.log(f"      {name}: {differ['order']} of {n} predictions differ between length-sorted and file-order batches")
