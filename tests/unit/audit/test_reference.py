"""A fixed-seed audit of a classifier and of an embedding model gives the predictions and the per-slice
metrics of the small committed reference (tests/fixtures/reference, made by ``helpers.reference``):
every row's FP32 logits and class, every variant's class for every row, every slice's accuracy under
FP32 and under each variant; NDCG@10, recall@10 and MRR@10 of every query slice under the FP32 graph
and each variant; and which variants each audit found within its budget (which of those is
chosen depends on timing, so it is not compared).

What is compared exactly and what within a tolerance: the INT8 graphs are built with the reference's
pinned 7-bit weights on every CPU (no u8s8 product saturates, so their integer sums are the same
anywhere); float sums may be ordered differently by another CPU's kernels, so logits are compared
within ``LOGIT_TOL`` and the retrieval metrics within ``METRIC_TOL``, far below what one changed class
(1/240 of a slice's accuracy) or one document moved across the top 10 (about 0.01 of a slice's NDCG@10)
moves. A change to the audit that moves a figure must come with a new reference, made on purpose."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import reference

LOGIT_TOL = 1e-4
METRIC_TOL = 1e-6


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    expected = json.loads(reference.EXPECTED.read_text())
    key = reference.stack()
    assert key in expected, (f"no committed reference for {key} (there are: {sorted(expected)}); make one with "
                             "`cd tests && python -m helpers.reference --expected` on this stack, and review the change")
    return reference.audit_figures(tmp_path_factory.mktemp("reference")), expected[key]


def test_the_classifier_audit_gives_the_reference_predictions_and_slice_accuracy(figures):
    got, want = (f["classifier"] for f in figures)
    np.testing.assert_allclose(np.asarray(got["fp32_logits"]), np.asarray(want["fp32_logits"]), atol=LOGIT_TOL, rtol=0)
    assert sorted(got["variants"]) == sorted(want["variants"]) == sorted(reference.PRESETS)
    for name, w in want["variants"].items():
        g = got["variants"][name]
        assert g["fp32_classes"] == w["fp32_classes"], f"FP32 classes changed ({name}'s scoring)"
        changed = [i for i, (a, b) in enumerate(zip(g["int8_classes"], w["int8_classes"])) if a != b]
        assert not changed, f"{name}: {len(changed)} rows changed class, first {changed[:5]}"
        assert g["accuracy"] == w["accuracy"], f"{name}: per-slice accuracy changed"
    assert got["within_budget"] == want["within_budget"]


def test_the_embedding_audit_gives_the_reference_metrics_per_query_slice(figures):
    got, want = (f["embedder"] for f in figures)
    assert sorted(got["variants"]) == sorted(want["variants"])
    for name, slices in want["variants"].items():
        assert sorted(got["variants"][name]) == sorted(slices), f"{name}: other query slices"
        for slice_name, metrics in slices.items():
            for metric, value in metrics.items():
                assert got["variants"][name][slice_name][metric] == pytest.approx(value, abs=METRIC_TOL), (name, slice_name, metric)
    assert got["within_budget"] == want["within_budget"]


def test_the_reference_holds_what_it_claims():
    """The reference is worth comparing with: both tasks, both presets, every row, slices of both kinds,
    query slices of the pairs' own column."""
    want = json.loads(reference.EXPECTED.read_text())
    for stack, figures in want.items():
        c, e = figures["classifier"], figures["embedder"]
        rows = len(open(reference.CLASSIFIER_DATA).read().splitlines()) - 1
        assert len(c["fp32_logits"]) == rows == len(c["variants"]["dynamic"]["int8_classes"]), stack
        assert {"all", "channel=web", "channel=email"} <= set(c["variants"]["dynamic"]["accuracy"]), stack
        assert {"fused", *reference.PRESETS} <= set(e["variants"]), stack
        assert {"all", "kind: negative", "kind: neutral", "kind: positive"} <= set(e["variants"]["fused"]), stack
