"""Figure builders for embedding models: read from fig.data and fig.layout, built from results made
by the real scoring functions on synthetic embeddings."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.embed.evaluate import EmbedBudget, evaluate_embeddings
from workbench.embed.retrieval import RetrievalTask
from workbench.plots import embed as eplots


class _Fixed:
    """An encoder returning fixed embeddings per text (FP32, or FP32 plus noise)."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def encode(self, texts, batch_size=32):
        return np.stack([self.table[t] for t in texts])


@pytest.fixture(scope="module")
def evaluation():
    rng = np.random.default_rng(0)
    docs = [f"doc {i}" for i in range(40)]
    queries = [f"query {i}" for i in range(8)]
    base = {t: rng.normal(size=8).astype(np.float32) for t in docs + queries}
    for i, q in enumerate(queries):  # each query sits next to its two relevant documents
        base[q] = base[docs[2 * i]] + base[docs[2 * i + 1]]
    noisy = {t: v + rng.normal(scale=0.8, size=8).astype(np.float32) for t, v in base.items()}
    task = RetrievalTask("toy", queries, docs, [[2 * i, 2 * i + 1] for i in range(8)], [-1] * 8,
                         {"all": list(range(8)), "first half": list(range(4))})
    return evaluate_embeddings({"fp32": _Fixed(base), "noisy": _Fixed(noisy)}, "fp32", task, n_boot=100,
                               budget=EmbedBudget(0.997, 0.01, 2))


def test_retrieval_drift_has_one_bar_per_slice_and_the_budget_line(evaluation):
    fig = eplots.retrieval_drift(evaluation)
    (bars,) = fig.data
    assert bars.name == "noisy" and list(bars.y) == ["all (n=8)", "first half (n=4)"]
    v = evaluation.variant("noisy").retrieval
    assert bars.x[0] == pytest.approx(v.overall().delta["ndcg@10"].value)
    assert any(s.x0 == -0.01 for s in fig.layout.shapes)


def test_cosine_and_overlap_figures(evaluation):
    box = eplots.cosine_distribution(evaluation)
    assert box.data[0].type == "box" and len(box.data[0].x) == evaluation.texts
    ov = eplots.neighbour_overlap(evaluation)
    assert all(0.0 <= x <= 1.0 for x in ov.data[0].x)


def test_speed_figure_labels_the_speedup():
    row = dict(batch=1, tokens=26, floor_ms=None)
    run = {"base": "encode", "threads": 2, "contended": True,
           "speeds": [dict(row, name="encode", ms_per_text=8.0, speedup=1.0, lo=1.0, hi=1.0),
                      dict(row, name="int8", ms_per_text=2.0, speedup=4.0, lo=3.5, hi=4.5)]}
    fig = eplots.embed_speed(run)
    assert [t.name for t in fig.data] == ["encode", "int8"] and fig.data[1].text[0] == "4.00x"
    assert "CONTENDED" in fig.layout.title.text


def test_empty_inputs_say_what_to_do(evaluation):
    with pytest.raises(ValueError, match="retrieval task"):
        eplots.retrieval_drift(type(evaluation)("", "", {}, []))
