"""The exact nearest-neighbour search in blocks of queries x documents: the same rankings, metrics and
neighbour overlap as one block holding every query and document, with blocks smaller than the corpus."""

from __future__ import annotations

import numpy as np
import pytest


def _embeddings(n_q: int, n_d: int, dim: int = 24, seed: int = 0):
    rng = np.random.default_rng(seed)
    docs = rng.normal(size=(n_d, dim)).astype(np.float32)
    docs[n_d // 2:n_d // 2 + 6] = docs[3]  # exact duplicates: equal scores, ranked by document index in any block shape
    return rng.normal(size=(n_q, dim)).astype(np.float32), docs


@pytest.mark.parametrize("chunk, doc_chunk", [(7, 13), (1, 10), (64, 11), (5, 1)])
def test_blocks_smaller_than_the_corpus_rank_as_one_block_does(chunk, doc_chunk):
    from workbench.embed.retrieval import per_query_metrics, top_k

    queries, docs = _embeddings(90, 301)
    exclude = [int(i) if i % 3 else -1 for i in range(len(queries))]
    whole = top_k(queries, docs, 10, exclude, chunk=len(queries), doc_chunk=len(docs))
    blocks = top_k(queries, docs, 10, exclude, chunk=chunk, doc_chunk=doc_chunk)
    np.testing.assert_array_equal(blocks, whole)
    assert whole.shape == (90, 10) and not any(e in row for e, row in zip(exclude, whole) if e >= 0)
    scores = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ (docs / np.linalg.norm(docs, axis=1, keepdims=True)).T
    for e, (i, row) in zip(exclude, enumerate(whole)):  # best first: scores fall along each ranking
        s = scores[i, row]
        assert (np.diff(s) <= 1e-6).all() and (e < 0 or scores[i, e] <= s[0])
    relevant = [[int(d) for d in np.random.default_rng(i).choice(len(docs), 3, replace=False)] for i in range(len(queries))]
    a, b = per_query_metrics(whole, relevant), per_query_metrics(blocks, relevant)
    for m in a:
        np.testing.assert_array_equal(a[m], b[m])


def test_duplicate_documents_are_ranked_by_their_index():
    from workbench.embed.retrieval import top_k

    queries, docs = _embeddings(30, 80)
    copies = [3, *range(40, 46)]
    ranked = top_k(docs[[3]], docs, 7, chunk=1, doc_chunk=5)[0]
    assert ranked.tolist() == copies  # the query is document 3: it and its six copies score 1.0


def test_neighbour_overlap_in_blocks_is_the_overlap_in_one_block():
    from workbench.embed.quality import neighbour_overlap

    base, _ = _embeddings(150, 10, seed=1)
    noisy = base + np.random.default_rng(2).normal(scale=0.3, size=base.shape).astype(np.float32)
    whole = neighbour_overlap(base, noisy, 10, chunk=len(base), doc_chunk=len(base))
    blocks = neighbour_overlap(base, noisy, 10, chunk=16, doc_chunk=21)
    np.testing.assert_array_equal(blocks, whole)
    assert 0 < whole.mean() < 1  # the noise moved some neighbours and kept others: the overlap was really compared
