"""Retrieval with labels: NDCG@10, recall@10 and MRR@10 per query slice, FP32 against a variant with paired
bootstrap intervals. The built-in task: in the shipped Rotten Tomatoes corpus, plot descriptions (or reviews,
themselves left out) ask for the reviews of their movie.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .folder import EmbedError, as_embed_error

K = 10
QUERY_KINDS = ("plots", "reviews")
REVIEW_CATEGORIES = ("fresh", "rotten")
METRICS = ("ndcg@10", "recall@10", "mrr@10")


def corpus_frame():
    """Reviews (fresh/rotten) and plot descriptions with their movie, empty texts dropped."""
    import pandas as pd

    from ..data.load import reviews_path

    raw = pd.read_csv(reviews_path())
    raw["text"] = raw["text"].astype(str).str.strip()
    raw = raw[raw["text"].str.len() > 0]
    return raw[["category", "text", "movie_name"]].reset_index(drop=True)


@dataclass(frozen=True)
class RetrievalTask:
    """``relevant``: indices into ``docs``; ``exclude[i]``: the document left out of query ``i``'s ranking (itself, or -1)."""

    name: str
    queries: list[str]
    docs: list[str]
    relevant: list[list[int]]
    exclude: list[int]
    query_slices: dict[str, list[int]]
    description: str = ""

    def __post_init__(self) -> None:
        if not self.queries:
            raise EmbedError(f"retrieval task {self.name!r}: the query set is empty; give at least one query with a "
                             "relevant document")
        if not self.docs:
            raise EmbedError(f"retrieval task {self.name!r}: the corpus is empty; give at least one document")
        if len(self.relevant) != len(self.queries) or len(self.exclude) != len(self.queries):
            raise EmbedError(f"retrieval task {self.name!r}: {len(self.queries)} queries but {len(self.relevant)} "
                             "relevance lists")

    def only(self, keep: Sequence[int]) -> "RetrievalTask":
        """The task with only the queries at ``keep`` (in that order), its slices renumbered and empty ones dropped."""
        new = {old: i for i, old in enumerate(keep)}
        slices = {k: [new[i] for i in v if i in new] for k, v in self.query_slices.items()}
        return dataclasses.replace(self, queries=[self.queries[i] for i in keep], relevant=[self.relevant[i] for i in keep],
                                   exclude=[self.exclude[i] for i in keep], query_slices={k: v for k, v in slices.items() if v})


def length_slices(texts: Sequence[str], prefix: str = "length") -> dict[str, list[int]]:
    """Short / medium / long by word count, cut at the tertiles of these texts."""
    n = np.array([len(t.split()) for t in texts])
    if len(n) < 3:
        return {}
    lo, hi = np.quantile(n, [1 / 3, 2 / 3])
    out = {f"{prefix}: short (<= {int(lo)} words)": np.flatnonzero(n <= lo),
           f"{prefix}: medium": np.flatnonzero((n > lo) & (n <= hi)),
           f"{prefix}: long (> {int(hi)} words)": np.flatnonzero(n > hi)}
    return {k: v.tolist() for k, v in out.items() if len(v)}


def column_slices(values: Sequence, column: str, max_values: int = 12) -> dict[str, list[int]]:
    """One slice per value, for the ``max_values`` most common."""
    import pandas as pd

    s = pd.Series([str(v) for v in values])
    return {f"{column}: {v}": np.flatnonzero(s.to_numpy() == v).tolist() for v in s.value_counts().index[:max_values]}


