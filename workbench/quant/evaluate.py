"""Per-slice evaluation of a candidate model (INT8, fused, pruned...) against a reference (FP32).

Everything here is pure numpy: arrays of probabilities in, a :class:`SliceReport` out. No model is
run, so the same function scores ONNX Runtime sessions, PyTorch models or saved predictions.

What is measured, for the whole set and for every slice of a :class:`~workbench.slices.SliceSet`:

* **accuracy** and **macro-F1** (F1 averaged over the classes that occur in the labels or the
  predictions, as scikit-learn does by default),
* **mean confidence** (the mean of the top class probability),
* **expected calibration error** (ECE): confidences are put in ``n_bins`` equal-width bins
  ``(0, 1/B], (1/B, 2/B], ...`` (a confidence on an edge goes to the lower bin) and ECE is
  ``sum_b |sum_{i in b} correct_i - sum_{i in b} conf_i| / n``, i.e. the gap between accuracy and confidence in each bin, weighted by the bin's share,
* **agreement** with the reference (share of examples where both predict the same label).

Drift is the candidate's value minus the reference's, with a **paired bootstrap** 95% interval:
each bootstrap replicate draws the same examples (with replacement) for both models, so the
interval measures the change, not the noise of two independent samples. A change is flagged
``significant`` when its interval excludes zero.

Slices with fewer than ``min_slice_size`` examples (default :data:`MIN_SLICE_SIZE` = 50) are
marked ``too_small`` — still computed and shown, never hidden. Why 50:

* resolution: one changed prediction moves a slice of n examples by 1/n; at n = 50 that is
  2 points, the usual per-slice budget, so below 50 a single example can decide the verdict;
* coverage: :func:`bootstrap_coverage` simulates slices whose reference is right 85% of the
  time and whose predictions flip at a given rate, and counts how often the 95% paired
  percentile interval holds the true change (400 trials, 500 replicates each, measured here)::

      n      flip 2%   flip 5%   flip 10%
      20     0.25      0.61      0.86
      30     0.42      0.72      0.91
      50     0.56      0.88      0.90
      100    0.78      0.91      0.95
      200    0.90      0.94      0.96

  At a 5% flip rate the interval reaches ~0.9 coverage from n = 50. When flips are rare the
  interval is too narrow at any n (a slice with no flip gets the interval [0, 0]); read
  ``SliceDrift.flips`` next to the interval: an interval says nothing about flips that the
  evaluated examples did not contain.
"""

from __future__ import annotations

import enum
import math
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from ..metrics import Metric
from ..slices import SliceSet

MIN_SLICE_SIZE = 50
DEFAULT_THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
DEFAULT_N_BINS = 10
CONFIDENCE_LEVEL = 0.95
ALL = "all"  # name of the whole-set "slice"

# name -> (unit, higher is better); the order is the order shown everywhere.
METRICS: dict[str, tuple[str, bool]] = {
    "accuracy": ("", True),
    "macro_f1": ("", True),
    "mean_confidence": ("", True),
    "ece": ("", False),
    "agreement": ("", True),
}
_BOOT_CHUNK = 250  # bootstrap replicates computed at once (bounds memory for large sets)


class EvaluationError(ValueError):
    """Inputs that cannot be evaluated; the message says what was wrong and what to do."""


class FlipKind(str, enum.Enum):
    """How a prediction changed: wrong->right (fixed), right->wrong (broken), wrong->other wrong."""

    FIXED = "fixed"
    BROKEN = "broken"
    CHANGED = "changed"


@dataclass(frozen=True)
class SliceMetrics:
    """One model's metrics on one set of examples (NaN where the set is empty)."""

    name: str
    n: int
    accuracy: float
    macro_f1: float
    mean_confidence: float
    ece: float
    agreement: float  # with the reference model; 1.0 for the reference itself

    def metrics(self) -> list[Metric]:
        """The values as :class:`~workbench.metrics.Metric` (unit and direction attached)."""
        return [Metric(k, float(getattr(self, k)), unit, hib) for k, (unit, hib) in METRICS.items()]


@dataclass(frozen=True)
class MetricDelta:
    """Candidate minus reference for one metric on one slice, with its paired bootstrap interval."""

    metric: str
    reference: float
    candidate: float
    delta: float
    ci_low: float
    ci_high: float
    significant: bool  # the interval excludes zero
    unit: str = ""
    higher_is_better: bool = True

    @property
    def worse(self) -> bool:
        """The point estimate moved in the bad direction."""
        return self.delta < 0 if self.higher_is_better else self.delta > 0


