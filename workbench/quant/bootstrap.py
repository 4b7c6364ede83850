"""Metrics of one model and the paired bootstrap of their change, all from example weights (the point estimate: all 1)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np


DEFAULT_N_BINS = 10


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
class Preds:
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


def weighted_metrics(w: np.ndarray, p: Preds, agree: np.ndarray) -> dict[str, np.ndarray]:
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
    p = make_preds(labels, probs, n_bins)
    agree = np.ones(len(labels)) if reference_pred is None else (p.pred == np.asarray(reference_pred)).astype(np.float64)
    return metrics_record(name, p, agree)


def metrics_record(name: str, p: Preds, agree: np.ndarray) -> SliceMetrics:
    n = len(p.labels)
    if n == 0:
        nan = float("nan")
        return SliceMetrics(name, 0, nan, nan, nan, nan, nan)
    vals = weighted_metrics(np.ones((1, n)), p, agree)
    return SliceMetrics(name, n, *(float(vals[k][0]) for k in METRICS))


def make_preds(labels: np.ndarray, probs: np.ndarray, n_bins: int) -> Preds:
    n_classes = probs.shape[1] if probs.ndim == 2 else 0
    return Preds(labels, probs.argmax(axis=1) if len(probs) else np.zeros(0, np.int64), probs.max(axis=1) if len(probs) else np.zeros(0),
                  n_classes, n_bins)


def bootstrap_deltas(ref: Preds, cand: Preds, agree: np.ndarray, n_boot: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Paired bootstrap: the same resampled examples for both models; returns (n_boot,) deltas."""
    n = len(ref.labels)
    out: dict[str, list[np.ndarray]] = {k: [] for k in METRICS}
    ones = np.ones(n)
    for done in range(0, n_boot, _BOOT_CHUNK):
        w = rng.multinomial(n, np.full(n, 1.0 / n), size=min(_BOOT_CHUNK, n_boot - done)).astype(np.float64)
        mr = weighted_metrics(w, ref, ones)
        mc = weighted_metrics(w, cand, agree)
        for k in METRICS:
            out[k].append(mc[k] - mr[k])
    return {k: np.concatenate(v) for k, v in out.items()}


def slice_seed(seed: int, name: str) -> list[int]:
    """A per-slice seed: a slice's interval does not change when other slices are added."""
    return [int(seed), zlib.crc32(name.encode("utf-8"))]


def take_rows(p: Preds, idx: np.ndarray) -> Preds:
    return Preds(p.labels[idx], p.pred[idx], p.conf[idx], p.n_classes, p.n_bins)

