"""Export and ONNX Runtime inference: the graph computes what the model computes, on real data."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from workbench.core import serial
from workbench.data.batches import encode
from workbench.graph import (
    Attention,
    ExportConfig,
    ExportError,
    ExportResult,
    Validation,
    compare_logits,
    load_export,
    run_export,
    validate_onnx,
)
from workbench.core.latency import LatencyStats
from workbench.runtime.ortinfer import (
    InferenceError,
    ShapeLatency,
    latency_by_shape,
    make_session,
    predict_dataset,
    predict_logits,
    torch_predict_dataset,
)


# ---- config ------------------------------------------------------------------------------------
def test_config_converts_strings_and_rejects_bad_values():
    assert ExportConfig(attn_implementation="sdpa").attn_implementation is Attention.SDPA
    with pytest.raises(ValueError, match=r"attn_implementation must be one of \['eager', 'sdpa'\], got 'flash'"):
        ExportConfig(attn_implementation="flash")
    with pytest.raises(ValueError, match=r"opset must be an integer from 11 to 20, got 9"):
        ExportConfig(opset=9)
    with pytest.raises(ValueError, match="tolerance must be a positive number.*got -1"):
        ExportConfig(tolerance=-1)
    with pytest.raises(ValueError, match="min_label_agreement"):
        ExportConfig(min_label_agreement=1.5)
    assert ExportConfig.strict().tolerance < ExportConfig.default().tolerance
    assert ExportConfig.quick(opset=14).opset == 14


def test_config_is_frozen_and_a_changed_copy_is_checked_again():
    cfg = ExportConfig.quick()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.opset = 14
    assert dataclasses.replace(cfg, opset=14).opset == 14 and cfg.opset == 17
    assert dataclasses.replace(cfg, attn_implementation="SDPA").attn_implementation is Attention.SDPA
    with pytest.raises(ValueError, match=r"opset must be an integer from 11 to 20, got 9"):
        dataclasses.replace(cfg, opset=9)


# ---- the exported tiny model ---------------------------------------------------------------------
def test_export_writes_a_validated_graph(exported_tiny):
    r = exported_tiny
    assert r.onnx_path.is_file() and r.onnx_path.name == "model.onnx"
    assert r.validation.passed, r.validation.message
    assert r.validation.max_abs_diff <= r.validation.tolerance
    assert r.validation.label_agreement == 1.0
    assert r.validation.n_examples == ExportConfig.quick().validation_examples
    assert r.class_names == ["rotten", "fresh"]
    assert r.attn_implementation == "eager"
    assert r.opset == 17 and r.model_info.num_layers == 2 and r.model_info.num_heads == 2
    # opset 17 writes LayerNormalization as one op; eager attention keeps an explicit Softmax per layer
    assert r.op_histogram["LayerNormalization"] == 5
    assert r.op_histogram["Softmax"] == 2
    assert sum(r.op_histogram.values()) == r.node_count
    assert r.size_mib > 0
    model = onnx.load(str(r.onnx_path))
    assert [i.name for i in model.graph.input] == r.input_names
    assert set(r.input_names) == {"input_ids", "attention_mask", "token_type_ids"}
    for inp in model.graph.input:
        dims = [d.dim_param for d in inp.type.tensor_type.shape.dim]
        assert dims == ["batch", "sequence"], inp.name
    assert r.output_names == ["logits"]


def test_export_result_round_trips_and_carries_what_later_stages_need(exported_tiny):
    r = exported_tiny
    saved = json.loads((r.out_dir / "export.json").read_text())
    assert saved["validation"]["passed"] is True
    back = load_export(r.out_dir)
    assert back == r
    assert serial.from_dict(ExportResult, serial.to_dict(r)) == r
    examples = r.load_examples()
    ref = r.reference_logits()
    assert ref.shape == (len(examples), 2) == (r.validation.n_examples, 2)
    tok = r.load_tokenizer()
    assert tok("a film")["input_ids"][0] == 101


def test_input_names_follow_the_forward_signature(exported_tiny, tiny):
    """Swapped input names (attention_mask fed as token_type_ids) would shift every logit."""
    session = make_session(exported_tiny.onnx_path)
    enc = encode(tiny.tokenizer, ["a dull, lifeless film", "wonderful"], 32)
    enc["token_type_ids"][:] = 0
    import torch

    from workbench.models.load import load_for_data

    ref_model = load_for_data("tiny", ["rotten", "fresh"])
    with torch.no_grad():
        expected = ref_model.model(**enc).logits.numpy()
    np.testing.assert_allclose(predict_logits(session, enc), expected, atol=1e-5)


@pytest.mark.parametrize("batch,seq", [(1, 5), (3, 40)])
def test_dynamic_axes_accept_other_shapes(exported_tiny, batch, seq):
    from workbench.runtime.ortinfer import synthetic_batch

    out = predict_logits(str(exported_tiny.onnx_path), synthetic_batch(batch, seq, 30522))
    assert out.shape == (batch, 2)
    assert np.all(np.isfinite(out))


def test_predict_dataset_matches_pytorch_in_dataset_order(exported_tiny, quick_data):
    from workbench.models.load import load_for_data

    model = load_for_data("tiny", ["rotten", "fresh"])
    ds = quick_data["test"].select(range(20))
    got = predict_dataset(exported_tiny.onnx_path, model.tokenizer, ds, max_length=48, batch_size=6)
    want = torch_predict_dataset(model.model, model.tokenizer, ds, max_length=48, batch_size=7)
    assert got.shape == (20, 2)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_feed_uses_only_declared_inputs_and_fills_token_types(exported_tiny, tiny):
    session = make_session(exported_tiny.onnx_path, threads=1, graph_optimization="disabled")
    enc = {k: v.numpy() for k, v in encode(tiny.tokenizer, ["fine"], 16).items()}
    full = predict_logits(session, {**enc, "labels": np.array([1])})
    no_types = predict_logits(session, {k: v for k, v in enc.items() if k != "token_type_ids"})
    np.testing.assert_allclose(full, no_types, atol=1e-6)
    with pytest.raises(InferenceError, match="needs input 'attention_mask'"):
        predict_logits(session, {"input_ids": enc["input_ids"]})


def test_make_session_errors_name_the_fix(exported_tiny, tmp_path):
    with pytest.raises(InferenceError, match=r"graph_optimization must be one of \['disabled', 'basic', 'extended', 'all'\], got 'max'"):
        make_session(exported_tiny.onnx_path, graph_optimization="max")
    with pytest.raises(InferenceError, match="no ONNX graph at"):
        make_session(tmp_path / "missing.onnx")


def test_sessions_spin_only_while_they_run(exported_tiny):
    """The default session spins during a run and stops when it returns (no idle worker takes a core
    from the variant timed next); keep_spinning is ONNX Runtime's own default; allow_spinning=False never spins."""
    def entry(opts, key):
        try:
            return opts.get_session_config_entry(key)
        except RuntimeError:  # onnxruntime's answer for a key that was never set
            return None

    def entries(**kw):
        opts = make_session(exported_tiny.onnx_path, threads=1, **kw).get_session_options()
        return tuple(entry(opts, k) for k in ("session.intra_op.allow_spinning", "session.force_spinning_stop"))

    assert entries() == ("1", "1")
    assert entries(keep_spinning=True) == ("1", None)
    assert entries(allow_spinning=False) == ("0", None)