def builtin_task(queries: str = "plots", max_queries: Optional[int] = None, max_docs: Optional[int] = None,
                 seed: int = 0) -> RetrievalTask:
    """The first ``max_queries`` queries (reviews drawn with ``seed``), their relevant reviews, and others drawn up to ``max_docs``."""
    if queries not in QUERY_KINDS:
        raise EmbedError(f"queries must be one of {', '.join(QUERY_KINDS)}, got {queries!r}")
    frame = corpus_frame()
    reviews = frame[frame["category"].isin(REVIEW_CATEGORIES)].drop_duplicates(subset="text").reset_index(drop=True)
    by_movie = reviews.groupby("movie_name").indices
    rng = np.random.default_rng(seed)
    if queries == "plots":
        plots = frame[frame["category"] == "plot"].drop_duplicates(subset="text")
        plots = plots[plots["movie_name"].isin(by_movie)]
        q_rows = plots.reset_index(drop=True)
        if max_queries is not None:
            q_rows = q_rows.iloc[:max_queries]
        q_docs = [-1] * len(q_rows)
    else:
        counts = reviews["movie_name"].map(reviews["movie_name"].value_counts())
        candidates = np.flatnonzero(counts.to_numpy() >= 2)
        picked = np.sort(rng.permutation(candidates)[: (max_queries or len(candidates))])
        q_rows = reviews.iloc[picked].reset_index(drop=True)
        q_docs = picked.tolist()
    needed = sorted({int(i) for m in q_rows["movie_name"] for i in by_movie[m]})
    keep = np.arange(len(reviews))
    if max_docs is not None and max_docs < len(reviews):
        others = np.setdiff1d(keep, needed)
        extra = rng.permutation(others)[: max(0, max_docs - len(needed))]
        keep = np.sort(np.concatenate([np.asarray(needed, dtype=int), extra]))
    position = {int(old): new for new, old in enumerate(keep)}
    docs = reviews.iloc[keep]
    relevant, exclude = [], []
    for movie, own in zip(q_rows["movie_name"], q_docs):
        relevant.append([position[int(i)] for i in by_movie[movie] if int(i) != own and int(i) in position])
        exclude.append(position.get(int(own), -1) if own >= 0 else -1)
    q_texts = q_rows["text"].tolist()
    slices = {"all": list(range(len(q_texts))), **length_slices(q_texts)}
    if queries == "reviews":
        slices.update(column_slices(q_rows["category"], "category"))
    n_rel = np.array([len(r) for r in relevant])
    if len(n_rel) >= 3:
        med = int(np.median(n_rel))
        slices[f"relevant: <= {med} reviews"] = np.flatnonzero(n_rel <= med).tolist()
        slices[f"relevant: > {med} reviews"] = np.flatnonzero(n_rel > med).tolist()
    keep_q = [i for i, r in enumerate(relevant) if r]  # not a review whose movie's other reviews were all left out
    what = ("plot descriptions ask for the reviews of their movie" if queries == "plots"
            else "reviews ask for the other reviews of their movie")
    task = RetrievalTask(name=f"built-in: {queries} -> reviews", queries=q_texts, docs=docs["text"].tolist(),
                         relevant=relevant, exclude=exclude, query_slices={k: v for k, v in slices.items() if v},
                         description=f"{what}: {len(keep_q)} queries, {len(docs)} reviews of {docs['movie_name'].nunique()} movies")
    return task if len(keep_q) == len(relevant) else task.only(keep_q)


def load_pairs_task(corpus: str | os.PathLike, pairs: str | os.PathLike, text_column: str = "text",
                    id_column: Optional[str] = "id", query_column: str = "query", relevant_column: str = "relevant",
                    slice_columns: Sequence[str] = ()) -> RetrievalTask:
    """One ``pairs`` row per query and relevant document, named by ``id_column`` (its text when ``corpus`` has no
    such column); a query's slice is its first row's ``slice_columns`` value."""
    from ..data.load import DataError, read_table

    with as_embed_error(DataError):
        docs = read_table(corpus)
    try:
        qs = read_table(pairs)
    except DataError as exc:
        if "no rows" in str(exc):
            raise EmbedError(f"{pairs}: the query set is empty (the file has no rows); give one row per query and relevant "
                             "document") from exc
        raise EmbedError(str(exc)) from exc
    for frame, col, flag, path in ((docs, text_column, "text_column", corpus), (qs, query_column, "query_column", pairs),
                                   (qs, relevant_column, "relevant_column", pairs)):
        if col not in frame.columns:
            raise EmbedError(f"{path}: no column {col!r} ({flag}); its columns are {list(frame.columns)[:12]}")
    for col in slice_columns:
        if col not in qs.columns:
            raise EmbedError(f"{pairs}: no slice column {col!r}; its columns are {list(qs.columns)[:12]}")
    doc_texts = docs[text_column].astype(str).tolist()
    use_ids = bool(id_column) and id_column in docs.columns
    keys = docs[id_column].astype(str).tolist() if use_ids else doc_texts
    index = {k: i for i, k in reversed(list(enumerate(keys)))}  # a key's first row
    qs = qs.dropna(subset=[query_column, relevant_column])
    qs = qs[qs[query_column].astype(str).str.strip().str.len() > 0]
    if qs.empty:
        raise EmbedError(f"{pairs}: the query set is empty (no row with both {query_column!r} and {relevant_column!r}); "
                         "give one row per query and relevant document")
    wanted = qs[relevant_column].astype(str)
    unknown = sorted(set(wanted) - set(index))
    if unknown:
        by = f"{id_column!r} of {corpus}" if use_ids else f"the texts of {corpus} (it has no {id_column!r} column)"
        raise EmbedError(f"{pairs}: {len(unknown)} relevant document(s) are not in the corpus, e.g. {unknown[0]!r} "
                         f"(matched against {by}); fix the {relevant_column!r} column or add the documents")
    first_rows: dict[str, int] = {}  # each query's first row, in the order the queries come
    docs_of: dict[str, dict[int, None]] = {}  # each query's relevant documents, once each, in their order
    for row, (q, r) in enumerate(zip(qs[query_column].astype(str), wanted)):
        first_rows.setdefault(q, row)
        docs_of.setdefault(q, {})[index[r]] = None
    queries, relevant = list(first_rows), [list(d) for d in docs_of.values()]
    slices = {"all": list(range(len(queries))), **length_slices(queries)}
    for col in slice_columns:
        slices.update(column_slices(qs[col].iloc[list(first_rows.values())].tolist(), col))
    return RetrievalTask(name=f"{Path(pairs).name} -> {Path(corpus).name}", queries=queries, docs=doc_texts,
                         relevant=relevant, exclude=[-1] * len(queries), query_slices=slices,
                         description=f"{len(queries)} queries, {len(doc_texts)} documents")


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


