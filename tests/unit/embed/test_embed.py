"""Embedding models: reading a sentence-transformers folder, the retrieval metrics, the built-in
task, agreement without labels, and the bad inputs (one line each)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from workbench.embed import EmbedError, read_folder, task_of_folder
from workbench.embed.quality import agreement, neighbour_overlap
from workbench.embed.retrieval import (Interval, RetrievalTask, builtin_task, compare_retrieval, load_pairs_task, paired_bootstrap,
                                       per_query_metrics, top_k)
from workbench.models.load import minilm_path


def test_builtin_folder_is_read_as_an_embedding_model():
    info = read_folder(minilm_path())
    assert task_of_folder(minilm_path()) == "embedding"
    assert (info.pooling, info.normalize, info.dimension, info.max_seq_length) == ("mean", True, 384, 256)
    assert info.modules == ("Transformer", "Pooling", "Normalize")


def _copy_folder(tmp_path):
    dst = tmp_path / "st"
    src = minilm_path()
    dst.mkdir()
    for f in ("modules.json", "config.json", "sentence_bert_config.json"):
        shutil.copy(src / f, dst / f)
    shutil.copytree(src / "1_Pooling", dst / "1_Pooling")
    return dst


def test_folder_without_pooling_config_is_one_line(tmp_path):
    dst = _copy_folder(tmp_path)
    shutil.rmtree(dst / "1_Pooling")
    with pytest.raises(EmbedError, match="no pooling config") as e:
        read_folder(dst)
    assert "\n" not in str(e.value)
    modules = json.loads((dst / "modules.json").read_text())
    (dst / "modules.json").write_text(json.dumps([m for m in modules if "Pooling" not in m["type"]]))
    with pytest.raises(EmbedError, match="no pooling config"):
        read_folder(dst)


def test_pooling_config_with_two_modes_is_refused(tmp_path):
    dst = _copy_folder(tmp_path)
    cfg = json.loads((dst / "1_Pooling" / "config.json").read_text())
    cfg["pooling_mode_cls_token"] = True
    (dst / "1_Pooling" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(EmbedError, match="exactly one of"):
        read_folder(dst)


def test_metrics_on_a_hand_ranked_example():
    ranked = np.array([[3, 1, 7, 0, 2, 4, 5, 6, 8, 9], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]])
    m = per_query_metrics(ranked, [[1, 2], [42]])
    # query 0: hits at ranks 2 and 5 of 2 relevant
    dcg = 1 / np.log2(3) + 1 / np.log2(6)
    idcg = 1 + 1 / np.log2(3)
    assert m["ndcg@10"][0] == pytest.approx(dcg / idcg)
    assert m["recall@10"][0] == 1.0 and m["mrr@10"][0] == 0.5
    assert m["ndcg@10"][1] == 0.0 and m["mrr@10"][1] == 0.0


def test_top_k_ranks_by_cosine_and_leaves_out_the_query_itself():
    docs = np.array([[1, 0], [0.9, 0.1], [0, 1], [-1, 0]], dtype=np.float32)
    assert top_k(docs[:1], docs, 2).tolist() == [[0, 1]]
    assert top_k(docs[:1], docs, 2, exclude=[0]).tolist() == [[1, 2]]


def test_paired_bootstrap_interval_covers_the_mean_and_sees_a_shift():
    rng = np.random.default_rng(0)
    a = rng.random(200)
    same = paired_bootstrap(a, a, 200)
    assert same.value == 0 and same.lo == 0 and same.hi == 0
    b = a - 0.05 + rng.normal(0, 0.01, 200)
    worse = paired_bootstrap(a, b, 500)
    assert worse.hi < 0 and worse.lo <= worse.value <= worse.hi
    # the items resampled with the seed's generator, the 2.5% and 97.5% quantiles of the resampled means
    boots = (b - a)[np.random.default_rng(0).integers(0, 200, size=(500, 200))].mean(axis=1)
    assert (worse.lo, worse.hi) == pytest.approx(tuple(np.quantile(boots, [0.025, 0.975])), rel=1e-12)
    assert paired_bootstrap(a, b, 500) == worse and paired_bootstrap(a, b, 500, seed=1) != worse
    assert paired_bootstrap(a[:1], b[:1]) == Interval(b[0] - a[0], b[0] - a[0], b[0] - a[0])
    assert paired_bootstrap(a[:0], b[:0]) == Interval(0.0, 0.0, 0.0)


def test_builtin_task_relevant_reviews_are_the_same_movie():
    from workbench.embed.retrieval import corpus_frame

    task = builtin_task("plots", max_queries=6, max_docs=150)
    frame = corpus_frame()
    movie_of = dict(zip(frame["text"], frame["movie_name"]))
    assert len(task.queries) == 6 and task.query_slices["all"] == list(range(6))
    for q, rel in zip(task.queries, task.relevant):
        assert rel and {movie_of[task.docs[i]] for i in rel} == {movie_of[q]}
        assert len(rel) == sum(movie_of[d] == movie_of[q] for d in task.docs)
    rv = builtin_task("reviews", max_queries=10, max_docs=200)
    for q, rel, ex in zip(rv.queries, rv.relevant, rv.exclude):
        assert task_docs_text(rv, ex) == q and ex not in rel
    assert any(k.startswith("category: ") for k in rv.query_slices)


def task_docs_text(task, i):
    return task.docs[i]


def test_compare_retrieval_finds_the_changed_query():
    task = RetrievalTask("toy", ["q0", "q1"], [f"d{i}" for i in range(12)], [[0], [1]], [-1, -1],
                         {"all": [0, 1], "one": [1]})
    r0 = np.array([list(range(10)), [1, *range(2, 11)]])
    r1 = np.array([list(range(10)), [*range(2, 12)]])  # query 1 lost its relevant document
    cmp = compare_retrieval(task, "v", r0, r1, n_boot=100)
    assert cmp.overall().fp32["ndcg@10"] == 1.0 and cmp.overall().variant["ndcg@10"] == 0.5
    assert [c.query for c in cmp.changed] == ["q1"] and cmp.changed[0].before[0] == ("d1", True)
    assert next(s for s in cmp.slices if s.name == "one").delta["ndcg@10"].value == -1.0


def test_a_task_cut_to_some_queries_renumbers_its_slices_and_drops_the_empty_ones():
    task = RetrievalTask("toy", ["q0", "q1", "q2"], ["d0", "d1"], [[0], [1], [0, 1]], [-1, 0, -1],
                         {"all": [0, 1, 2], "odd": [1], "first": [0]})
    cut = task.only([2, 1])
    assert (cut.queries, cut.relevant, cut.exclude) == (["q2", "q1"], [[0, 1], [1]], [-1, 0])
    assert cut.query_slices == {"all": [1, 0], "odd": [1]}  # "first" lost its only query
    assert cut.docs == task.docs and cut.name == task.name


def test_agreement_is_perfect_for_identical_embeddings_and_not_for_noisy_ones():
    rng = np.random.default_rng(1)
    e = rng.normal(size=(60, 16)).astype(np.float32)
    assert neighbour_overlap(e, e).min() == 1.0
    noisy = e + rng.normal(scale=0.5, size=e.shape).astype(np.float32)
    rep = agreement("v", [f"t{i}" for i in range(60)], e, noisy, {"all": list(range(60)), "half": list(range(30))}, n_boot=100)
    assert rep.overall().cosine.value < 0.99 and rep.overall().overlap_at_10.value < 1.0
    assert rep.worst[0].cosine == min(rep.cosines)


def _pairs(tmp_path, relevant):
    corpus = tmp_path / "corpus.csv"
    corpus.write_text("id,text\na,the first document\nb,the second document\n")
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("query,relevant\n" + "".join(f"question {i},{r}\n" for i, r in enumerate(relevant)))
    return corpus, pairs


def test_pairs_file(tmp_path):
    corpus, pairs = _pairs(tmp_path, ["a", "b", "a"])
    task = load_pairs_task(corpus, pairs)
    assert task.queries == ["question 0", "question 1", "question 2"] and task.relevant == [[0], [1], [0]]


def test_pairs_naming_unknown_documents_or_no_query_are_one_line(tmp_path):
    corpus, pairs = _pairs(tmp_path, ["a", "zzz"])
    with pytest.raises(EmbedError, match="1 relevant document.*'zzz'") as e:
        load_pairs_task(corpus, pairs)
    assert "\n" not in str(e.value)
    corpus, pairs = _pairs(tmp_path, [])
    with pytest.raises(EmbedError, match="query set is empty"):
        load_pairs_task(corpus, pairs)


@pytest.mark.parametrize("case", ["no-pooling", "unknown-docs", "empty-queries"])
def test_cli_bad_inputs_exit_2_and_write_nothing(tmp_path, capsys, case):
    from workbench.cli import main

    model = minilm_path()
    args = ["--data", "builtin"]
    if case == "no-pooling":
        model = _copy_folder(tmp_path)
        shutil.rmtree(model / "1_Pooling")
    else:
        corpus, pairs = _pairs(tmp_path, ["a", "nope"] if case == "unknown-docs" else [])
        args = ["--data", str(corpus), "--queries", str(pairs)]
    out = tmp_path / "out"
    code = main(["audit", "--model", str(model), *args, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert {"no-pooling": "no pooling config", "unknown-docs": "not in the corpus", "empty-queries": "empty"}[case] in err
    assert not out.exists()


def test_task_flag_overrides_the_folder(tmp_path, capsys):
    from workbench.cli import main

    out = tmp_path / "out"
    code = main(["audit", "--model", str(minilm_path()), "--data", str(tmp_path / "none.csv"), "--task", "classification",
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "no classification head" in err and "--task embedding" in err
    assert not out.exists()