def test_optimized_model_path_writes_what_the_session_ran(exported_tiny, tmp_path):
    out = tmp_path / "basic.onnx"
    make_session(exported_tiny.onnx_path, graph_optimization="basic", optimized_model_path=out)
    basic = onnx.load(str(out))
    # basic optimizations drop the Identity nodes the exporter leaves behind
    assert exported_tiny.op_histogram.get("Identity", 0) > 0
    assert not any(n.op_type == "Identity" for n in basic.graph.node)
    assert len(basic.graph.node) < exported_tiny.node_count


def test_latency_by_shape_times_every_shape_for_both_runtimes(exported_tiny, tiny):
    from workbench.perf.speed import time_side_by_side

    shapes = [(1, 8), (2, 16)]
    ort_lat = latency_by_shape(exported_tiny.onnx_path, shapes, warmup=1, repeats=3, threads=1)
    side = time_side_by_side({"onnx": exported_tiny.onnx_path}, "onnx", shapes, warmup=1, rounds=3, repeats=1, threads=1,
                             torch_models={"pytorch": tiny}, floors=False, load_check=False)
    for lat in (ort_lat, side.latency["onnx"], side.latency["pytorch"]):
        assert [(s.batch, s.seq) for s in lat] == shapes
        assert all(isinstance(s.stats, LatencyStats) and s.stats.repeats == 3 and s.stats.warmup == 1 for s in lat)
        assert all(len(s.stats.samples_ms) == 3 for s in lat)
    assert [(s.name, s.batch, s.seq, s.ratio.rounds) for s in side.speeds] == [("pytorch", 1, 8, 3), ("pytorch", 2, 16, 3)]
    assert serial.from_dict(ShapeLatency, serial.to_dict(ort_lat[0])) == ort_lat[0]
    with pytest.raises(InferenceError, match=r"\(batch, sequence\) pair"):
        latency_by_shape(exported_tiny.onnx_path, [(1, 2, 3)])


