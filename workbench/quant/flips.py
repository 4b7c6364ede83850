"""Predictions that changed (flips) and what a confidence threshold does to both models."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from .bootstrap import EvaluationError

DEFAULT_THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)


class FlipKind(str, enum.Enum):
    """How a prediction changed: wrong->right (fixed), right->wrong (broken), wrong->other wrong."""

    FIXED = "fixed"
    BROKEN = "broken"
    CHANGED = "changed"


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
    """Accepting predictions at confidence >= ``threshold`` (accuracy on the accepted; ``accepted_flips``: flips still shown)."""

    threshold: float
    reference_coverage: float
    reference_accuracy: float
    candidate_coverage: float
    candidate_accuracy: float
    decisions_changed: int
    newly_rejected: int
    newly_accepted: int
    accepted_flips: int


FLIP_SORT_KEYS = ("index", "confidence_change", "reference_confidence", "candidate_confidence", "kind", "label")


def sort_flips(flips: Iterable[Flip], by: str = "confidence_change", descending: bool = False) -> list[Flip]:
    """Sort flips by one of :data:`FLIP_SORT_KEYS` (ties broken by index)."""
    if by not in FLIP_SORT_KEYS:
        raise EvaluationError(f"flips can be sorted by one of {list(FLIP_SORT_KEYS)}, got {by!r}")
    ordered = sorted(flips, key=lambda f: f.index)
    return sorted(ordered, key=lambda f: getattr(f, by), reverse=descending)  # a FlipKind sorts as its text


def threshold_analysis(labels, reference_probs, candidate_probs, thresholds: Sequence[float] = DEFAULT_THRESHOLDS) -> list[ThresholdPoint]:
    """Accept/reject at each confidence threshold: both models' coverage and accuracy, and the decisions changed."""
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

