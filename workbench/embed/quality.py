"""Quality without labels: each text's cosine between quantized and FP32 embeddings, and overlap@10 of its
neighbours among the texts, per slice with bootstrap intervals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .export import cosine_rows
from .retrieval import DOC_CHUNK, QUERY_CHUNK, Interval, mean_interval, top_k

COSINE_QUANTILES = (0.01, 0.05, 0.5)


@dataclass(frozen=True)
class SliceAgreement:
    name: str
    n: int
    cosine: Interval  # mean cosine FP32 vs variant, with its interval
    cosine_quantiles: dict[str, float]  # p1, p5, p50
    cosine_min: float
    overlap_at_10: Interval


@dataclass(frozen=True)
class WorstText:
    text: str
    cosine: float
    overlap: float


@dataclass(frozen=True)
class AgreementReport:
    variant: str
    slices: list[SliceAgreement]
    worst: list[WorstText] = field(default_factory=list)
    cosines: list[float] = field(default_factory=list)  # every text's cosine (for the distribution plot)

    def overall(self) -> SliceAgreement:
        return next(s for s in self.slices if s.name == "all")


def neighbour_overlap(fp32: np.ndarray, variant: np.ndarray, k: int = 10, chunk: int = QUERY_CHUNK,
                      doc_chunk: int = DOC_CHUNK) -> np.ndarray:
    """Per text, the share of its ``k`` nearest neighbours (itself left out) FP32 and the variant have in common."""
    n = len(fp32)
    if n < 2:
        return np.ones(n)
    exclude = list(range(n))
    a = top_k(fp32, fp32, k, exclude, chunk, doc_chunk)
    b = top_k(variant, variant, k, exclude, chunk, doc_chunk)
    return np.array([len(set(x.tolist()) & set(y.tolist())) / a.shape[1] for x, y in zip(a, b)])


def agreement(variant: str, texts: Sequence[str], fp32: np.ndarray, emb: np.ndarray, slices: dict[str, Sequence[int]],
              n_boot: int = 1000, seed: int = 0, n_worst: int = 10, k: int = 10) -> AgreementReport:
    cos = cosine_rows(fp32, emb)
    overlap = neighbour_overlap(fp32, emb, k)
    out = []
    for name, idx in slices.items():
        idx = np.asarray(idx, dtype=int)
        if not len(idx):
            continue
        c = cos[idx]
        out.append(SliceAgreement(name=name, n=len(idx), cosine=mean_interval(c, n_boot, seed),
                                  cosine_quantiles={f"p{int(q * 100)}": float(np.quantile(c, q)) for q in COSINE_QUANTILES},
                                  cosine_min=float(c.min()), overlap_at_10=mean_interval(overlap[idx], n_boot, seed)))
    worst = [WorstText(str(texts[i]), float(cos[i]), float(overlap[i])) for i in np.argsort(cos)[:n_worst]]
    return AgreementReport(variant=variant, slices=out, worst=worst, cosines=[float(x) for x in cos])
