"""Fusion: every variant validated and timed, fused-op counts, provenance, and diagnoses."""

from __future__ import annotations

import dataclasses
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

from workbench.core import serial
from workbench.graph import ExportConfig, run_export
from workbench.graph import (
    ALL_VARIANTS,
    FusionConfig,
    FusionReport,
    Variant,
    diagnose,
    expected_fusions,
    load_fusion,
    provenance,
    run_fusion,
)


def test_config_validates_and_keeps_the_baseline():
    cfg = FusionConfig(variants=("transformer",))
    assert cfg.variants == (Variant.UNOPTIMIZED, Variant.TRANSFORMER)
    with pytest.raises(ValueError, match=r"variant must be one of \['unoptimized', 'ort_basic'.*got 'ort_max'"):
        FusionConfig(variants=("ort_max",))
    with pytest.raises(ValueError, match=r"transformer_session must be one of \['disabled', 'basic', 'extended', 'all'\], got 'fast'"):
        FusionConfig(transformer_session="fast")
    with pytest.raises(ValueError, match=r"model_type must be one of .* got 'llama'"):
        FusionConfig(model_type="llama")
    with pytest.raises(ValueError, match=r"\(batch, sequence\)"):
        FusionConfig(shapes=((1,),))
    assert FusionConfig.inspect_only().measure_latency is False
    cfg = FusionConfig.quick()
    assert serial.from_dict(FusionConfig, serial.to_dict(cfg)) == cfg


def test_config_is_frozen_and_a_changed_copy_is_checked_again():
    cfg = FusionConfig.quick()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.threads = 2
    fp16 = dataclasses.replace(cfg, fp16=True)
    assert fp16.variants[-2:] == (Variant.TRANSFORMER, Variant.TRANSFORMER_FP16) and cfg.fp16 is False
    assert dataclasses.replace(cfg, variants=("ort_all",)).variants == (Variant.UNOPTIMIZED, Variant.ORT_ALL)
    with pytest.raises(ValueError, match="repeats"):
        dataclasses.replace(cfg, repeats=0)


def test_every_variant_is_built_validated_and_timed(fused_tiny, exported_tiny):
    r = fused_tiny
    assert [v.name for v in r.variants] == list(ALL_VARIANTS)  # the FP32 variants; FP16 only when asked (test_fp16)
    assert r.reference == "PyTorch logits saved at export"
    assert r.all_passed, [v.validation.message for v in r.variants]
    shapes = [tuple(s) for s in FusionConfig.quick().shapes]
    for v in r.variants:
        assert v.path.is_file() and v.size_mib > 0
        assert [(s.batch, s.seq) for s in v.latency] == shapes
        assert sum(v.op_histogram.values()) == v.node_count
        # every exported node is either kept or removed; the optimized graph is kept + added
        assert v.node_count == exported_tiny.node_count - v.nodes_removed + v.nodes_added
    assert [(s.batch, s.seq) for s in r.pytorch_latency] == shapes
    assert set(r.speedups()) == {v.value for v in ALL_VARIANTS}
    unopt = r.variant("unoptimized")
    assert unopt.path == exported_tiny.onnx_path and unopt.nodes_removed == 0 and unopt.provenance == []
    assert r.variant("ort_basic").node_count < unopt.node_count


def test_transformer_fusions_on_the_tiny_model(fused_tiny):
    r = fused_tiny
    assert r.fused_op_counts == {"SkipLayerNormalization": 4, "Attention": 2, "BiasGelu": 2, "EmbedLayerNormalization": 1}
    assert r.expected_fusions == {"EmbedLayerNormalization": 1, "Attention": 2, "SkipLayerNormalization": 4,
                                  "BiasGelu/FastGelu": 2}
    assert r.diagnoses == []
    assert r.fused_path == r.fused.path and r.fused_path.name == "model_fused.onnx"
    fused = onnx.load(str(r.fused_path))
    assert sum(n.op_type == "Attention" for n in fused.graph.node) == 2
    assert "Softmax" not in r.fused.op_histogram


