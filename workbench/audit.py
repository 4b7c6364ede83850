"""Audit someone else's classifier in one call: every row of their file scored, one report.

``run_audit(AuditConfig(model=FOLDER, data=FILE, ...)) -> AuditResult`` (``workbench audit`` is
a thin front over it):

    check the inputs (fast, nothing heavy) -> environment -> data and slices -> export and
    validate -> fuse -> quantize with the presets -> per-slice drift -> search -> report

- **Every row is scored.** No training and no train/validation/test split: all rows with a text
  and a label are scored, except, when a static preset is asked for, a seeded calibration
  subset (at most ``calibration_size`` rows and ``calibration_fraction`` of the file) that is
  held out of the scoring and named, row by row, in the report.
- **Labels** may be the model's class names or its ids; they are mapped through the model's
  ``id2label``/``label2id`` (``config.json``); any number of classes.
- **Slices**: one per value of each ``slice_columns`` column, plus the built-in text slices
  (negation, contrast, length, punctuation) and one per class. (The built-in "rare words"
  slice is left out: it is defined against a training set, which an audit does not have.)
- **Bad input** raises :class:`AuditInputError` before anything heavy runs (no export, no
  model weights loaded): no such folder, not a sequence-classification model, an architecture
  the exporter does not handle, label values the model does not know (both sets listed),
  missing columns (the columns found listed), an empty or unreadable file.
- **Verdict and exit code** (:attr:`AuditResult.exit_code`): 0 when a quantized variant meets
  both budgets, 3 when none does, 1 when a stage failed; bad input is 2 (the CLI). The FP32
  graph is the reference, never a candidate.

Everything lands in ``out_dir``: ``export/``, ``fusion/``, ``quantize/<preset>/``,
``search/search.json``, ``audit.json`` (the config and data facts), and the report
(:mod:`workbench.report`): ``report.html`` and ``summary.json``, written atomically at the end,
so a re-run into the same folder leaves the previous report in place until the new one is done.
"""

from __future__ import annotations

import dataclasses
import json
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from . import runs
from .graph import ExportConfig
from .graph import FusionConfig
from .quant import QuantConfig, TimingConfig

Log = Callable[[str], None]
AUDIT_FILE = "audit.json"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")
DEFAULT_PRESETS = ("dynamic", "dynamic-per-channel", "static")
# The environment checks an audit depends on (training pieces such as ORTModule's extensions are not).
AUDIT_NEEDS = ("python", "torch", "transformers", "onnxruntime", "execution providers", "ort transformer optimizer", "onnx exporter")
STEPS = ("environment", "data and slices", "export and validate", "fuse", "quantize", "slice drift", "search", "report")


class AuditInputError(ValueError):
    """Input an audit cannot use (exit code 2); the message says what was given and what to do."""


