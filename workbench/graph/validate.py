"""Does a graph compute what the model computes? Its logits on real examples against a reference; the examples
are saved beside the graph (:func:`write_examples`) so later stages feed the same ones.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from .. import runs
from .config import ExportConfig


@dataclass(frozen=True)
class Validation:
    max_abs_diff: float
    mean_abs_diff: float
    label_agreement: float
    n_examples: int
    tolerance: float
    passed: bool
    message: str
    min_label_agreement: float = 1.0
    worst_example: int = -1  # index (within the validation examples) of the largest difference
    reference_scale: float = 0.0  # largest |reference logit|: what a difference is small against
    relative_diff: float = 0.0  # max_abs_diff / reference_scale


def compare_logits(candidate: np.ndarray, reference: np.ndarray, tolerance: float,
                   min_label_agreement: float = 1.0, what: str = "the graph") -> Validation:
    """Compare two logit arrays of the same shape; the pure-NumPy core of :func:`validate_onnx`."""
    candidate = np.asarray(candidate, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if candidate.shape != reference.shape:
        raise ValueError(
            f"logits of {what} have shape {candidate.shape} but the reference has {reference.shape}; "
            "both must come from the same examples in the same order with the same classes"
        )
    n = int(reference.shape[0])
    if n == 0:
        raise ValueError("no examples to validate on: give a data split with at least one example")
    if not np.all(np.isfinite(candidate)):
        bad = int(np.sum(~np.isfinite(candidate).all(axis=-1)))
        return Validation(float("inf"), float("inf"), 0.0, n, tolerance, False,
                          f"FAILED: {what} produced NaN or infinite logits for {bad}/{n} examples; "
                          "the graph is broken (re-export it, or check the last transformation applied to it)",
                          min_label_agreement, -1, float(np.abs(reference).max()), float("inf"))
    diff = np.abs(candidate - reference)
    per_example = diff.max(axis=-1)
    worst = int(per_example.argmax())
    max_diff, mean_diff = float(diff.max()), float(diff.mean())
    agree = float(np.mean(candidate.argmax(-1) == reference.argmax(-1)))
    n_agree = int(round(agree * n))
    scale = float(np.abs(reference).max())
    relative = max_diff / scale if scale > 0 else float("inf")
    ok_diff = max_diff <= tolerance
    ok_agree = agree >= min_label_agreement
    passed = ok_diff and ok_agree
    detail = (f"largest |Δ logit| {max_diff:.3g} {'≤' if ok_diff else '>'} tolerance {tolerance:.3g}"
              f"{'' if ok_diff else f' (example {worst})'}, {relative:.2%} of the largest logit {scale:.3g}; "
              f"labels agree on {n_agree}/{n} examples")
    if passed:
        message = f"passed: {detail}"
    else:
        why = []
        if not ok_diff:
            why.append("the logits moved more than the tolerance")
        if not ok_agree:
            why.append(f"label agreement {agree:.1%} is below the required {min_label_agreement:.1%}")
        message = (f"FAILED: {detail}. {what[0].upper() + what[1:]} does not reproduce the reference: "
                   f"{' and '.join(why)}. If the graph was deliberately approximated (fused kernels, INT8), "
                   "raise the tolerance knowingly; otherwise re-export and check each transformation")
    return Validation(max_diff, mean_diff, agree, n, float(tolerance), passed, message, float(min_label_agreement),
                      worst, scale, relative)


def select_examples(data, cfg: "ExportConfig"):
    """The first ``cfg.validation_examples`` examples of ``cfg.validation_split`` (or of the ``Dataset`` given)."""
    import datasets

    ds = data
    if isinstance(data, (datasets.DatasetDict, dict)):
        if cfg.validation_split not in data:
            raise ValueError(
                f"validation split {cfg.validation_split!r} not in the data (splits: {list(data.keys())}); "
                "set ExportConfig(validation_split=...)"
            )
        ds = data[cfg.validation_split]
    if "text" not in ds.column_names:
        raise ValueError(f"the validation data needs a 'text' column; it has {ds.column_names}")
    if len(ds) == 0:
        raise ValueError("the validation split is empty: choose a split with examples")
    return ds.select(range(min(cfg.validation_examples, len(ds))))


def validate_onnx(onnx_path, reference, tokenizer, dataset, cfg: Optional["ExportConfig"] = None,
                  what: str = "the graph") -> Validation:
    """Validate a graph on :func:`select_examples` of ``dataset`` against ``reference``, their logits in order."""
    from ..runtime.ortinfer import as_session, predict_dataset

    cfg = cfg or ExportConfig()
    examples = select_examples(dataset, cfg)
    ref = np.asarray(reference)
    if ref.ndim != 2 or ref.shape[0] < len(examples):
        raise ValueError(
            f"reference logits have shape {ref.shape}, expected ({len(examples)}, n_classes) for the "
            f"{len(examples)} validation examples; compute them on the same examples in the same order"
        )
    got = predict_dataset(as_session(onnx_path, device=cfg.device), tokenizer, examples, cfg.max_length, cfg.validation_batch_size)
    return compare_logits(got, ref[: len(examples)], cfg.tolerance, cfg.min_label_agreement, what)


def write_examples(path: Path, examples) -> Path:
    lines = [json.dumps({"text": t, "label": int(y)}) for t, y in zip(examples["text"], examples["label"])]
    return runs.atomic_write_text(path, "\n".join(lines) + "\n")


def read_examples(path: str | os.PathLike):
    import datasets

    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"no examples in {path}")
    return datasets.Dataset.from_list(rows)
