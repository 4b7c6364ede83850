"""Per-slice drift of a candidate against the FP32 reference, in numpy: probabilities in, :class:`SliceReport` out.

Drift has a **paired bootstrap** interval: each replicate draws the same examples for both models, so it measures
the change, not the noise of two samples. Slices under :data:`MIN_SLICE_SIZE` = 50 examples are ``too_small``
(shown, not judged): one changed prediction moves a slice of n by 1/n, 2 points at 50 (the usual budget); and
simulated slices (reference right 85% of the time, flips at a rate; 400 trials of 500 replicates) gave this
coverage of the 95% interval::

      n      flip 2%   flip 5%   flip 10%
      20     0.25      0.61      0.86
      30     0.42      0.72      0.91
      50     0.56      0.88      0.90
      100    0.78      0.91      0.95
      200    0.90      0.94      0.96

When flips are rare the interval is too narrow at any n (no flip gives [0, 0]): read ``SliceDrift.flips``."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from ..data.slices import SliceSet
from .bootstrap import (DEFAULT_N_BINS, METRICS, EvaluationError, MetricDelta, SliceMetrics, bootstrap_deltas,
                        metrics_record, make_preds, Preds, slice_seed, take_rows)
from .flips import DEFAULT_THRESHOLDS, Flip, FlipKind, ThresholdPoint, sort_flips, threshold_analysis

MIN_SLICE_SIZE = 50
CONFIDENCE_LEVEL = 0.95
DEFAULT_N_BOOT = 1000
ALL = "all"  # name of the whole-set "slice"


@dataclass(frozen=True)
class EvalConfig:
    """How a candidate is scored; a stream per slice (from ``seed`` and its name) keeps a new slice from moving the others."""

    n_boot: int = field(default=DEFAULT_N_BOOT, metadata={"help": "bootstrap replicates (--quick: 200)"})
    seed: int = field(default=0, metadata={"help": "random seed of the bootstrap (each slice draws its own stream from it)"})
    confidence_level: float = field(default=CONFIDENCE_LEVEL, metadata={"help": (
        "coverage of the bootstrap interval (0.95: 2.5th to 97.5th percentile)")})
    min_slice_size: int = field(default=MIN_SLICE_SIZE, metadata={"help": (
        "slices with fewer examples are shown as too_small and not judged")})
    n_bins: int = field(default=DEFAULT_N_BINS, metadata={"help": "equal-width confidence bins of the calibration error (ECE)"})
    thresholds: tuple[float, ...] = field(default=DEFAULT_THRESHOLDS, metadata={"help": (
        "confidences at which accept/reject is compared between the graphs")})
    node_error_samples: int = field(default=16, metadata={"help": "texts fed to both graphs for per-node SQNR (0: skip)"})

    def __post_init__(self) -> None:
        if isinstance(self.thresholds, (str, bytes)) or not hasattr(self.thresholds, "__iter__"):
            raise EvaluationError(f"thresholds are a list of confidences in [0, 1], got {self.thresholds!r}")
        object.__setattr__(self, "thresholds", tuple(float(t) for t in self.thresholds))
        for name in ("n_boot", "seed", "node_error_samples"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise EvaluationError(f"{name} must be a whole number, got {v!r}")
            object.__setattr__(self, name, int(v))
        bad_t = [t for t in self.thresholds if not 0.0 <= t <= 1.0]
        refusals = ((self.n_boot < 100, f"n_boot must be at least 100 for a 95% interval to mean anything, got {self.n_boot}"),
                    (self.node_error_samples < 0, f"node_error_samples must be 0 (skip) or more texts, got {self.node_error_samples}"),
                    (not 0.5 < self.confidence_level < 1.0, f"confidence_level must be between 0.5 and 1, got {self.confidence_level}"),
                    (self.min_slice_size < 1, f"min_slice_size must be at least 1, got {self.min_slice_size}"),
                    (self.n_bins < 1, f"n_bins must be at least 1, got {self.n_bins}"),
                    (bad_t, f"thresholds are confidences in [0, 1], got {bad_t}"))
        message = next((m for bad, m in refusals if bad), None)
        if message:
            raise EvaluationError(message)


@dataclass(frozen=True)
class SliceDrift:
    """What the candidate changed on one slice; the properties read accuracy's delta, its headline number."""

    slice: str
    n: int
    description: str
    group: str
    too_small: bool
    reference: SliceMetrics
    candidate: SliceMetrics
    deltas: dict[str, MetricDelta]
    flips: int  # examples of this slice whose predicted label changed

    delta = property(lambda self: self.deltas["accuracy"].delta)
    ci_low = property(lambda self: self.deltas["accuracy"].ci_low)
    ci_high = property(lambda self: self.deltas["accuracy"].ci_high)
    significant = property(lambda self: self.deltas["accuracy"].significant)


