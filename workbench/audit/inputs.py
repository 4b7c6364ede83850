"""Checking an audit's inputs, fast: config.json, the tokenizer and the file (no weights, no export)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from .. import runs
from .config import WEIGHT_FILES, AuditConfig, AuditInputError


@dataclass(frozen=True)
class ModelFacts:
    folder: Path
    model_type: str
    architectures: list[str]
    id2label: dict[int, str]
    num_labels: int
    max_positions: Optional[int] = None  # config.json's max_position_embeddings

    @property
    def class_names(self) -> list[str]:
        return [self.id2label[i] for i in range(self.num_labels)]


def check_model(folder: str) -> ModelFacts:
    """Is ``folder`` a local Hugging Face sequence classifier the exporter handles?"""
    from ..models.hub import model_source
    from ..models.load import SUPPORTED_MODEL_TYPES, ModelError
    from ..models.names import BUILTIN_MODELS

    try:
        path = Path(model_source(folder)).expanduser()  # a Hugging Face Hub id: its folder in the local cache
    except ModelError as exc:
        raise AuditInputError(str(exc)) from exc
    if not path.exists() and folder in BUILTIN_MODELS:
        raise AuditInputError(f"--model {folder!r} is a built-in name of train, export and the demo, not a folder the audit can read; "
                              "give the folder of a fine-tuned classifier (a demo run keeps one in train/eager/checkpoint), a "
                              "sentence-transformers folder, or a Hugging Face Hub id")
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
            f"{path} is not a sequence-classification model (this checkpoint has no classification head): config.json "
            f"names architectures {archs or '(none)'}, expected one ending in ForSequenceClassification. Fine-tune it "
            "first, or audit a fine-tuned classifier (e.g. saved from AutoModelForSequenceClassification with "
            "save_pretrained), not a base encoder"
            + ("; this folder is a sentence-transformers model: audit it as one with --task embedding"
               if (path / "modules.json").is_file() else ""))
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise AuditInputError(
            f"architecture {archs[0]} (model_type {model_type!r}) in {path} is not one the exporter handles; "
            f"supported model types: {list(SUPPORTED_MODEL_TYPES)}")
    if not any((path / w).is_file() for w in WEIGHT_FILES):
        raise AuditInputError(f"no weights in {path}: expected one of {list(WEIGHT_FILES)}")
    from ..models.load import check_weights

    try:
        check_weights(path)
    except ModelError as exc:
        raise AuditInputError(str(exc)) from exc
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
    from ..models.compat import NewerTransformersError, load_tokenizer as _load_tokenizer

    try:
        _load_tokenizer(path)
    except NewerTransformersError as exc:  # a folder saved by transformers 5 that 4.x cannot read: says what, and the fix
        raise AuditInputError(str(exc)) from exc
    except Exception as exc:  # transformers raises OSError, ValueError, TypeError... for a broken tokenizer
        raise AuditInputError(f"no usable tokenizer in {path} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                              "save it there with tokenizer.save_pretrained(folder)") from exc
    positions = config.get("max_position_embeddings")
    return ModelFacts(path.resolve(), model_type, archs, id2label, n, positions if isinstance(positions, int) else None)


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

    from ..data.load import DataError, read_table

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
    mask = np.zeros(len(frame), dtype=bool)
    mask[np.random.default_rng(cfg.seed).permutation(len(frame))[:n_calib]] = True
    names = model.class_names
    features = {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=names), "row": datasets.Value("int64")}
    from ..data.load import feature_for

    for c in cfg.slice_columns:
        features[c] = feature_for(frame[c])
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
    from ..data.slices import SliceSet, class_slices, column_slices, contrast_slice, length_slices, negation_slice, punctuation_slices

    user = column_slices(scored, cfg.slice_columns) if cfg.slice_columns else []
    return SliceSet("audit", (negation_slice(), contrast_slice(), *length_slices(), *punctuation_slices(),
                              *class_slices(class_names), *user))


@dataclass(frozen=True)
class CheckedInputs:
    model: ModelFacts
    data: PreparedData
    out_dir: Path


def check_inputs(model: str | Path, cfg: AuditConfig, out_dir: Optional[str | Path] = None) -> CheckedInputs:
    """Every check of the model folder, ``cfg`` and the output folder that needs no heavy work (:class:`AuditInputError`)."""
    from ..models.hub import model_name
    from ..runtime.engine import EngineError, check_engine

    try:  # Ray installed and its cluster answering, for engine ray
        check_engine(cfg.engine_config())
    except EngineError as exc:
        raise AuditInputError(str(exc)) from None
    model = check_model(str(model))
    if model.max_positions is not None and cfg.max_length > model.max_positions:  # longer inputs fail deep inside the export
        raise AuditInputError(f"--max-length {cfg.max_length} is more than the model's {model.max_positions} positions "
                              f"(max_position_embeddings in {model.folder / 'config.json'}): pass --max-length "
                              f"{model.max_positions} or less")
    data = prepare_data(cfg, model)
    out = Path(out_dir) if out_dir is not None else runs.DEFAULT_ROOT / f"<timestamp>-audit-{model_name(model.folder)}"
    try:
        if out_dir is None:  # runs/<timestamp>-audit-<model>, under the current folder (or $WORKBENCH_RUNS)
            out = runs.new_run_dir(f"audit-{model_name(model.folder)}")
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{time.time_ns()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise AuditInputError(f"cannot write the output folder {str(out)!r}: {exc.strerror or exc}; choose another --out") from exc
    return CheckedInputs(model, data, out)