def scores_scale_and_mask(exported) -> tuple[object, str]:
    """Layer 0's attention in the exported graph: (the node that scales the Q.K scores, the node whose output
    is the additive mask). transformers 4.57 divides the scores (Div) and builds the mask with Sub and Mul;
    transformers 5 multiplies them (Mul) and builds the mask with Where."""
    nodes = onnx.load(str(exported.onnx_path)).graph.node
    producer = {o: n for n in nodes for o in n.output}
    prefix = "/bert/encoder/layer.0/attention/self/"
    scores = next(n for n in nodes if n.name == prefix + "MatMul")
    scale = next(n for n in nodes if scores.output[0] in n.input)
    add = next(n for n in nodes if scale.output[0] in n.input)
    mask = next(producer[t] for t in add.input if t != scale.output[0])
    assert scale.op_type in ("Div", "Mul") and add.op_type == "Add", (scale.op_type, add.op_type)
    return scale, mask.name


def test_attention_provenance_holds_the_nodes_it_replaced(fused_tiny, exported_tiny):
    fused = fused_tiny.fused
    att = fused.fused_node("Attention_0")
    ops = att.replaced_ops
    scale, mask = scores_scale_and_mask(exported_tiny)
    assert ops["MatMul"] == 5  # query, key, value, scores, context
    assert ops["Softmax"] == 1 and ops["Transpose"] == 4
    names = {n.name for n in att.replaced}
    assert scale.name in names  # the scores' scale, whichever op the exporter wrote for it
    assert "/bert/encoder/layer.0/attention/self/Softmax" in names
    assert "/bert/encoder/layer.0/attention/self/query/MatMul" in names
    assert not any("layer.1" in n for n in names)  # stops at the layer boundary
    # the replaced subgraph starts at the embedding output and the attention mask
    assert set(att.boundary_inputs) == {"/bert/embeddings/LayerNorm/LayerNormalization_output_0", "attention_mask"}
    # replaced nodes are gone from the fused graph and were in the exported one
    orig = {n.name for n in onnx.load(str(exported_tiny.onnx_path)).graph.node}
    kept = {n.name for n in onnx.load(str(fused.path)).graph.node}
    assert names <= orig and not names & kept
    # the attention-mask preparation is shared by both layers' Attention nodes
    other = fused.fused_node("Attention_1")
    assert att.shared and set(att.shared) == set(other.shared)
    assert mask in att.shared  # the node that hands both layers the additive mask


def test_renamed_outputs_are_matched_by_value(fused_tiny):
    emb = fused_tiny.fused.fused_node("EmbedLayerNormalization_0")
    assert emb.matched_by_value == {"EmbedLayerNormalization_0_output": "/bert/embeddings/LayerNorm/LayerNormalization_output_0"}
    assert emb.replaced_ops["Gather"] >= 3 and emb.replaced_ops["LayerNormalization"] == 1
    assert set(emb.boundary_inputs) == {"input_ids", "token_type_ids"}


def test_without_value_matching_attention_would_swallow_the_embeddings(fused_tiny, exported_tiny):
    """Why the value match exists: the embedding output has a new name in the fused graph."""
    nodes = provenance(exported_tiny.onnx_path, fused_tiny.fused_path, match_by_value=False)
    att = next(n for n in nodes if n.name == "Attention_0")
    assert "/bert/embeddings/LayerNorm/LayerNormalization" in {n.name for n in att.replaced}


def test_session_level_fusions_have_provenance_too(fused_tiny, exported_tiny):
    ext = fused_tiny.variant("ort_extended")
    assert ext.fused_ops["FusedMatMul"] == 2 and ext.fused_ops["BiasGelu"] == 2
    fm = next(f for f in ext.provenance if f.op_type == "FusedMatMul")
    scale, _ = scores_scale_and_mask(exported_tiny)
    # the constant scale (a Div or a Mul, as the exporter wrote it) folded into the MatMul
    assert fm.replaced_ops == {"MatMul": 1, scale.op_type: 1, "Constant": 1}
    assert scale.name in {n.name for n in fm.replaced}
    assert ext.removed_by_op["Identity"] > 0


