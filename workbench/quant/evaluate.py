"""Per-slice evaluation of a candidate model (INT8, fused, pruned...) against a reference (FP32).

Everything here is pure numpy: arrays of probabilities in, a :class:`SliceReport` out. No model is
run, so the same function scores ONNX Runtime sessions, PyTorch models or saved predictions.

What is measured, for the whole set and for every slice of a :class:`~workbench.data.slices.SliceSet`:

* **accuracy** and **macro-F1** (F1 averaged over the classes that occur in the labels or the
  predictions, as scikit-learn does by default),
* **mean confidence** (the mean of the top class probability),
* **expected calibration error** (ECE): confidences are put in ``n_bins`` equal-width bins
  ``(0, 1/B], (1/B, 2/B], ...`` (a confidence on an edge goes to the lower bin) and ECE is
  ``sum_b |sum_{i in b} correct_i - sum_{i in b} conf_i| / n``, i.e. the gap between accuracy
  and confidence in each bin, weighted by the bin's share,
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
    """How a candidate is scored against the reference (the knobs of :func:`evaluate_slices`).

    - ``n_boot``: paired bootstrap replicates (at least 100); ``seed``: their random stream (each
      slice draws its own stream from the seed and its name).
    - ``confidence_level``: the interval's coverage (0.95: the 2.5th to 97.5th percentile).
    - ``min_slice_size``: slices smaller than this are marked ``too_small`` (shown, not judged;
      why 50: the module docstring).
    - ``n_bins``: equal-width confidence bins of the calibration error (ECE).
    - ``thresholds``: confidences at which accept/reject is compared (:func:`threshold_analysis`).
    - ``node_error_samples``: calibration texts fed to both graphs to rank the quantized nodes by
      their SQNR (:func:`workbench.quant.run_quantization`; 0 skips it).
    """

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
        if self.n_boot < 100:
            raise EvaluationError(f"n_boot must be at least 100 for a 95% interval to mean anything, got {self.n_boot}")
        if self.node_error_samples < 0:
            raise EvaluationError(f"node_error_samples must be 0 (skip) or more texts, got {self.node_error_samples}")
        if not 0.5 < self.confidence_level < 1.0:
            raise EvaluationError(f"confidence_level must be between 0.5 and 1, got {self.confidence_level}")
        if self.min_slice_size < 1:
            raise EvaluationError(f"min_slice_size must be at least 1, got {self.min_slice_size}")
        if self.n_bins < 1:
            raise EvaluationError(f"n_bins must be at least 1, got {self.n_bins}")
        bad_t = [t for t in self.thresholds if not 0.0 <= t <= 1.0]
        if bad_t:
            raise EvaluationError(f"thresholds are confidences in [0, 1], got {bad_t}")


@dataclass(frozen=True)
class SliceDrift:
    """What the candidate changed on one slice.

    ``deltas`` holds every metric of :data:`METRICS`; ``delta``/``ci_low``/``ci_high``/
    ``significant`` read the accuracy entry, the headline number of a slice.
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

    delta = property(lambda self: self.deltas["accuracy"].delta)
    ci_low = property(lambda self: self.deltas["accuracy"].ci_low)
    ci_high = property(lambda self: self.deltas["accuracy"].ci_high)
    significant = property(lambda self: self.deltas["accuracy"].significant)

    def delta_of(self, metric: str) -> MetricDelta:
        if metric not in self.deltas:
            raise KeyError(f"no metric {metric!r}; metrics: {list(self.deltas)}")
        return self.deltas[metric]



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



def _drift(
    name: str, description: str, group: str, idx: np.ndarray, ref_all: Preds, cand_all: Preds,
    n_boot: int, seed: int, level: float, min_size: int,
) -> SliceDrift:
    ref = take_rows(ref_all, idx)
    cand = take_rows(cand_all, idx)
    agree = (ref.pred == cand.pred).astype(np.float64)
    rm = metrics_record(name, ref, np.ones(len(idx)))
    cm = metrics_record(name, cand, agree)
    n = len(idx)
    alpha = (1.0 - level) / 2.0
    deltas: dict[str, MetricDelta] = {}
    boots = bootstrap_deltas(ref, cand, agree, n_boot, np.random.default_rng(slice_seed(seed, name))) if n > 0 else {}
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
    return SliceDrift(slice=name, n=n, description=description, group=group, too_small=n < min_size,
                      reference=rm, candidate=cm, deltas=deltas, flips=int((ref.pred != cand.pred).sum()))



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
    config: Optional[EvalConfig] = None,
    *,
    class_names: Optional[Sequence[str]] = None,
    reference_name: str = "fp32",
    candidate_name: str = "int8",
    set_name: str = "test",
    membership: Optional[dict[str, Any]] = None,
) -> SliceReport:
    """Compare ``candidate_probs`` with ``reference_probs`` on the same examples, slice by slice.

    ``examples``: list of dicts with ``text`` (and whatever the slice predicates read) or a
    ``datasets.Dataset``; ``labels``: (n,) true class ids; ``*_probs``: (n, classes) probabilities
    (use :func:`softmax` on logits). ``config`` (:class:`EvalConfig`, default ``EvalConfig()``)
    holds the bootstrap and slice-size knobs. ``slices`` decides the slices (``None``: overall only);
    ``membership`` may pass precomputed masks ``{slice name: bool array}`` instead of recomputing.
    The bootstrap is deterministic under ``seed`` (each slice has its own stream derived from the
    seed and the slice name, so adding a slice does not move the others' intervals).
    """
    if config is None:
        config = EvalConfig()
    if not isinstance(config, EvalConfig):
        raise EvaluationError(f"config must be an EvalConfig (e.g. EvalConfig(n_boot=1000)), got {type(config).__name__}")
    n_boot, seed, n_bins = config.n_boot, config.seed, config.n_bins
    confidence_level, min_slice_size, thresholds = config.confidence_level, config.min_slice_size, config.thresholds
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

    ref_all = make_preds(labels_arr, ref_p, n_bins)
    cand_all = make_preds(labels_arr, cand_p, n_bins)

    masks = _slice_masks(rows, slices, membership)
    meta = {s.name: (s.description, s.group) for s in slices} if slices is not None else {}

    common = dict(ref_all=ref_all, cand_all=cand_all, n_boot=n_boot, seed=seed, level=confidence_level, min_size=min_slice_size)
    overall = _drift(ALL, "every example", "overall", np.arange(n), **common)
    drifts = [
        _drift(name, meta.get(name, ("", "user"))[0], meta.get(name, ("", "user"))[1], np.flatnonzero(m), **common)
        for name, m in masks.items()
    ]

    flips = _flips(rows, labels_arr, ref_all, cand_all, masks, names)
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


def _slice_masks(rows: list, slices: Optional[SliceSet], membership: Optional[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Each slice's boolean mask over ``rows``: ``membership`` as given (checked), else computed from ``slices``."""
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
    """Every example whose prediction changed: fixed (the candidate is now right), broken (the
    reference was right) or changed (both wrong), with the slices it belongs to."""
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
        rep = evaluate_slices([{"text": ""}] * n, labels, ref, cand, None, EvalConfig(n_boot=n_boot, seed=t, thresholds=()))
        hits += rep.overall.ci_low <= truth <= rep.overall.ci_high
    return hits / trials