# ---- validation catches a broken graph -------------------------------------------------------
def _corrupt_copy(src, dst, node_name: str, op_to: str = "Sub"):
    """Copy a graph and change the operator of one node (an ``Add`` becomes a ``Sub``)."""
    model = onnx.load(str(src))
    matches = [n for n in model.graph.node if n.name == node_name]
    assert matches, f"no node {node_name!r} to corrupt"
    matches[0].op_type = op_to
    onnx.save(model, str(dst))
    return dst


def _validate(path, exported, cfg):
    return validate_onnx(path, exported.reference_logits(), exported.load_tokenizer(), exported.load_examples(), cfg)


def test_validation_catches_a_corrupted_graph(exported_tiny, tmp_path):
    # the residual connection of layer 0 subtracts instead of adding
    bad = _corrupt_copy(exported_tiny.onnx_path, tmp_path / "corrupt.onnx", "/bert/encoder/layer.0/output/Add")
    v = _validate(bad, exported_tiny, ExportConfig.quick())
    assert not v.passed
    assert v.max_abs_diff > v.tolerance
    assert v.message.startswith("FAILED") and "tolerance" in v.message
    # the untouched graph passes the very same check
    good = _validate(exported_tiny.onnx_path, exported_tiny, ExportConfig.quick())
    assert good.passed and good.max_abs_diff < 1e-5


def test_tolerance_decides_how_subtle_a_fault_is_caught(exported_tiny, tmp_path):
    """A sign flip of one bias add moves the tiny model's small logits by about 1e-4: it slips
    under the default tolerance, the strict preset catches it, and the relative figure shows it."""
    bad = _corrupt_copy(exported_tiny.onnx_path, tmp_path / "subtle.onnx", "/bert/encoder/layer.0/intermediate/dense/Add")
    loose = _validate(bad, exported_tiny, ExportConfig.quick())
    strict = _validate(bad, exported_tiny, ExportConfig.strict(max_length=64, validation_examples=32))
    assert loose.max_abs_diff == pytest.approx(strict.max_abs_diff)
    assert 1e-5 < strict.max_abs_diff < 1e-3
    assert loose.passed and not strict.passed
    assert strict.relative_diff == pytest.approx(strict.max_abs_diff / strict.reference_scale)
    assert strict.relative_diff > 10 * strict.max_abs_diff  # the tiny model's logits are far below 1


def test_validation_catches_changed_weights(exported_tiny, tmp_path):
    model = onnx.load(str(exported_tiny.onnx_path))
    for init in model.graph.initializer:
        if init.name == "classifier.weight":
            w = numpy_helper.to_array(init)
            init.CopyFrom(numpy_helper.from_array(-w, init.name))  # flip every decision
    onnx.save(model, str(tmp_path / "flipped.onnx"))
    v = validate_onnx(tmp_path / "flipped.onnx", exported_tiny.reference_logits(), exported_tiny.load_tokenizer(),
                      exported_tiny.load_examples(), ExportConfig.quick(tolerance=10.0, min_label_agreement=0.9))
    assert not v.passed
    assert v.label_agreement < 0.9
    assert "label agreement" in v.message


def test_compare_logits_flags_nan_and_shape_mismatch():
    ref = np.zeros((4, 2))
    bad = ref.copy()
    bad[1, 0] = np.nan
    v = compare_logits(bad, ref, 1e-3)
    assert not v.passed and "NaN" in v.message and v.n_examples == 4
    with pytest.raises(ValueError, match=r"shape \(4, 3\).*\(4, 2\)"):
        compare_logits(np.zeros((4, 3)), ref, 1e-3)
    ref = np.array([[1.0, -2.0], [0.5, 0.0]])
    ok = compare_logits(ref + 1e-4, ref, 1e-3)
    assert ok.passed and ok.max_abs_diff == pytest.approx(1e-4)
    assert ok.reference_scale == 2.0 and ok.relative_diff == pytest.approx(5e-5)
    assert serial.from_dict(Validation, serial.to_dict(ok)) == ok