@dataclass(frozen=True)
class AuditConfig:
    """What to audit and how. ``budget_overall``/``budget_slice`` are fractions of accuracy
    (0.01 = one point) a quantized variant may lose overall / on any slice big enough to judge
    (a negative budget demands an improvement). ``quick`` times less and bootstraps less."""

    model: str
    data: str
    text_column: str = "text"
    label_column: str = "label"
    slice_columns: tuple[str, ...] = ()
    presets: tuple[str, ...] = DEFAULT_PRESETS
    budget_overall: float = 0.01
    budget_slice: float = 0.02
    include_small_slices: bool = False
    quick: bool = False
    calibration_size: int = 128
    calibration_fraction: float = 0.2
    seed: int = 0
    n_boot: int = 1000
    eval_batch_size: int = 32
    max_length: int = 128
    node_error_samples: int = 16

    def __post_init__(self) -> None:
        object.__setattr__(self, "slice_columns", tuple(self.slice_columns))
        object.__setattr__(self, "presets", tuple(self.presets))
        known = QuantConfig.presets()
        bad = [p for p in self.presets if p not in known]
        if bad or not self.presets:
            raise AuditInputError(f"unknown quantization preset(s) {bad or '(none given)'}; presets: {list(known)}")
        for name in ("budget_overall", "budget_slice"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not -1.0 <= v <= 1.0:
                raise AuditInputError(f"{name} (--{name.replace('_', '-')}) is a fraction of accuracy between -1 and 1 "
                                      f"(0.01 = one point), got {v!r}")
        if not 8 <= self.calibration_size <= 100_000:
            raise AuditInputError(f"calibration_size must be from 8 to 100000 rows, got {self.calibration_size}")
        if not 0.0 < self.calibration_fraction <= 0.5:
            raise AuditInputError(f"calibration_fraction must be in (0, 0.5], got {self.calibration_fraction}")
        for name in ("n_boot", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise AuditInputError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 8 <= self.max_length <= 4096:
            raise AuditInputError(f"max_length must be from 8 to 4096 tokens, got {self.max_length}")

    @property
    def static_presets(self) -> list[str]:
        return [p for p in self.presets if QuantConfig.preset(p).mode.value == "static"]

    def export_config(self) -> ExportConfig:
        return ExportConfig(max_length=self.max_length, validation_split="test",
                            validation_examples=32 if self.quick else 64)

    def fusion_config(self) -> FusionConfig:
        if self.quick:
            return FusionConfig.quick(variants=("unoptimized", "ort_all", "transformer"))
        return FusionConfig(variants=("unoptimized", "ort_all", "transformer"), shapes=((1, self.max_length), (8, self.max_length)))

    def timing(self) -> TimingConfig:
        return TimingConfig.quick() if self.quick else TimingConfig(shapes=((1, self.max_length),))


# ----------------------------------------------------------------------------------------------
# checking the inputs (fast: config.json, the tokenizer, the file; no weights, no export)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelFacts:
    folder: Path
    model_type: str
    architectures: list[str]
    id2label: dict[int, str]
    num_labels: int

    @property
    def class_names(self) -> list[str]:
        return [self.id2label[i] for i in range(self.num_labels)]


def check_model(folder: str) -> ModelFacts:
    """Is ``folder`` a local Hugging Face sequence classifier the exporter handles?"""
    from .models import SUPPORTED_MODEL_TYPES

    path = Path(folder).expanduser()
    if not path.exists():
        raise AuditInputError(f"model folder not found: {folder!r}; give a local Hugging Face model folder "
                              "(config.json, weights, tokenizer files), e.g. one written by save_pretrained")
    if not path.is_dir():
        raise AuditInputError(f"--model {folder!r} is a file, not a folder; give the folder save_pretrained wrote")
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        found = sorted(p.name for p in path.iterdir())[:12]
        raise AuditInputError(f"{path} is not a Hugging Face model folder: no config.json (found: {found})")
    try:
        config = json.loads(cfg_file.read_text())
    except (OSError, ValueError) as exc:
        raise AuditInputError(f"cannot read {cfg_file}: {exc}") from exc
    archs = [str(a) for a in (config.get("architectures") or [])]
    model_type = str(config.get("model_type") or "")
    if not archs or not any(a.endswith("ForSequenceClassification") for a in archs):
        raise AuditInputError(
            f"{path} is not a sequence-classification model: config.json names architectures {archs or '(none)'}, "
            "expected one ending in ForSequenceClassification. Audit a fine-tuned classifier (e.g. saved from "
            "AutoModelForSequenceClassification with save_pretrained), not a base encoder")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise AuditInputError(
            f"architecture {archs[0]} (model_type {model_type!r}) in {path} is not one the exporter handles; "
            f"supported model types: {list(SUPPORTED_MODEL_TYPES)}")
    if not any((path / w).is_file() for w in WEIGHT_FILES):
        raise AuditInputError(f"no weights in {path}: expected one of {list(WEIGHT_FILES)}")
    raw = config.get("id2label") or {}
    try:
        id2label = {int(k): str(v) for k, v in raw.items()}
    except (TypeError, ValueError):
        raise AuditInputError(f"config.json in {path} has id2label keys that are not integers: {list(raw)[:5]}") from None
    n = int(config.get("num_labels") or len(id2label) or 2)
    n = max(n, len(id2label))
    id2label = {i: id2label.get(i, f"LABEL_{i}") for i in range(n)}
    if n < 2:
        raise AuditInputError(f"the model in {path} has {n} label(s); a classifier needs at least two")
    try:
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:  # transformers raises OSError, ValueError, TypeError... for a broken tokenizer
        raise AuditInputError(f"no usable tokenizer in {path} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                              "save it there with tokenizer.save_pretrained(folder)") from exc
    return ModelFacts(path.resolve(), model_type, archs, id2label, n)


def _label_key(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v).strip()


def map_labels(values, model: ModelFacts, column: str) -> tuple[np.ndarray, str]:
    """The file's labels as the model's ids: by name (id2label/label2id) or, failing that, by id."""
    keys = [_label_key(v) for v in values]
    uniq = sorted(set(keys))
    by_name = {name: i for i, name in model.id2label.items()}
    if all(u in by_name for u in uniq):
        return np.array([by_name[k] for k in keys], dtype=np.int64), "names"
    ids = {}
    for u in uniq:
        try:
            ids[u] = int(u)
        except ValueError:
            pass
    if len(ids) == len(uniq) and all(i in model.id2label for i in ids.values()):
        return np.array([ids[k] for k in keys], dtype=np.int64), "ids"
    unknown = [u for u in uniq if u not in by_name and not (u in ids and ids[u] in model.id2label)]
    raise AuditInputError(
        f"label values in column {column!r} that the model does not know: {unknown[:20]}{' ...' if len(unknown) > 20 else ''}; "
        f"the model's labels (id: name): {model.id2label}. Give the labels as these names or ids")


@dataclass(frozen=True)
class PreparedData:
    """The rows an audit scores and the rows it calibrates on, with the facts the report states."""

    scored: Any  # datasets.Dataset: text, label, row, slice columns
    calibration: Any  # datasets.Dataset: text, label, row (maybe empty)
    facts: dict


def prepare_data(cfg: AuditConfig, model: ModelFacts) -> PreparedData:
    """Read the file, check the columns and labels, choose the seeded calibration rows."""
    import datasets
    import pandas as pd

    from .data import DataError, read_table

    try:
        df = read_table(cfg.data)
    except DataError as exc:
        raise AuditInputError(str(exc)) from exc
    cols = [str(c) for c in df.columns]
    missing = [c for c in (cfg.text_column, cfg.label_column, *cfg.slice_columns) if c not in df.columns]
    if missing:
        raise AuditInputError(f"column(s) {missing} not in {cfg.data}; the file has columns {cols}. "
                              "Name them with --text-column, --label-column and --slice-column")
    clash = [c for c in cfg.slice_columns if c in ("text", "label", "row", cfg.text_column, cfg.label_column)]
    if clash:
        raise AuditInputError(f"slice column(s) {clash} cannot be the text or label column (or 'row')")
    text = df[cfg.text_column]
    has_text = text.map(lambda v: isinstance(v, str) and v.strip() != "")
    has_label = df[cfg.label_column].notna()
    if not has_text.any():
        raise AuditInputError(f"{cfg.data}: column {cfg.text_column!r} holds no text (first values: "
                              f"{text.head(3).tolist()}); choose the column with the sentences")
    keep = has_text & has_label
    skipped = [int(i) for i in np.flatnonzero(~keep.to_numpy())]
    usable = df[keep]
    if usable.empty:
        raise AuditInputError(f"{cfg.data}: no row has both a text and a label")
    labels, fmt = map_labels(usable[cfg.label_column].tolist(), model, cfg.label_column)
    frame = pd.DataFrame({"text": usable[cfg.text_column].str.strip().to_numpy(), "label": labels,
                          "row": np.flatnonzero(keep.to_numpy()).astype(np.int64)})
    for c in cfg.slice_columns:
        frame[c] = usable[c].to_numpy()
        n_values = frame[c].nunique(dropna=True)
        if n_values > 20 and not pd.api.types.is_bool_dtype(frame[c]):
            raise AuditInputError(f"slice column {c!r} has {n_values} distinct values (at most 20: one slice per value); "
                                  "bucket it into fewer groups first")

    n_calib = 0
    if cfg.static_presets:
        n_calib = min(cfg.calibration_size, int(len(frame) * cfg.calibration_fraction))
        n_calib -= n_calib % 8  # static calibration runs in batches of 8
        if n_calib < 8:
            raise AuditInputError(
                f"{cfg.data} has {len(frame)} usable rows: too few to hold out calibration rows for the static preset(s) "
                f"{cfg.static_presets} (need at least {int(np.ceil(8 / cfg.calibration_fraction))}); use dynamic presets only")
    order = np.random.default_rng(cfg.seed).permutation(len(frame))
    calib_idx = np.sort(order[:n_calib])
    mask = np.zeros(len(frame), dtype=bool)
    mask[calib_idx] = True
    names = model.class_names
    features = {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=names), "row": datasets.Value("int64")}
    from .data import _feature_for

    for c in cfg.slice_columns:
        features[c] = _feature_for(frame[c])
    feats = datasets.Features(features)
    scored = datasets.Dataset.from_pandas(frame[~mask].reset_index(drop=True), features=feats, preserve_index=False)
    calib = datasets.Dataset.from_pandas(frame[mask].reset_index(drop=True), features=feats, preserve_index=False)
    counts = np.bincount(np.asarray(scored["label"], dtype=np.int64), minlength=len(names))
    facts = {
        "source": str(Path(cfg.data).resolve()), "text_column": cfg.text_column, "label_column": cfg.label_column,
        "slice_columns": list(cfg.slice_columns), "label_format": fmt, "rows_in_file": int(len(df)),
        "rows_skipped": len(skipped), "skipped_rows": skipped, "rows_scored": int(len(scored)),
        "calibration_count": int(n_calib), "calibration_rows": [int(r) for r in calib["row"]], "calibration_seed": cfg.seed,
        "class_names": names, "class_counts": {names[i]: int(counts[i]) for i in range(len(names))},
    }
    return PreparedData(scored, calib, facts)


def audit_slices(cfg: AuditConfig, class_names, scored):
    """The built-in text slices, one per class, and one per value of the user's columns."""
    from .slices import SliceSet, class_slices, column_slices, contrast_slice, length_slices, negation_slice, punctuation_slices

    user = column_slices(scored, cfg.slice_columns) if cfg.slice_columns else []
    return SliceSet("audit", (negation_slice(), contrast_slice(), *length_slices(), *punctuation_slices(),
                              *class_slices(class_names), *user))


@dataclass(frozen=True)
class CheckedInputs:
    model: ModelFacts
    data: PreparedData
    out_dir: Path


def check_inputs(cfg: AuditConfig, out_dir: Optional[str | Path] = None) -> CheckedInputs:
    """Every check that needs no heavy work; raises :class:`AuditInputError` with one clear line."""
    model = check_model(cfg.model)
    data = prepare_data(cfg, model)
    out = Path(out_dir) if out_dir is not None else runs.DEFAULT_ROOT / f"<timestamp>-audit-{model.folder.name}"
    try:
        if out_dir is None:  # runs/<timestamp>-audit-<model>, under the current folder (or $WORKBENCH_RUNS)
            out = runs.new_run_dir(f"audit-{model.folder.name}")
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{time.time_ns()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise AuditInputError(f"cannot write the output folder {str(out)!r}: {exc.strerror or exc}; choose another --out") from exc
    return CheckedInputs(model, data, out)


# ----------------------------------------------------------------------------------------------
# the audit
# ----------------------------------------------------------------------------------------------
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
    from .ortinfer import make_session, predict_dataset

    ds = examples.select(range(min(limit, len(examples))))
    session = make_session(qpath)
    a = predict_dataset(session, tokenizer, ds, max_length, 1).argmax(-1)
    b = predict_dataset(session, tokenizer, ds, max_length, batch_size).argmax(-1)
    return int((a != b).sum())


def run_audit(cfg: AuditConfig, out_dir: Optional[str | Path] = None, log: Log = print,
              checked: Optional[CheckedInputs] = None) -> AuditResult:
    """Run the whole audit into ``out_dir`` (default ``runs/<stamp>-audit-<model>``); see the module doc.

    Raises :class:`AuditInputError` for bad input, before anything heavy. A stage that fails
    later is recorded (its message in the report) and the audit ends with exit code 1."""
    import datasets

    from .report import ReportInputs, search_over_results, write_report

    t_start = time.perf_counter()
    checked = checked or check_inputs(cfg, out_dir)
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
        from .env import run_doctor

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
            from .graph import run_export

            export = run_export(str(model.folder), cfg.export_config(), out / "export", data=dd)
            log(f"      {export.node_count} nodes, {export.size_mib:.1f} MiB; {export.validation.message}")
            if not export.validation.passed:
                raise RuntimeError(f"the exported graph does not reproduce the model: {export.validation.message}")
    else:
        skipped(2, "the environment check or the data step failed")
    if export is not None and export.validation.passed:
        with Step(3):
            from .graph import run_fusion

            fusion = run_fusion(export, cfg.fusion_config(), out / "fusion")
            fused = ", ".join(f"{k} {n}" for k, n in fusion.fused_op_counts.items()) or "nothing fused"
            log(f"      fused: {fused}")
            for d in fusion.diagnoses:
                log(f"      missing fusion: {d.text}")
            if not fusion.fused.validation.passed:
                log(f"      the fused graph failed validation ({fusion.fused.validation.message}); quantizing the exported graph")
        from .flow import graph_to_quantize  # the rule the demo, the Workbench and the CLI follow

        graph = graph_to_quantize(export, fusion).path
        with Step(4):
            from .quant import QuantConfig, prepare_baseline, run_quantization

            log(f"      FP32 graph: {graph.name}; scoring {facts['rows_scored']} rows once")
            base = prepare_baseline(graph, dd, out / "quantize" / "baseline", export=export, slices=slice_set, golden=False,
                                    calibration_samples=facts["calibration_count"], timing=cfg.timing(),
                                    batch_size=cfg.eval_batch_size, max_length=cfg.max_length)
            for name in cfg.presets:
                qcfg = dataclasses.replace(QuantConfig.preset(name), name=name)
                if qcfg.mode.value == "static":
                    qcfg = dataclasses.replace(qcfg, samples=facts["calibration_count"])
                res = run_quantization(None, qcfg, out / "quantize" / name, baseline=base, n_boot=cfg.n_boot, seed=cfg.seed,
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
                                             out_dir=out / "search")
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

    runs.atomic_write_json(out / AUDIT_FILE, {"config": cfg, "model": _model_dict(model), "data": facts, "stages": stages})
    log(f"[{total}/{total}] report ...")
    t0 = time.perf_counter()
    inputs = ReportInputs(
        kind="audit", title=f"Audit of {model.folder.name} on {Path(cfg.data).name}", run_dir=out,
        budget_overall=cfg.budget_overall, budget_per_slice=cfg.budget_slice, include_small_slices=cfg.include_small_slices,
        doctor=doctor, data=dict(facts, eval_batch_size=cfg.eval_batch_size), model=_model_dict(model), export=export,
        fusion=fusion, quant=results, search=search, stages=stages, batch_dependence=batch_dep,
        config=json.loads(json.dumps(dataclasses.asdict(cfg))),
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