def test_each_graph_file_is_parsed_once(exported_tiny, tmp_path, monkeypatch):
    """Fusion parses the exported graph and every variant file it writes once, and passes the parsed
    graph to the counts, the diff, the provenance (its value match included) and the diagnoses.

    Counts the parses workbench makes through ``onnx.load`` (the transformer optimizer, imported
    before the patch, parses with its own binding and is not counted)."""
    import onnxruntime.transformers.optimizer  # noqa: F401  (bound to the real onnx.load_model)

    real = onnx.load
    parsed: Counter = Counter()

    def counting(f, *args, **kwargs):
        parsed[Path(str(f)).resolve()] += 1
        return real(f, *args, **kwargs)

    monkeypatch.setattr(onnx, "load", counting)
    monkeypatch.setattr(onnx, "load_model", counting)
    r = run_fusion(exported_tiny, FusionConfig.inspect_only(fp16=True), tmp_path)
    files = {v.path for v in r.variants}
    assert len(files) == len(ALL_VARIANTS) + 1  # the exported graph and five written files
    assert set(parsed) == files, sorted(parsed)  # each read once ...
    assert max(parsed.values()) == 1, {str(p.name): n for p, n in parsed.items() if n > 1}  # ... and only once
    # the facts still come from the files: counts and diffs as a fresh parse gives them
    for v in r.variants:
        assert v.node_count == len(real(str(v.path)).graph.node)
    assert r.fused_op_counts == {"SkipLayerNormalization": 4, "Attention": 2, "BiasGelu": 2, "EmbedLayerNormalization": 1}


def test_report_round_trips(fused_tiny):
    back = load_fusion(fused_tiny.fused_path.parent)
    assert back == fused_tiny
    assert serial.from_dict(FusionReport, serial.to_dict(fused_tiny)) == fused_tiny


# ---- missing fusions ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sdpa_export(tmp_path_factory, quick_data):
    return run_export("tiny", ExportConfig.quick(attn_implementation="sdpa", validation_examples=8),
                      tmp_path_factory.mktemp("sdpa_export"), data=quick_data)


def test_no_fusion_diagnosis_fires_on_an_sdpa_export(sdpa_export, tmp_path):
    r = run_fusion(sdpa_export, FusionConfig.inspect_only(variants=("transformer",)), tmp_path)
    assert r.all_passed  # it computes the right thing, just slower
    assert r.fused_op_counts.get("Attention", 0) == 0
    by_fusion = {d.fusion: d for d in r.diagnoses}
    assert set(by_fusion) == {"Attention", "EmbedLayerNormalization"}
    att = by_fusion["Attention"]
    assert (att.expected, att.found) == (2, 0)
    assert "SDPA" in att.cause and "attn_implementation='eager'" in att.fix
    assert "attention pattern: sdpa" in att.evidence
    assert "Attention" in by_fusion["EmbedLayerNormalization"].cause
    assert r.diagnoses[0].fusion == "Attention"  # the root cause comes first
    assert r.pytorch_latency == [] and all(v.latency == [] for v in r.variants)


def test_sdpa_is_recognised_from_the_graph_alone(sdpa_export, exported_tiny):
    """A bare ONNX file carries no record of how it was exported: the pattern gives it away."""
    sdpa = onnx.load(str(sdpa_export.onnx_path))
    found = {"SkipLayerNormalization": 4, "BiasGelu": 2}
    diags = diagnose(sdpa, found, expected_fusions(sdpa, 2), "", ["input_ids", "attention_mask", "token_type_ids"], 2, 32)
    att = next(d for d in diags if d.fusion == "Attention")
    assert "SDPA" in att.cause
    eager = onnx.load(str(exported_tiny.onnx_path))
    diags = diagnose(eager, found, expected_fusions(eager, 2), "", ["input_ids", "attention_mask", "token_type_ids"], 2, 32)
    att = next(d for d in diags if d.fusion == "Attention")
    assert "SDPA" not in att.cause and "num_heads" in att.fix


def test_a_bare_onnx_file_is_validated_against_its_unoptimized_self(exported_tiny, quick_data, tmp_path):
    bare = tmp_path / "in" / "graph.onnx"
    bare.parent.mkdir()
    shutil.copyfile(exported_tiny.onnx_path, bare)
    r = run_fusion(bare, FusionConfig.inspect_only(variants=("transformer",), validation_examples=8), tmp_path / "out",
                   data=quick_data)
    assert r.export_path is None and r.num_layers == 2
    assert r.reference.startswith("the unoptimized graph")
    # recompute the fused graph's difference by hand: both graphs on the same 8 validation texts,
    # tokenized with MiniLM's tokenizer (the tiny BERT shares its vocabulary)

    from workbench.graph import select_examples
    from workbench.models.load import load_tokenizer
    from workbench.runtime.ortinfer import predict_dataset

    examples = select_examples(quick_data, ExportConfig(validation_examples=8))
    tok = load_tokenizer("minilm")
    plain = predict_dataset(str(bare), tok, examples, 128, 8)
    fused = predict_dataset(str(r.variant("transformer").path), tok, examples, 128, 8)
    v = r.variant("transformer").validation
    assert v.n_examples == 8 and v.max_abs_diff == pytest.approx(float(np.abs(fused - plain).max()), rel=1e-3, abs=1e-6)
    assert r.variant("unoptimized").validation.n_examples == 8
    assert r.all_passed and r.diagnoses == []
    assert any("MiniLM's tokenizer" in n for n in r.notes)