# ---- failures that name the operator and the options ---------------------------------------------
def test_sdpa_at_an_old_opset_names_the_operator_and_options(tmp_path, quick_data, capfd):
    with pytest.raises(ExportError) as info:
        run_export("tiny", ExportConfig.quick(opset=13, attn_implementation="sdpa"), tmp_path, data=quick_data)
    out, err = capfd.readouterr()
    assert "Torch IR graph" not in out + err  # torch 2.6 would dump the whole IR graph here
    err = info.value
    assert err.operator == "aten::scaled_dot_product_attention"
    assert any("opset 14" in o for o in err.options)
    assert any("eager" in o for o in err.options)
    assert "scaled_dot_product_attention" in str(err) and "Options:" in str(err)
    assert not (tmp_path / "model.onnx").exists()  # nothing half-written
    assert not list(tmp_path.glob(".model*.tmp*"))


def test_run_export_rejects_unknown_models(tmp_path):
    from workbench.models.load import ModelError

    with pytest.raises(ModelError, match="neither a built-in model"):
        run_export("no-such-model", ExportConfig.quick(), tmp_path)
    with pytest.raises(TypeError, match="model must be"):
        run_export(42, ExportConfig.quick(), tmp_path)


def test_export_from_a_checkpoint_folder_keeps_its_labels(tmp_path, quick_data):
    from workbench.models.load import load_model

    lm = load_model("tiny", num_labels=3, id2label={0: "neg", 1: "neutral", 2: "pos"})
    ckpt = tmp_path / "ckpt"
    lm.model.save_pretrained(ckpt)
    lm.tokenizer.save_pretrained(ckpt)
    r = run_export(str(ckpt), ExportConfig.quick(validation_examples=8), tmp_path / "out", data=quick_data)
    assert r.class_names == ["neg", "neutral", "pos"]
    assert r.reference_logits().shape == (8, 3)
    assert r.validation.passed, r.validation.message
    assert r.model_source == str(ckpt)


@pytest.mark.slow
def test_export_minilm(exported_minilm):
    r = exported_minilm
    assert r.validation.passed, r.validation.message
    assert r.model_info.num_layers == 6 and r.model_info.hidden_size == 384
    assert r.op_histogram["Softmax"] == 6 and r.op_histogram["LayerNormalization"] == 13
    assert 80 < r.size_mib < 100  # 22.7M float32 parameters


def test_export_a_training_checkpoint(tiny_checkpoint, quick_data, tmp_path):
    """What training writes is what export reads: labels, weights and tokenizer carry over."""
    import json as _json

    r = run_export(str(tiny_checkpoint), ExportConfig.quick(validation_examples=16), tmp_path, data=quick_data)
    config = _json.loads((tiny_checkpoint / "config.json").read_text())
    assert r.class_names == [config["id2label"][str(i)] for i in range(len(config["id2label"]))]
    assert r.validation.passed, r.validation.message
    assert r.model_source == str(tiny_checkpoint)


def test_export_after_ortmodule_training_is_plain_onnx(tmp_path):
    """ORTModule registers training symbolics (embedding -> com.microsoft::ATen, ...) process-wide.
    An export made after an ORTModule run in the same process must not pick them up, and ORTModule
    must still work afterwards."""
    import torch
    from onnxruntime.training.ortmodule import ORTModule

    from workbench.graph import run_export
    from workbench.graph import FusionConfig, run_fusion
    from workbench.models.load import load_model

    def ort_step():
        lm = load_model("tiny", dropout=False)
        wrapped = ORTModule(lm.model)
        wrapped.train()
        enc = lm.tokenizer(["a fine film", "a dull one"], padding=True, return_tensors="pt")
        wrapped(**enc, labels=torch.tensor([1, 0])).loss.backward()
        return wrapped._torch_module._execution_manager(True)._onnx_models.optimized_model

    assert ort_step() is not None
    exported = run_export("tiny", ExportConfig.quick(), tmp_path / "export")
    assert "ATen" not in exported.op_histogram
    assert exported.op_histogram["Gather"] >= 3  # the embedding lookups are plain Gathers
    fused = run_fusion(exported, FusionConfig.inspect_only(), tmp_path / "fusion")
    assert fused.fused_op_counts.get("EmbedLayerNormalization") == 1
    assert ort_step() is not None  # ORTModule's own symbolics were put back