@dataclass(frozen=True)
class SliceReport:
    """The candidate against the reference, overall and slice by slice, with the per-example arrays views draw."""

    reference_name: str
    candidate_name: str
    slice_set: str
    class_names: list[str]
    n: int
    overall: SliceDrift
    slices: list[SliceDrift]
    flips: list[Flip]
    thresholds: list[ThresholdPoint]
    labels: list[int]
    reference_pred: list[int]
    candidate_pred: list[int]
    reference_confidence: list[float]
    candidate_confidence: list[float]
    n_boot: int
    seed: int
    confidence_level: float
    min_slice_size: int
    n_bins: int
    set_name: str = "test"

    def drift(self, name: str) -> SliceDrift:
        if name == ALL:
            return self.overall
        for d in self.slices:
            if d.slice == name:
                return d
        raise KeyError(f"no slice {name!r} in this report; slices: {[d.slice for d in self.slices]}")

    def worst_slices(self, metric: str = "accuracy", k: Optional[int] = None, include_small: bool = True) -> list[SliceDrift]:
        """Slices sorted worst first by the change in ``metric`` (empty slices last)."""
        if metric not in METRICS:
            raise EvaluationError(f"metric must be one of {list(METRICS)}, got {metric!r}")
        sign = 1.0 if METRICS[metric][1] else -1.0
        pool = [d for d in self.slices if include_small or not d.too_small]

        def key(d: SliceDrift):
            v = d.deltas[metric].delta
            return (math.isnan(v), sign * v if not math.isnan(v) else 0.0, d.slice)

        ordered = sorted(pool, key=key)
        return ordered if k is None else ordered[:k]

    def significant_drops(self, metric: str = "accuracy") -> list[SliceDrift]:
        """Slices (overall included) where ``metric`` got significantly worse."""
        return [d for d in [self.overall, *self.slices] if d.deltas[metric].significant and d.deltas[metric].worse]

    def sorted_flips(self, by: str = "confidence_change", descending: bool = False) -> list[Flip]:
        return sort_flips(self.flips, by, descending)

    def max_slice_drop(self, metric: str = "accuracy", include_small: bool = False) -> float:
        """The largest drop (as a positive number; 0 if none got worse) over the slices."""
        drops = [
            -d.deltas[metric].delta if METRICS[metric][1] else d.deltas[metric].delta
            for d in self.slices
            if (include_small or not d.too_small) and d.n > 0
        ]
        return max([0.0, *drops])


def _drift(name: str, description: str, group: str, idx: np.ndarray, ref_all: Preds, cand_all: Preds, config: EvalConfig) -> SliceDrift:
    ref = take_rows(ref_all, idx)
    cand = take_rows(cand_all, idx)
    agree = (ref.pred == cand.pred).astype(np.float64)
    rm = metrics_record(name, ref, np.ones(len(idx)))
    cm = metrics_record(name, cand, agree)
    n = len(idx)
    alpha = (1.0 - config.confidence_level) / 2.0
    deltas: dict[str, MetricDelta] = {}
    rng = np.random.default_rng(slice_seed(config.seed, name))
    boots = bootstrap_deltas(ref, cand, agree, config.n_boot, rng) if n > 0 else {}
    for k, (unit, hib) in METRICS.items():
        rv, cv = float(getattr(rm, k)), float(getattr(cm, k))
        if n == 0:
            lo = hi = float("nan")
        else:
            b = boots[k]
            b = b[~np.isnan(b)]
            lo, hi = (float(np.quantile(b, alpha)), float(np.quantile(b, 1.0 - alpha))) if len(b) else (float("nan"),) * 2
        sig = bool(n > 0 and not math.isnan(lo) and (lo > 0 or hi < 0))
        deltas[k] = MetricDelta(k, rv, cv, cv - rv, lo, hi, sig, unit, hib)
    return SliceDrift(slice=name, n=n, description=description, group=group, too_small=n < config.min_slice_size,
                      reference=rm, candidate=cm, deltas=deltas, flips=int((ref.pred != cand.pred).sum()))