def test_a_bare_graph_without_a_head_count(exported_tiny, quick_data, tmp_path, monkeypatch):
    """transformers 5 reshapes Q, K and V to (batch, seq, -1, head_size): the graph holds no head count. ONNX Runtime
    1.32's optimizer fuses such a graph when told the count, not otherwise: the workbench reads it off the graph (the
    Q projection's width over the head size). 1.19.2's optimizer cannot fuse it at all: the diagnosis says so and
    names the current stack. The tiny export is rewritten to that form (on the current stack it already is); the
    graph still computes the same logits."""
    from onnx import numpy_helper

    from workbench.graph.diagnose import attention_shape, optimizer_reads_transformers5

    model = onnx.load(str(exported_tiny.onnx_path))
    producer = {o: n for n in model.graph.node for o in n.output}
    rewritten = 0
    for reshape in (n for n in model.graph.node if n.op_type == "Reshape" and "/attention/self/" in n.name):
        concat = producer.get(reshape.input[1])
        if concat is None or concat.op_type != "Concat" or len(concat.input) != 4:
            continue
        for index, new_value in ((1, 0), (2, -1)):  # (batch, -1, heads, size) -> (batch, 0: seq as given, -1, size)
            const = producer.get(concat.input[index])
            value = numpy_helper.to_array(const.attribute[0].t) if const is not None and const.op_type == "Constant" else None
            if value is not None and (index == 2 or value.reshape(-1)[0] == -1):
                const.attribute[0].t.CopyFrom(numpy_helper.from_array(np.full_like(value, new_value)))
        assert (c := producer[concat.input[2]]).op_type == "Constant" and numpy_helper.to_array(c.attribute[0].t)[0] == -1
        rewritten += 1
    assert rewritten == 6  # Q, K and V of both layers
    bare = tmp_path / "in" / "graph.onnx"
    bare.parent.mkdir()
    onnx.save(model, str(bare))
    assert attention_shape(model) == (2, 32)

    cfg = FusionConfig.inspect_only(variants=("transformer",), validation_examples=8)
    r = run_fusion(bare, cfg, tmp_path / "out", data=quick_data)
    assert r.all_passed
    assert any("num_heads 2 and hidden_size 32 read off the graph" in n for n in r.notes), r.notes
    if not optimizer_reads_transformers5():  # onnxruntime 1.19.2: one line that says why and where it fuses
        assert r.fused_op_counts.get("Attention", 0) == 0
        att = r.diagnoses[0]
        assert att.fusion == "Attention" and "transformers 5" in att.cause and "no head count" in att.cause
        assert "make setup-current" in att.fix
        return
    assert r.fused_op_counts["Attention"] == 2 and r.diagnoses == []
    # what the optimizer does with the graph alone
    monkeypatch.setattr("workbench.graph.fusion.attention_shape", lambda graph: (0, 0))
    blind = run_fusion(bare, cfg, tmp_path / "blind", data=quick_data)
    assert blind.fused_op_counts.get("Attention", 0) == 0
    assert [d.fusion for d in blind.diagnoses][:1] == ["Attention"]


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="run the export first"):
        run_fusion(tmp_path / "nope.onnx", FusionConfig.inspect_only(), tmp_path)


@pytest.mark.slow
def test_minilm_fuses_as_measured(exported_minilm, tmp_path):
    r = run_fusion(exported_minilm, FusionConfig.inspect_only(variants=("transformer",)), tmp_path)
    assert r.fused_op_counts == {"SkipLayerNormalization": 12, "Attention": 6, "BiasGelu": 6, "EmbedLayerNormalization": 1}
    assert r.diagnoses == []
    assert r.all_passed, [v.validation.message for v in r.variants]
    for i in range(6):
        att = r.fused.fused_node(f"Attention_{i}")
        assert att.replaced_ops["MatMul"] == 5 and att.replaced_ops["Softmax"] == 1
        own = [n for n in att.replaced if n.name not in att.shared and n.op_type != "Constant"]
        assert own and all(f"layer.{i}/" in n.name for n in own)  # one layer's nodes, nothing more
