"""Figure structure for export and fusion (read from fig.data and fig.layout, never pixels)."""

from __future__ import annotations

import dataclasses

import plotly.graph_objects as go
import pytest

from workbench.graph import Diagnosis, FusionConfig, Variant
from workbench.plots import graph


def _trace(fig: go.Figure, name_prefix: str):
    matches = [t for t in fig.data if t.name and t.name.startswith(name_prefix)]
    assert matches, f"no trace named {name_prefix!r}; traces: {[t.name for t in fig.data]}"
    return matches[0]


def test_op_counts_before_and_after(fused_tiny):
    fig = graph.op_counts(fused_tiny)
    assert len(fig.data) == 2
    before, after = fig.data
    assert before.name.startswith("ORT unoptimized") and f"({fused_tiny.variant('unoptimized').node_count} nodes)" in before.name
    assert after.name.startswith("transformer optimizer")
    b = dict(zip(before.y, before.x))
    a = dict(zip(after.y, after.x))
    assert (b["Softmax"], a["Softmax"]) == (2, 0)
    assert (b["Attention"], a["Attention"]) == (0, 2)
    assert sum(a.values()) == fused_tiny.fused.node_count
    assert "removed" in fig.layout.title.text
    top = graph.op_counts(fused_tiny, variant="ort_basic", top=5)
    assert len(top.data[0].y) == 5


def test_fused_ops_per_variant_with_expectations(fused_tiny):
    fig = graph.fused_ops(fused_tiny)
    names = [t.name for t in fig.data]
    assert names == ["ORT basic", "ORT extended", "ORT all", "transformer optimizer", "expected (BERT pattern)"]
    transformer = dict(zip(fig.data[3].x, fig.data[3].y))
    assert transformer["Attention"] == 2 and transformer["EmbedLayerNormalization"] == 1
    extended = dict(zip(fig.data[1].x, fig.data[1].y))
    assert extended["FusedMatMul"] == 2 and extended["Attention"] == 0
    expected = dict(zip(fig.data[4].x, fig.data[4].y))
    assert expected == {"EmbedLayerNormalization": 1, "Attention": 2, "SkipLayerNormalization": 4, "BiasGelu": 2}
    assert "all expected fusions found" in fig.layout.title.text
    missing = dataclasses.replace(fused_tiny, diagnoses=[Diagnosis("Attention", 2, 0, "sdpa", "eager")])
    assert "missing: Attention 0/2" in graph.fused_ops(missing).layout.title.text


def test_latency_by_variant_and_shape(fused_tiny):
    fig = graph.latency(fused_tiny)
    assert [t.name for t in fig.data] == ["PyTorch eager", "ORT unoptimized", "ORT basic", "ORT extended", "ORT all",
                                          "transformer optimizer"]
    shapes = [f"{b}×{s}" for b, s in FusionConfig.quick().shapes]
    for t in fig.data:
        assert list(t.x) == shapes
        assert len(t.error_y.array) == len(shapes) and min(t.error_y.array) >= 0
    assert list(fig.data[0].text) == ["1.00x"] * len(shapes)
    transformer = fig.data[-1]
    want = [p.stats.median_ms / v.stats.median_ms for p, v in zip(fused_tiny.pytorch_latency, fused_tiny.fused.latency)]
    assert list(transformer.customdata) == pytest.approx(want)
    assert list(transformer.y) == [s.stats.median_ms for s in fused_tiny.fused.latency]
    untimed = dataclasses.replace(fused_tiny, pytorch_latency=[],
                                  variants=[dataclasses.replace(v, latency=[]) for v in fused_tiny.variants])
    with pytest.raises(ValueError, match="no timings"):
        graph.latency(untimed)


def test_size_on_disk(fused_tiny):
    fig = graph.size_on_disk(fused_tiny)
    assert list(fig.data[0].y) == [v.size_mib for v in fused_tiny.variants]
    assert "MiB" in fig.layout.yaxis.title.text


def test_fused_node_beside_the_subgraph_it_replaced(fused_tiny):
    fig = graph.fused_node_drawing(fused_tiny)
    node = fused_tiny.fused.fused_node("Attention_0")
    fused_marker = _trace(fig, "fused Attention")
    assert list(fused_marker.text) == ["Attention"]
    own = _trace(fig, "replaced node")
    shared = _trace(fig, "shared with other fused nodes")
    drawn = set(own.customdata) | set(shared.customdata)
    non_constant = {n.name for n in node.replaced if n.op_type != "Constant"}
    assert drawn == non_constant
    assert set(shared.customdata) == set(node.shared) & non_constant
    assert list(own.text).count("MatMul") == 5 and "Softmax" in own.text
    inputs = _trace(fig, "subgraph input")
    assert set(inputs.hovertext) == set(node.boundary_inputs)
    # every node sits below the subgraph inputs (layered top to bottom)
    assert max(own.y) < min(inputs.y)
    assert "Attention_0" in fig.layout.title.text and f"replaced {len(node.replaced)}" in fig.layout.title.text
    fig.to_dict()  # plotly accepts every property

    with_constants = graph.fused_node_drawing(fused_tiny, hide_constants=False)
    drawn = set(_trace(with_constants, "replaced node").customdata) | set(_trace(with_constants, "shared").customdata)
    assert drawn == {n.name for n in node.replaced}


def test_pick_a_named_fused_node_or_fail_clearly(fused_tiny):
    fig = graph.fused_node_drawing(fused_tiny, node="EmbedLayerNormalization_0")
    assert list(_trace(fig, "fused").text) == ["EmbedLayerNormalization"]
    ext = graph.pick_fused_node(fused_tiny, variant=Variant.ORT_EXTENDED)
    assert ext.op_type in ("FusedMatMul", "BiasGelu", "FusedGemm")
    with pytest.raises(KeyError, match="no fused node 'nope'"):
        graph.fused_node_drawing(fused_tiny, node="nope")
    with pytest.raises(ValueError, match="no fused nodes"):
        graph.fused_node_drawing(fused_tiny, variant="unoptimized")
