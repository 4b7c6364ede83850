"""The embedding graph computes what SentenceTransformer.encode computes (cosine >= 0.9999 per text),
for every pooling the graph supports, with Dense and Normalize; the variants run; the audit writes
its report with the FP32 graph's NDCG@10 equal to sentence-transformers' own."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.embed_fixtures import make_tiny_st_folder
from workbench.embed import read_folder
from workbench.embed.export import run_embed_export, validation_texts

TEXTS = ["a short one", "a somewhat longer review of a film that goes on for a while, with commas and more words",
         "!", "the plot: a man, a plan, a canal", "x " * 80]


@pytest.mark.slow
@pytest.mark.parametrize("pooling,dense,normalize", [("mean", 0, True), ("cls", 8, True), ("max", 0, False),
                                                     ("lasttoken", 0, True), ("mean_sqrt_len_tokens", 0, False)])
def test_tiny_export_matches_sentence_transformers(tmp_path, pooling, dense, normalize):
    folder = make_tiny_st_folder(tmp_path, pooling, normalize, dense)
    info = read_folder(folder)
    assert info.pooling == pooling and info.normalize == normalize and len(info.dense) == (1 if dense else 0)
    r = run_embed_export(folder, tmp_path / "export", texts=TEXTS)
    assert r.validation.passed and r.validation.min_cosine >= 0.9999, r.validation.text()
    assert r.dimension == (dense or 32) and r.pooling == pooling


@pytest.mark.slow
def test_minilm_export_matches_sentence_transformers_per_text(tmp_path):
    from workbench.embed.encode import OnnxEncoder
    from workbench.embed.export import cosine_rows, reference_encode
    from workbench.models.load import minilm_path

    texts = validation_texts(24)
    r = run_embed_export(minilm_path(), tmp_path / "export", texts=texts[:4])
    got = OnnxEncoder(r.onnx_path, r.load_tokenizer(), r.max_length).encode(texts, 8)
    ref = reference_encode(minilm_path(), texts, 8)
    assert (cosine_rows(ref, got) >= 0.9999).all()
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)  # Normalize is inside the graph


@pytest.mark.slow
@pytest.mark.heavy
def test_embed_audit_on_a_sliced_task_writes_the_report(tmp_path):
    from workbench.embed.audit import EmbedAuditConfig, run_embed_audit

    from workbench.models.load import minilm_path

    folder = minilm_path()  # the real model: a random tiny one ranks near-ties, which the 1e-3 check would not survive
    cfg = EmbedAuditConfig(max_queries=6, max_docs=40, presets=("dynamic",), n_boot=100, time_speed=False)
    res = run_embed_audit(folder, cfg, tmp_path / "audit", log=lambda line: None)
    s = json.loads(res.summary_path.read_text())
    assert s["task"] == "embedding" and s["export"]["validation"]["min_cosine"] >= 0.9999
    assert [v["name"] for v in s["evaluation"]["variants"]] == ["fused", "dynamic"]
    assert all(abs(d) <= 1e-3 for d in s["fp32_vs_sentence_transformers"].values())
    dyn = s["evaluation"]["variants"][1]
    assert {x["name"] for x in dyn["retrieval"]["slices"]} >= {"all"} and dyn["agreement"]["slices"]
    assert res.exit_code in (0, 3) and s["verdict"]["exit_code"] == res.exit_code
    page = res.report_path.read_text()
    assert "fig-retrieval-drift" in page and "fig-cosine" in page and "fig-overlap" in page
