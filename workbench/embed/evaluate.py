"""Every variant scored against the FP32 graph on the same texts (retrieval with labels, agreement without),
and the budget in NDCG@10 terms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import numpy as np

from .folder import EmbedError
from .quality import AgreementReport, agreement
from .retrieval import RetrievalComparison, RetrievalTask, compare_retrieval, score_task, task_texts

DEFAULT_MIN_NDCG_RATIO = 0.997
DEFAULT_MAX_SLICE_DROP = 0.01
DEFAULT_MIN_SLICE_SIZE = 20


@dataclass(frozen=True)
class EmbedBudget:
    min_ndcg_ratio: float = field(default=DEFAULT_MIN_NDCG_RATIO, metadata={"help": (
        "share of FP32's NDCG@10 a variant must keep over all queries (0.997 = 99.7%)")})
    max_slice_drop: float = field(default=DEFAULT_MAX_SLICE_DROP, metadata={"help": (
        "NDCG@10 a variant may lose on any query slice big enough to judge")})
    min_slice_size: int = field(default=DEFAULT_MIN_SLICE_SIZE, metadata={"help": "queries a slice needs to be judged"})

    def __post_init__(self) -> None:
        if not 0.0 < float(self.min_ndcg_ratio) <= 1.5:
            raise EmbedError(f"min_ndcg_ratio must be in (0, 1.5], got {self.min_ndcg_ratio} (0.997 = keep 99.7% of FP32's NDCG@10)")
        if float(self.max_slice_drop) < 0:
            raise EmbedError(f"max_slice_drop must be at least 0 (an NDCG@10 difference), got {self.max_slice_drop}")
        if isinstance(self.min_slice_size, bool) or not isinstance(self.min_slice_size, int) or self.min_slice_size < 1:
            raise EmbedError(f"min_slice_size must be a whole number of queries of at least 1, got {self.min_slice_size!r}")

    def budget_check(self, cmp: RetrievalComparison, strict: bool = False):
        """The check in the search's terms, drops in NDCG@10; ``strict`` judges a slice on its interval's worse end."""
        from ..quant.budget import BudgetCheck

        why = []
        overall = cmp.overall()
        within_overall = cmp.ndcg_ratio >= self.min_ndcg_ratio
        if not within_overall:
            why.append(f"NDCG@10 at {cmp.ndcg_ratio:.2%} of FP32's (budget {self.min_ndcg_ratio:.2%})")
        worst, worst_drop, checked, skipped = "", 0.0, 0, []
        for s in cmp.slices:
            if s.name == "all":
                continue
            if s.n < self.min_slice_size:
                skipped.append(s.name)
                continue
            checked += 1
            drop = -s.delta["ndcg@10"].lo if strict else s.fp32["ndcg@10"] - s.variant["ndcg@10"]
            if drop > worst_drop or not worst:
                worst, worst_drop = s.name, drop
            if drop > self.max_slice_drop + 1e-12:
                why.append(f"slice {s.name!r} ({s.n} queries) lost {drop:.4f} NDCG@10 (budget {self.max_slice_drop})")
        return BudgetCheck(overall.fp32["ndcg@10"] - overall.variant["ndcg@10"], worst, worst_drop, within_overall,
                           len(why) == (0 if within_overall else 1), why, checked, skipped)


@dataclass(frozen=True)
class VariantQuality:
    name: str
    retrieval: Optional[RetrievalComparison]
    agreement: Optional[AgreementReport]
    meets_budget: Optional[bool] = None
    budget_reasons: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class EmbedEvaluation:
    task: str
    task_description: str
    fp32_metrics: dict[str, float]
    variants: list[VariantQuality]
    reference_metrics: Optional[dict[str, float]] = None  # the same task scored with SentenceTransformer.encode
    budget: EmbedBudget = field(default_factory=EmbedBudget)
    slice_sizes: dict[str, int] = field(default_factory=dict)
    texts: int = 0

    def variant(self, name: str) -> VariantQuality:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"no variant {name!r}; scored: {[v.name for v in self.variants]}")


def evaluate_embeddings(encoders: Mapping[str, object], base: str = "fp32", task: Optional[RetrievalTask] = None,
                        texts: Sequence[str] = (), text_slices: Optional[Mapping[str, Sequence[int]]] = None,
                        budget: Optional[EmbedBudget] = None, n_boot: int = 1000, seed: int = 0, batch_size: int = 32,
                        reference_folder=None, log=lambda line: None) -> EmbedEvaluation:
    """Each encoder against ``base`` on ``task`` (retrieval and agreement), else on ``texts`` (agreement);
    ``reference_folder``: also score the task with ``SentenceTransformer.encode``, the FP32 graph's independent check."""
    if base not in encoders:
        raise EmbedError(f"base {base!r} is not among the encoders {list(encoders)}")
    if task is None and not texts:
        raise EmbedError("nothing to score: give a retrieval task or texts")
    budget = budget or EmbedBudget()
    if task is not None:
        texts, q_of, d_of = task_texts(task)
        text_slices = {"queries": sorted(set(q_of.tolist())), "documents": sorted(set(d_of.tolist()))}
    texts = list(texts)
    text_slices = {"all": list(range(len(texts))), **(text_slices or {})}
    embeddings: dict[str, np.ndarray] = {}
    for name, enc in encoders.items():
        log(f"encoding {len(texts)} texts with {name}")
        embeddings[name] = enc.encode(texts, batch_size)
    fp32_metrics: dict[str, float] = {}
    ref_metrics = None
    ranked: dict[str, np.ndarray] = {}
    if task is not None:
        for name, emb in embeddings.items():
            ranked[name], m = score_task(task, emb[q_of], emb[d_of])
            if name == base:
                fp32_metrics = m
        if reference_folder is not None:
            from .export import reference_encode

            log("scoring the task with SentenceTransformer.encode (independent check of the FP32 graph)")
            ref = reference_encode(reference_folder, texts, batch_size)
            _, ref_metrics = score_task(task, ref[q_of], ref[d_of])
    out = []
    for name, emb in embeddings.items():
        if name == base:
            continue
        cmp = compare_retrieval(task, name, ranked[base], ranked[name], n_boot, seed) if task is not None else None
        agr = agreement(name, texts, embeddings[base], emb, text_slices, n_boot, seed)
        chk = budget.budget_check(cmp) if cmp is not None else None
        out.append(VariantQuality(name, cmp, agr, chk.feasible if chk else None, chk.violations if chk else []))
    return EmbedEvaluation(task=task.name if task else "", task_description=task.description if task else "",
                           fp32_metrics=fp32_metrics, variants=out, reference_metrics=ref_metrics, budget=budget,
                           slice_sizes={k: len(v) for k, v in task.query_slices.items()} if task else {}, texts=len(texts))