def softmax(logits) -> np.ndarray:
    """Row-wise softmax (numerically stable): logits -> probabilities."""
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def _check_probs(name: str, probs, n: int) -> np.ndarray:
    arr = np.asarray(probs, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != n or arr.shape[1] < 2:
        raise EvaluationError(
            f"{name} must have shape (n_examples, n_classes) = ({n}, >=2), got {arr.shape}; "
            "pass one row of class probabilities per example"
        )
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        raise EvaluationError(
            f"{name} has {int(bad.sum())} row(s) with NaN/inf (first at index {int(np.flatnonzero(bad)[0])}): "
            "the model produced non-finite outputs; check the graph (or the quantization) that made them"
        )
    sums = arr.sum(axis=1)
    if (arr < -1e-6).any() or np.abs(sums - 1.0).max() > 1e-3:
        raise EvaluationError(
            f"{name} rows must be probabilities (non-negative, summing to 1); got row sums from "
            f"{sums.min():.4g} to {sums.max():.4g}. If these are logits, pass workbench.quant.evaluate.softmax(logits)"
        )
    return arr


def _rows(examples) -> list[dict]:
    if hasattr(examples, "to_list"):
        return examples.to_list()
    rows = list(examples)
    for i, r in enumerate(rows[:1]):
        if not isinstance(r, dict) or "text" not in r:
            raise EvaluationError(
                f"examples must be dicts with a 'text' key (or a datasets.Dataset), got {type(r).__name__} at index {i}"
            )
    return rows


def evaluate_slices(
    examples,
    labels,
    reference_probs,
    candidate_probs,
    slices: Optional[SliceSet] = None,
    config: Optional[EvalConfig] = None,
    *,
    class_names: Optional[Sequence[str]] = None,
    reference_name: str = "fp32",
    candidate_name: str = "int8",
    set_name: str = "test",
    membership: Optional[dict[str, Any]] = None,
) -> SliceReport:
    """Compare ``candidate_probs`` with ``reference_probs`` ((n, classes) probabilities: :func:`softmax` of logits) on
    ``examples``, per ``slices`` (None: overall only) or precomputed ``membership`` masks ``{slice name: bool array}``."""
    config = config if config is not None else EvalConfig()
    if not isinstance(config, EvalConfig):
        raise EvaluationError(f"config must be an EvalConfig (e.g. EvalConfig(n_boot=1000)), got {type(config).__name__}")
    rows = _rows(examples)
    n = len(rows)
    labels_arr = np.asarray(labels, dtype=np.int64).reshape(-1)
    if len(labels_arr) != n:
        raise EvaluationError(f"got {n} examples but {len(labels_arr)} labels; pass one label per example")
    ref_p = _check_probs("reference_probs", reference_probs, n)
    cand_p = _check_probs("candidate_probs", candidate_probs, n)
    if ref_p.shape != cand_p.shape:
        raise EvaluationError(
            f"reference_probs {ref_p.shape} and candidate_probs {cand_p.shape} differ; both models must score the same examples and classes"
        )
    k = ref_p.shape[1]
    if n and (labels_arr.min() < 0 or labels_arr.max() >= k):
        raise EvaluationError(f"labels must be class ids in [0, {k - 1}], got values from {labels_arr.min()} to {labels_arr.max()}")
    names = list(class_names) if class_names is not None else [str(i) for i in range(k)]
    if len(names) != k:
        raise EvaluationError(f"class_names has {len(names)} names but the models score {k} classes: {names}")

    ref_all = make_preds(labels_arr, ref_p, config.n_bins)
    cand_all = make_preds(labels_arr, cand_p, config.n_bins)

    masks = _slice_masks(rows, slices, membership)
    meta = {s.name: (s.description, s.group) for s in slices} if slices is not None else {}

    overall = _drift(ALL, "every example", "overall", np.arange(n), ref_all, cand_all, config)
    drifts = [_drift(name, *meta.get(name, ("", "user")), np.flatnonzero(m), ref_all, cand_all, config) for name, m in masks.items()]

    flips = _flips(rows, labels_arr, ref_all, cand_all, masks, names)
    return SliceReport(
        reference_name=reference_name, candidate_name=candidate_name,
        slice_set=slices.name if slices is not None else ("custom" if membership else "none"),
        class_names=names, n=n, overall=overall, slices=drifts, flips=flips,
        thresholds=threshold_analysis(labels_arr, ref_p, cand_p, config.thresholds),
        labels=labels_arr.tolist(), reference_pred=ref_all.pred.tolist(), candidate_pred=cand_all.pred.tolist(),
        reference_confidence=ref_all.conf.tolist(), candidate_confidence=cand_all.conf.tolist(),
        n_boot=config.n_boot, seed=config.seed, confidence_level=config.confidence_level,
        min_slice_size=config.min_slice_size, n_bins=config.n_bins, set_name=set_name,
    )


def _slice_masks(rows: list, slices: Optional[SliceSet], membership: Optional[dict[str, Any]]) -> dict[str, np.ndarray]:
    n = len(rows)
    masks: dict[str, np.ndarray] = {}
    if membership is not None:
        for name, m in membership.items():
            m = np.asarray(m, dtype=bool)
            if m.shape != (n,):
                raise EvaluationError(f"membership mask for slice {name!r} has shape {m.shape}, expected ({n},)")
            masks[name] = m
    elif slices is not None:
        masks = slices.membership(rows)
    return masks


def _flips(rows: list, labels: np.ndarray, ref_all, cand_all, masks: dict[str, np.ndarray], names: list[str]) -> list[Flip]:
    flips = []
    for i in np.flatnonzero(ref_all.pred != cand_all.pred):
        i = int(i)
        lab, rp, cp = int(labels[i]), int(ref_all.pred[i]), int(cand_all.pred[i])
        kind = FlipKind.FIXED if cp == lab else FlipKind.BROKEN if rp == lab else FlipKind.CHANGED
        flips.append(
            Flip(
                index=i, text=str(rows[i].get("text", "")), slices=[s for s, m in masks.items() if m[i]], label=lab,
                reference_pred=rp, reference_confidence=float(ref_all.conf[i]), candidate_pred=cp,
                candidate_confidence=float(cand_all.conf[i]), kind=kind, label_name=names[lab],
                reference_pred_name=names[rp], candidate_pred_name=names[cp],
            )
        )
    return flips