@dataclass(frozen=True)
class SliceDrift:
    """What the candidate changed on one slice.

    ``deltas`` holds every metric of :data:`METRICS`; ``delta``/``ci_low``/``ci_high``/
    ``significant`` repeat the accuracy entry, the headline number of a slice.
    """

    slice: str
    n: int
    description: str
    group: str
    too_small: bool
    reference: SliceMetrics
    candidate: SliceMetrics
    deltas: dict[str, MetricDelta]
    flips: int  # examples of this slice whose predicted label changed
    delta: float
    ci_low: float
    ci_high: float
    significant: bool

    def delta_of(self, metric: str) -> MetricDelta:
        if metric not in self.deltas:
            raise KeyError(f"no metric {metric!r}; metrics: {list(self.deltas)}")
        return self.deltas[metric]


@dataclass(frozen=True)
class Flip:
    """One example whose predicted label changed between the reference and the candidate."""

    index: int  # position in the evaluated examples
    text: str
    slices: list[str]
    label: int
    reference_pred: int
    reference_confidence: float
    candidate_pred: int
    candidate_confidence: float
    kind: FlipKind
    label_name: str = ""
    reference_pred_name: str = ""
    candidate_pred_name: str = ""

    @property
    def confidence_change(self) -> float:
        """Candidate's top-class confidence minus the reference's."""
        return self.candidate_confidence - self.reference_confidence


@dataclass(frozen=True)
class ThresholdPoint:
    """Accept a prediction only when its confidence is at least ``threshold``: what happens.

    Coverage is the share accepted; accuracy is measured on the accepted examples (NaN if none).
    ``decisions_changed`` counts examples accepted by one model and rejected by the other;
    ``accepted_flips`` counts examples accepted by both whose label differs (flips that would
    still reach a user at this threshold).
    """

    threshold: float
    reference_coverage: float
    reference_accuracy: float
    candidate_coverage: float
    candidate_accuracy: float
    decisions_changed: int
    newly_rejected: int
    newly_accepted: int
    accepted_flips: int


@dataclass(frozen=True)
class SliceReport:
    """The candidate against the reference, overall and slice by slice.

    Per-example arrays (``labels``, predictions and confidences of both models) are kept so that
    views can draw a confidence scatter or re-sort flips without recomputing anything.
    """

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

    # -- convenient views -------------------------------------------------------------------
    @property
    def overall_metrics(self) -> dict[str, SliceMetrics]:
        """Overall metrics per model, keyed by model name."""
        return {self.reference_name: self.overall.reference, self.candidate_name: self.overall.candidate}

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


FLIP_SORT_KEYS = ("index", "confidence_change", "reference_confidence", "candidate_confidence", "kind", "label")


def sort_flips(flips: Iterable[Flip], by: str = "confidence_change", descending: bool = False) -> list[Flip]:
    """Sort flips by one of :data:`FLIP_SORT_KEYS` (ties broken by index)."""
    if by not in FLIP_SORT_KEYS:
        raise EvaluationError(f"flips can be sorted by one of {list(FLIP_SORT_KEYS)}, got {by!r}")
    getters = {
        "index": lambda f: f.index,
        "confidence_change": lambda f: f.confidence_change,
        "reference_confidence": lambda f: f.reference_confidence,
        "candidate_confidence": lambda f: f.candidate_confidence,
        "kind": lambda f: f.kind.value,
        "label": lambda f: f.label,
    }
    g = getters[by]
    ordered = sorted(flips, key=lambda f: f.index)
    return sorted(ordered, key=g, reverse=descending)


# ----------------------------------------------------------------------------------------------
# metric kernels: every metric is computed from bootstrap *weights* (how many times each example
# is drawn); the point estimate is the same kernel with all weights 1. This keeps the bootstrap
# vectorised and guarantees the interval and the point estimate use the same formula.
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Preds:
    labels: np.ndarray  # (n,) int
    pred: np.ndarray  # (n,) int
    conf: np.ndarray  # (n,) float
    n_classes: int
    n_bins: int

    @property
    def correct(self) -> np.ndarray:
        return (self.pred == self.labels).astype(np.float64)

    @property
    def bins(self) -> np.ndarray:
        # bin b holds confidences in (b/B, (b+1)/B]; a confidence of exactly 0 goes to bin 0.
        # Rounding first keeps edges exact: 0.7 * 10 is 7.000000000000001 in floating point.
        scaled = np.round(self.conf * self.n_bins, 9)
        return np.clip(np.ceil(scaled).astype(np.int64) - 1, 0, self.n_bins - 1)