QUERY_CHUNK = 256   # queries scored at once
DOC_CHUNK = 8192    # documents each query chunk is scored against at once


def top_k(query_emb: np.ndarray, doc_emb: np.ndarray, k: int = K, exclude: Optional[Sequence[int]] = None,
          chunk: int = QUERY_CHUNK, doc_chunk: int = DOC_CHUNK) -> np.ndarray:
    """Each query's ``k`` nearest documents by cosine, best first, ties to the lower index. Exact, in blocks (about 40 MiB
    of scores at the defaults); scores summed in float64, rounded to float32, so they do not depend on the block shapes."""
    q, d = _unit(query_emb), _unit(doc_emb)
    k = min(k, len(d) - (1 if exclude is not None and any(e >= 0 for e in exclude) else 0))
    out = np.empty((len(q), k), dtype=np.int64)
    for s in range(0, len(q), chunk):
        qs = q[s:s + chunk]
        ex = None if exclude is None else np.asarray(exclude[s:s + chunk], dtype=np.int64)
        best_s, best_i = np.empty((len(qs), 0), dtype=np.float32), np.empty((len(qs), 0), dtype=np.int64)
        for t in range(0, len(d), doc_chunk):
            scores = (qs.astype(np.float64) @ d[t:t + doc_chunk].T.astype(np.float64)).astype(np.float32)
            if ex is not None:
                rows = np.flatnonzero((ex >= t) & (ex < t + scores.shape[1]))
                scores[rows, ex[rows] - t] = -np.inf
            ids = np.broadcast_to(np.arange(t, t + scores.shape[1], dtype=np.int64), scores.shape)
            best_s, best_i = best_of(np.concatenate([best_s, scores], axis=1), np.concatenate([best_i, ids], axis=1), k)
        out[s:s + chunk] = best_i
    return out