def _weighted_metrics(w: np.ndarray, p: _Preds, agree: np.ndarray) -> dict[str, np.ndarray]:
    """Metrics under example weights ``w`` of shape (r, n); returns arrays of shape (r,)."""
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = w @ p.correct / total
        conf = w @ p.conf / total
        agreement = w @ agree / total
        # macro-F1 over classes present (in labels or predictions) in the weighted sample
        f1s = []
        for c in range(p.n_classes):
            t, q = p.labels == c, p.pred == c
            tp = w @ (t & q).astype(np.float64)
            fp = w @ (~t & q).astype(np.float64)
            fn = w @ (t & ~q).astype(np.float64)
            denom = 2 * tp + fp + fn
            f1s.append(np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1.0), np.nan))
        f1 = np.stack(f1s, axis=1)
        present = ~np.isnan(f1)
        macro = np.where(present.any(axis=1), np.nansum(f1, axis=1) / np.maximum(present.sum(axis=1), 1), np.nan)
        # ECE = sum over bins |sum correct - sum conf| / total
        onehot = np.zeros((len(p.conf), p.n_bins))
        onehot[np.arange(len(p.conf)), p.bins] = 1.0
        gap = (w @ (onehot * p.correct[:, None])) - (w @ (onehot * p.conf[:, None]))
        ece = np.abs(gap).sum(axis=1) / total
    return {"accuracy": acc, "macro_f1": macro, "mean_confidence": conf, "ece": ece, "agreement": agreement}


def slice_metrics(name: str, labels, probs, reference_pred=None, n_bins: int = DEFAULT_N_BINS) -> SliceMetrics:
    """Metrics of one model on one set of examples (``probs``: (n, classes) probabilities)."""
    labels = np.asarray(labels, dtype=np.int64)
    probs = np.asarray(probs, dtype=np.float64)
    p = _preds(labels, probs, n_bins)
    agree = np.ones(len(labels)) if reference_pred is None else (p.pred == np.asarray(reference_pred)).astype(np.float64)
    return _metrics_record(name, p, agree)


def _metrics_record(name: str, p: _Preds, agree: np.ndarray) -> SliceMetrics:
    n = len(p.labels)
    if n == 0:
        nan = float("nan")
        return SliceMetrics(name, 0, nan, nan, nan, nan, nan)
    vals = _weighted_metrics(np.ones((1, n)), p, agree)
    return SliceMetrics(name, n, *(float(vals[k][0]) for k in METRICS))


def _preds(labels: np.ndarray, probs: np.ndarray, n_bins: int) -> _Preds:
    n_classes = probs.shape[1] if probs.ndim == 2 else 0
    return _Preds(labels, probs.argmax(axis=1) if len(probs) else np.zeros(0, np.int64), probs.max(axis=1) if len(probs) else np.zeros(0), n_classes, n_bins)