def best_of(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` highest ``scores`` with their ``ids``; ties by the lower id, whatever the blocks."""
    if scores.shape[1] > k:
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        kth = np.take_along_axis(scores, part, axis=1).min(axis=1, keepdims=True)
        tied = np.flatnonzero((scores >= kth).sum(axis=1) > k)  # a tie across the k-th place: choose by id
        for r in tied:
            part[r] = np.lexsort((ids[r], -scores[r]))[:k]
        scores, ids = np.take_along_axis(scores, part, axis=1), np.take_along_axis(ids, part, axis=1)
    order = np.lexsort((ids, -scores), axis=1)
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(ids, order, axis=1)


def per_query_metrics(ranked: np.ndarray, relevant: Sequence[Sequence[int]], k: int = K) -> dict[str, np.ndarray]:
    """NDCG@k, recall@k and MRR@k of each query (binary relevance), from its ranked documents."""
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    ndcg, recall, mrr = (np.zeros(len(ranked)) for _ in range(3))
    for i, (row, rel) in enumerate(zip(ranked, relevant)):
        rel = set(int(r) for r in rel)
        hits = np.array([int(d) in rel for d in row[:k]], dtype=float)
        ideal = disc[: min(len(rel), k)].sum()
        ndcg[i] = (hits * disc[: len(hits)]).sum() / ideal if ideal > 0 else 0.0
        recall[i] = hits.sum() / len(rel) if rel else 0.0
        first = np.flatnonzero(hits)
        mrr[i] = 1.0 / (first[0] + 1) if len(first) else 0.0
    return {"ndcg@10": ndcg, "recall@10": recall, "mrr@10": mrr}


@dataclass(frozen=True)
class Interval:
    value: float
    lo: float
    hi: float


@dataclass(frozen=True)
class SliceRetrieval:
    name: str
    n: int
    fp32: dict[str, float]
    variant: dict[str, float]
    delta: dict[str, Interval]
    overlap_at_10: float  # mean share of a query's top 10 that stays the same

    @property
    def ndcg_ratio(self) -> float:
        base = self.fp32["ndcg@10"]
        return self.variant["ndcg@10"] / base if base > 0 else 1.0


@dataclass(frozen=True)
class ChangedQuery:
    query: str
    ndcg_fp32: float
    ndcg_variant: float
    overlap: float
    before: list[tuple[str, bool]]  # the top 5 documents and whether each is relevant
    after: list[tuple[str, bool]]


@dataclass(frozen=True)
class RetrievalComparison:
    task: str
    variant: str
    slices: list[SliceRetrieval]
    changed: list[ChangedQuery] = field(default_factory=list)

    def overall(self) -> SliceRetrieval:
        return next(s for s in self.slices if s.name == "all")

    @property
    def ndcg_ratio(self) -> float:
        return self.overall().ndcg_ratio


def paired_bootstrap(base: np.ndarray, cand: np.ndarray, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> Interval:
    """Mean of ``cand - base`` with a seeded percentile bootstrap interval (under two items: the mean)."""
    from scipy.stats import bootstrap

    d = np.asarray(cand, dtype=float) - np.asarray(base, dtype=float)
    mean = float(d.mean()) if len(d) else 0.0
    if len(d) < 2:
        return Interval(mean, mean, mean)
    ci = bootstrap((d,), np.mean, n_resamples=int(n_boot), confidence_level=level, method="percentile", rng=np.random.default_rng(seed))
    return Interval(mean, float(ci.confidence_interval.low), float(ci.confidence_interval.high))


def mean_interval(x: np.ndarray, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> Interval:
    return paired_bootstrap(np.zeros(len(x)), x, n_boot, seed, level)


def compare_retrieval(task: RetrievalTask, variant: str, ranked_fp32: np.ndarray, ranked_variant: np.ndarray,
                      n_boot: int = 1000, seed: int = 0, n_changed: int = 5) -> RetrievalComparison:
    """Per slice, FP32 against the variant; and the ``n_changed`` queries whose NDCG@10 (then top 10) moved most."""
    m0 = per_query_metrics(ranked_fp32, task.relevant)
    m1 = per_query_metrics(ranked_variant, task.relevant)
    overlap = np.array([len(set(a.tolist()) & set(b.tolist())) / max(1, len(a)) for a, b in zip(ranked_fp32, ranked_variant)])
    slices = []
    for name, idx in task.query_slices.items():
        idx = np.asarray(idx, dtype=int)
        slices.append(SliceRetrieval(
            name=name, n=len(idx), fp32={m: float(m0[m][idx].mean()) for m in METRICS},
            variant={m: float(m1[m][idx].mean()) for m in METRICS},
            delta={m: paired_bootstrap(m0[m][idx], m1[m][idx], n_boot, seed) for m in METRICS},
            overlap_at_10=float(overlap[idx].mean())))
    moved = np.lexsort((overlap, -np.abs(m1["ndcg@10"] - m0["ndcg@10"])))[:n_changed]

    def top(row, i):
        rel = set(task.relevant[i])
        return [(task.docs[int(d)], int(d) in rel) for d in row[:5]]

    changed = [ChangedQuery(task.queries[i], float(m0["ndcg@10"][i]), float(m1["ndcg@10"][i]), float(overlap[i]),
                            top(ranked_fp32[i], i), top(ranked_variant[i], i)) for i in moved if overlap[i] < 1.0]
    return RetrievalComparison(task=task.name, variant=variant, slices=slices, changed=changed)


def task_texts(task: RetrievalTask) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Every text once (a review can be a query and a document), and the rows of the queries and the documents."""
    texts = list(dict.fromkeys([*task.queries, *task.docs]))
    row = {t: i for i, t in enumerate(texts)}
    return texts, np.array([row[q] for q in task.queries], dtype=int), np.array([row[d] for d in task.docs], dtype=int)


def score_task(task: RetrievalTask, query_emb: np.ndarray, doc_emb: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    """The rankings and the mean metrics over all queries."""
    ranked = top_k(query_emb, doc_emb, K, task.exclude)
    m = per_query_metrics(ranked, task.relevant)
    return ranked, {k: float(v.mean()) for k, v in m.items()}