def _bootstrap_deltas(ref: _Preds, cand: _Preds, agree: np.ndarray, n_boot: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Paired bootstrap: the same resampled examples for both models; returns (n_boot,) deltas."""
    n = len(ref.labels)
    out: dict[str, list[np.ndarray]] = {k: [] for k in METRICS}
    ones = np.ones(n)
    done = 0
    while done < n_boot:
        r = min(_BOOT_CHUNK, n_boot - done)
        w = rng.multinomial(n, np.full(n, 1.0 / n), size=r).astype(np.float64)
        mr = _weighted_metrics(w, ref, ones)
        mc = _weighted_metrics(w, cand, agree)
        for k in METRICS:
            out[k].append(mc[k] - mr[k])
        done += r
    return {k: np.concatenate(v) for k, v in out.items()}


def _slice_seed(seed: int, name: str) -> list[int]:
    """A per-slice seed: a slice's interval does not change when other slices are added."""
    return [int(seed), zlib.crc32(name.encode("utf-8"))]


def _drift(
    name: str, description: str, group: str, idx: np.ndarray, ref_all: _Preds, cand_all: _Preds,
    n_boot: int, seed: int, level: float, min_size: int,
) -> SliceDrift:
    ref = _take(ref_all, idx)
    cand = _take(cand_all, idx)
    agree = (ref.pred == cand.pred).astype(np.float64)
    rm = _metrics_record(name, ref, np.ones(len(idx)))
    cm = _metrics_record(name, cand, agree)
    n = len(idx)
    alpha = (1.0 - level) / 2.0
    deltas: dict[str, MetricDelta] = {}
    boots = _bootstrap_deltas(ref, cand, agree, n_boot, np.random.default_rng(_slice_seed(seed, name))) if n > 0 else {}
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
    acc = deltas["accuracy"]
    return SliceDrift(
        slice=name, n=n, description=description, group=group, too_small=n < min_size,
        reference=rm, candidate=cm, deltas=deltas, flips=int((ref.pred != cand.pred).sum()),
        delta=acc.delta, ci_low=acc.ci_low, ci_high=acc.ci_high, significant=acc.significant,
    )


def _take(p: _Preds, idx: np.ndarray) -> _Preds:
    return _Preds(p.labels[idx], p.pred[idx], p.conf[idx], p.n_classes, p.n_bins)


# ----------------------------------------------------------------------------------------------
# input checking
# ----------------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------------
# the stage function
# ----------------------------------------------------------------------------------------------
def evaluate_slices(
    examples,
    labels,
    reference_probs,
    candidate_probs,
    slices: Optional[SliceSet] = None,
    n_boot: int = 1000,
    seed: int = 0,
    *,
    class_names: Optional[Sequence[str]] = None,
    reference_name: str = "fp32",
    candidate_name: str = "int8",
    min_slice_size: int = MIN_SLICE_SIZE,
    confidence_level: float = CONFIDENCE_LEVEL,
    n_bins: int = DEFAULT_N_BINS,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    set_name: str = "test",
    membership: Optional[dict[str, Any]] = None,
) -> SliceReport:
    """Compare ``candidate_probs`` with ``reference_probs`` on the same examples, slice by slice.

    ``examples``: list of dicts with ``text`` (and whatever the slice predicates read) or a
    ``datasets.Dataset``; ``labels``: (n,) true class ids; ``*_probs``: (n, classes) probabilities
    (use :func:`softmax` on logits). ``slices`` decides the slices (``None``: overall only);
    ``membership`` may pass precomputed masks ``{slice name: bool array}`` instead of recomputing.
    The bootstrap is deterministic under ``seed`` (each slice has its own stream derived from the
    seed and the slice name, so adding a slice does not move the others' intervals).
    """
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
    if n_boot < 100:
        raise EvaluationError(f"n_boot must be at least 100 for a 95% interval to mean anything, got {n_boot}")
    if not 0.5 < confidence_level < 1.0:
        raise EvaluationError(f"confidence_level must be between 0.5 and 1, got {confidence_level}")
    if min_slice_size < 1:
        raise EvaluationError(f"min_slice_size must be at least 1, got {min_slice_size}")
    if n_bins < 1:
        raise EvaluationError(f"n_bins must be at least 1, got {n_bins}")
    bad_t = [t for t in thresholds if not 0.0 <= float(t) <= 1.0]
    if bad_t:
        raise EvaluationError(f"thresholds are confidences in [0, 1], got {bad_t}")
    names = list(class_names) if class_names is not None else [str(i) for i in range(k)]
    if len(names) != k:
        raise EvaluationError(f"class_names has {len(names)} names but the models score {k} classes: {names}")

    ref_all = _preds(labels_arr, ref_p, n_bins)
    cand_all = _preds(labels_arr, cand_p, n_bins)

    masks: dict[str, np.ndarray] = {}
    if membership is not None:
        for name, m in membership.items():
            m = np.asarray(m, dtype=bool)
            if m.shape != (n,):
                raise EvaluationError(f"membership mask for slice {name!r} has shape {m.shape}, expected ({n},)")
            masks[name] = m
    elif slices is not None:
        masks = slices.membership(rows)
    meta = {s.name: (s.description, s.group) for s in slices} if slices is not None else {}

    common = dict(ref_all=ref_all, cand_all=cand_all, n_boot=n_boot, seed=seed, level=confidence_level, min_size=min_slice_size)
    overall = _drift(ALL, "every example", "overall", np.arange(n), **common)
    drifts = [
        _drift(name, meta.get(name, ("", "user"))[0], meta.get(name, ("", "user"))[1], np.flatnonzero(m), **common)
        for name, m in masks.items()
    ]

    changed = np.flatnonzero(ref_all.pred != cand_all.pred)
    flips = []
    for i in changed:
        i = int(i)
        lab, rp, cp = int(labels_arr[i]), int(ref_all.pred[i]), int(cand_all.pred[i])
        kind = FlipKind.FIXED if cp == lab else FlipKind.BROKEN if rp == lab else FlipKind.CHANGED
        flips.append(
            Flip(
                index=i, text=str(rows[i].get("text", "")), slices=[s for s, m in masks.items() if m[i]], label=lab,
                reference_pred=rp, reference_confidence=float(ref_all.conf[i]), candidate_pred=cp,
                candidate_confidence=float(cand_all.conf[i]), kind=kind, label_name=names[lab],
                reference_pred_name=names[rp], candidate_pred_name=names[cp],
            )
        )

    return SliceReport(
        reference_name=reference_name, candidate_name=candidate_name,
        slice_set=slices.name if slices is not None else ("custom" if membership else "none"),
        class_names=names, n=n, overall=overall, slices=drifts, flips=flips,
        thresholds=threshold_analysis(labels_arr, ref_p, cand_p, thresholds),
        labels=labels_arr.tolist(), reference_pred=ref_all.pred.tolist(), candidate_pred=cand_all.pred.tolist(),
        reference_confidence=ref_all.conf.tolist(), candidate_confidence=cand_all.conf.tolist(),
        n_boot=n_boot, seed=seed, confidence_level=confidence_level, min_slice_size=min_slice_size,
        n_bins=n_bins, set_name=set_name,
    )


def threshold_analysis(labels, reference_probs, candidate_probs, thresholds: Sequence[float] = DEFAULT_THRESHOLDS) -> list[ThresholdPoint]:
    """Accept/reject at each confidence threshold: coverage and accuracy of both models and
    how many decisions the candidate changes."""
    labels = np.asarray(labels, dtype=np.int64)
    rp, cp = np.asarray(reference_probs, dtype=np.float64), np.asarray(candidate_probs, dtype=np.float64)
    r_pred, c_pred = rp.argmax(axis=1), cp.argmax(axis=1)
    r_conf, c_conf = rp.max(axis=1), cp.max(axis=1)
    n = len(labels)
    out = []
    for t in sorted(float(x) for x in thresholds):
        ra, ca = r_conf >= t, c_conf >= t
        out.append(
            ThresholdPoint(
                threshold=t,
                reference_coverage=float(ra.mean()) if n else float("nan"),
                reference_accuracy=float((r_pred[ra] == labels[ra]).mean()) if ra.any() else float("nan"),
                candidate_coverage=float(ca.mean()) if n else float("nan"),
                candidate_accuracy=float((c_pred[ca] == labels[ca]).mean()) if ca.any() else float("nan"),
                decisions_changed=int((ra != ca).sum()),
                newly_rejected=int((ra & ~ca).sum()),
                newly_accepted=int((~ra & ca).sum()),
                accepted_flips=int((ra & ca & (r_pred != c_pred)).sum()),
            )
        )
    return out


def bootstrap_coverage(n: int, p_ref: float, p_flip: float, trials: int = 200, n_boot: int = 500, seed: int = 0) -> float:
    """How often the paired percentile interval for the accuracy change covers the true change.

    Simulates a slice of ``n`` binary examples: the reference is right with probability
    ``p_ref``; each prediction flips (right<->wrong) with probability ``p_flip``. The true change
    is ``p_flip * (1 - 2 * p_ref)``. Used to justify :data:`MIN_SLICE_SIZE` (see the module doc).
    """
    rng = np.random.default_rng(seed)
    truth = p_flip * (1 - 2 * p_ref)
    hits = 0
    for t in range(trials):
        labels = np.zeros(n, dtype=np.int64)
        r_ok = rng.random(n) < p_ref
        flip = rng.random(n) < p_flip
        c_ok = r_ok ^ flip
        ref = np.where(r_ok[:, None], [[0.9, 0.1]], [[0.1, 0.9]])
        cand = np.where(c_ok[:, None], [[0.8, 0.2]], [[0.2, 0.8]])
        rep = evaluate_slices([{"text": ""}] * n, labels, ref, cand, None, n_boot=n_boot, seed=t, thresholds=())
        hits += rep.overall.ci_low <= truth <= rep.overall.ci_high
    return hits / trials
