"""On-device training (workbench.ondevice): artifacts, onnxruntime.training.api steps that track
PyTorch eager, the inference graph validated against the trained weights and accepted by the later
stages, and errors that name the operator and the fix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench.ondevice import (
    FP32_TOLERANCE,
    GradientGraphError,
    MAX_IR_VERSION,
    OnDeviceConfig,
    OnDeviceError,
    Trainable,
    build_artifacts,
    load_ondevice,
    load_ondevice_model,
    pytorch_curve,
    run_ondevice,
    trainable_names,
)

CLASSES = ["fresh", "rotten"]


def _numel(model, names):
    params = dict(model.named_parameters())
    return sum(params[n].numel() for n in names)


@pytest.fixture(scope="module")
def tiny_last(tmp_path_factory, quick_data):
    """Ten steps of the tiny model, last encoder layer + head, memory measured in fresh processes."""
    cfg = OnDeviceConfig.quick(trainable="last", steps=10, lr=1e-3, threads=1, memory_steps=3, validation_examples=16)
    return run_ondevice("tiny", cfg, tmp_path_factory.mktemp("ondevice_tiny"), data=quick_data)


def test_trainable_sets_follow_the_architecture():
    loaded = load_ondevice_model("tiny", OnDeviceConfig.quick(), CLASSES)
    m = loaded.model
    head = trainable_names(m, "head")
    assert head == ["classifier.weight", "classifier.bias"]
    last = trainable_names(m, Trainable.LAST, 1)
    assert all(".layer.0." not in n and "embeddings" not in n for n in last)
    assert any(".layer.1." in n for n in last) and "bert.pooler.dense.weight" in last and set(head) <= set(last)
    assert set(trainable_names(m, "last", 2)) - set(last) == {n for n, _ in m.named_parameters() if ".layer.0." in n}
    everything = trainable_names(m, "all")
    assert "bert.embeddings.word_embeddings.weight" in everything
    assert "bert.embeddings.position_embeddings.weight" not in everything  # POSITION_EMBEDDINGS_NOTE
    assert "bert.embeddings.position_embeddings.weight" in trainable_names(m, "all", train_position_embeddings=True)
    with pytest.raises(OnDeviceError, match="last_n_layers is 3 but the model has 2 encoder layers"):
        trainable_names(m, "last", 3)


@pytest.mark.parametrize("trainable", ["head", "last"])
def test_artifacts_for_the_tiny_model(tmp_path, trainable):
    import onnx

    from onnxruntime.training.api import CheckpointState, Module, Optimizer

    cfg = OnDeviceConfig.quick(trainable=trainable)
    loaded = load_ondevice_model("tiny", cfg, CLASSES)
    art = build_artifacts(loaded, cfg, tmp_path / "art", ["a fine film", "dull"])
    names = trainable_names(loaded.model, trainable)
    assert sorted(art.trainable_tensors) == sorted(names)
    assert art.trainable_parameters == _numel(loaded.model, names)
    assert art.total_parameters == loaded.num_parameters and art.trainable_parameters < art.total_parameters
    if trainable == "head":
        assert art.trainable_parameters == 32 * 2 + 2
    assert [f.name for f in art.files] == ["training_model.onnx", "eval_model.onnx", "optimizer_model.onnx", "checkpoint"]
    for f in art.files:
        assert f.size_mib > 0 and (Path(art.folder) / f.name).exists()
        if f.name.endswith(".onnx"):
            assert onnx.load(str(Path(art.folder) / f.name)).ir_version <= MAX_IR_VERSION
    # the pitfall: the optimizer graph comes out with an IR version 1.19.2 refuses, and is fixed
    assert "optimizer_model.onnx" in art.ir_version_fixed and art.notes
    assert art.loss == "CrossEntropyLoss" and art.optimizer == "AdamW" and art.opset == 14
    # ONNX Runtime loads all four
    state = CheckpointState.load_checkpoint(str(Path(art.folder) / "checkpoint"))
    module = Module(str(Path(art.folder) / "training_model.onnx"), state, str(Path(art.folder) / "eval_model.onnx"))
    Optimizer(str(Path(art.folder) / "optimizer_model.onnx"), module)
    assert module.input_names() == ["input_ids", "attention_mask", "token_type_ids", "labels"]
    assert sum(p.requires_grad for _, p in state.parameters) == len(names)


def test_ten_on_device_steps_track_pytorch(tiny_last):
    r = tiny_last
    assert len(r.ondevice_losses) == len(r.pytorch_losses) == 10
    assert r.tolerance == FP32_TOLERANCE and r.loss_parity and r.ok
    diffs = np.abs(np.array(r.ondevice_losses) - np.array(r.pytorch_losses))
    assert diffs.max() == pytest.approx(r.max_loss_diff) and r.max_loss_diff <= FP32_TOLERANCE
    assert len(set(np.round(r.ondevice_losses, 6))) > 5  # the loss moves: it is training, not a constant
    assert r.weights_moved > 1e-4  # the trainable weights changed on the device ...
    assert r.weights_max_abs_diff < 1e-5  # ... as they did in PyTorch
    assert r.frozen_unchanged
    # cost of both sides, in the result (figures, never asserted as timings)
    for side in (r.ondevice, r.pytorch):
        assert len(side.step_ms) == 10 and side.median_step_ms > 0
        assert side.peak_rss_mib is not None and side.rss_growth_mib is not None and side.isolated_median_step_ms > 0
    assert r.step_time_ratio > 0 and r.memory_ratio > 0
    again = load_ondevice(Path(r.inference_dir).parent)
    assert again.ondevice_losses == r.ondevice_losses and again.artifacts.trainable is Trainable.LAST


def test_twice_the_learning_rate_exceeds_the_tolerance(tiny_last, quick_data):
    """The defect the tolerance must catch: PyTorch on the same batches at 2x lr."""
    doubled = pytorch_curve("tiny", tiny_last.config, quick_data, lr=2 * tiny_last.config.lr)
    diff = np.abs(np.array(tiny_last.ondevice_losses) - np.array(doubled))
    assert diff.max() > 10 * FP32_TOLERANCE
    same = pytorch_curve("tiny", tiny_last.config, quick_data)
    assert np.abs(np.array(tiny_last.pytorch_losses) - np.array(same)).max() == 0.0  # the replay is exact


def test_position_embedding_gradient_defect_is_caught(tmp_path, quick_data):
    """Training the position embeddings on the device hits onnxruntime-training 1.19.2's broadcast
    gradient (POSITION_EMBEDDINGS_NOTE): the loss comparison must flag it."""
    cfg = OnDeviceConfig.quick(trainable="all", train_position_embeddings=True, steps=6, lr=1e-3, threads=1,
                               measure_memory=False, validation_examples=8)
    r = run_ondevice("tiny", cfg, tmp_path, data=quick_data)
    assert not r.loss_parity and r.max_loss_diff > FP32_TOLERANCE
    assert any("position embeddings train" in n for n in r.notes)


def test_inference_graph_matches_the_trained_weights(tiny_last, quick_data):
    import onnxruntime as ort
    import torch

    from workbench.data.batches import encode
    from workbench.models.load import load_model

    r = tiny_last
    assert r.validation.passed and r.validation.max_abs_diff <= 1e-5 and r.validation.n_examples == 16
    assert r.agreement_with_pytorch_training.passed
    # independently: the PyTorch model saved with the trained weights, the graph, and the untrained model
    trained = load_model(str(r.trained_model_dir), dropout=False)
    untrained = load_ondevice_model("tiny", r.config, CLASSES)
    texts = list(quick_data["test"]["text"][:8])
    enc = encode(trained.tokenizer, texts, 64)
    with torch.no_grad():
        want = trained.model(**enc).logits.numpy()
        before = untrained.model(**enc).logits.numpy()
    session = ort.InferenceSession(str(r.inference_path), providers=["CPUExecutionProvider"])
    got = session.run(["logits"], {k: v.numpy() for k, v in enc.items()})[0]
    assert np.abs(got - want).max() < 1e-5
    assert np.abs(got - before).max() > 1e-4  # the graph holds the trained weights, not the initial ones
    assert {i.name for i in session.get_inputs()} == {"input_ids", "attention_mask", "token_type_ids"}


def test_fuse_quantize_and_evaluate_accept_the_inference_graph(tiny_last, quick_data, tmp_path):
    from workbench.graph import FusionConfig, run_fusion
    from workbench.quant import BaselineConfig, EvalConfig, QuantConfig, TimingConfig, prepare_baseline, run_quantization

    export = tiny_last.load_export()
    assert export.validation.passed and Path(export.onnx_path) == Path(tiny_last.inference_path)
    fused = run_fusion(tiny_last.inference_dir, FusionConfig.inspect_only(variants=("unoptimized", "transformer")),
                       tmp_path / "fuse")
    assert fused.all_passed
    assert fused.variant("transformer").node_count < fused.variant("unoptimized").node_count
    base = prepare_baseline(export, quick_data, tmp_path / "q" / "baseline", BaselineConfig(timing=TimingConfig.quick(repeats=2)))
    q = run_quantization(base, QuantConfig.preset("dynamic"), tmp_path / "q", evaluation=EvalConfig(n_boot=100, node_error_samples=0))
    assert q.validation.passed
    assert q.report.n == len(quick_data["test"]) and q.report.overall.n == q.report.n  # every test review scored


def test_gradient_builder_failure_names_the_operator_and_the_fix(tmp_path):
    cfg = OnDeviceConfig.quick(opset=17, trainable="last")  # head only needs no LayerNorm gradient: builds at 17
    loaded = load_ondevice_model("tiny", cfg, CLASSES)
    with pytest.raises(GradientGraphError) as info:
        build_artifacts(loaded, cfg, tmp_path / "art")
    err = info.value
    assert err.operator == "LayerNormalization" and "opset 14" in err.fix and "written with 1 output at opset 17" in err.where
    text = str(err)
    assert "\n" not in text and "/onnxruntime_src/" not in text and "Traceback" not in text
    assert err.detail.startswith("gradient_builder_base.h:123: i < node_->OutputDefs().size() was false")
    assert not (tmp_path / "art").exists()  # nothing half-written


def test_config_errors_say_what_to_do():
    with pytest.raises(OnDeviceError, match="trainable must be one of \\['head', 'last', 'all'\\], got 'layers'"):
        OnDeviceConfig(trainable="layers")
    with pytest.raises(OnDeviceError, match="optimizer must be one of \\['AdamW'\\]"):
        OnDeviceConfig(optimizer="Adagrad")
    with pytest.raises(OnDeviceError, match="lr must be a learning rate"):
        OnDeviceConfig(lr=0)
    with pytest.raises(OnDeviceError, match="steps must be an integer of at least 1"):
        OnDeviceConfig(steps=0)


@pytest.mark.slow
@pytest.mark.parametrize("trainable", ["head", "last"])
def test_artifacts_for_minilm(tmp_path, trainable):
    cfg = OnDeviceConfig.default(trainable=trainable)
    loaded = load_ondevice_model("minilm", cfg, CLASSES)
    art = build_artifacts(loaded, cfg, tmp_path / "art", ["a fine film"])
    names = trainable_names(loaded.model, trainable)
    assert art.trainable_parameters == _numel(loaded.model, names)
    assert art.total_parameters > 22_000_000
    if trainable == "head":
        assert art.trainable_parameters == 384 * 2 + 2
    else:
        assert all(".layer.5." in n or "pooler" in n or n.startswith("classifier") for n in names)
    assert {f.name: f.size_mib for f in art.files}["checkpoint"] > 80  # all 22.7M parameters, frozen ones included


@pytest.mark.slow
def test_minilm_last_layer_steps_track_pytorch(tmp_path, quick_data):
    cfg = OnDeviceConfig.default(steps=4, batch_size=8, threads=1, measure_memory=False, validation_examples=8)
    r = run_ondevice("minilm", cfg, tmp_path, data=quick_data)
    assert r.loss_parity and r.validation.passed, (r.max_loss_diff, r.validation.message)


def test_child_process_entry_point_runs_from_any_folder():
    """`python -m workbench.ondevice` (the per-side process measure_isolated starts) is the package's
    __main__; it must start from any folder (the package has no module named core any more)."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[3]
    proc = subprocess.run([sys.executable, "-m", "workbench.ondevice", "--help"], capture_output=True, text=True, cwd="/",
                          env={**os.environ, "PYTHONPATH": str(repo)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "--side" in proc.stdout and "--work" in proc.stdout


def test_results_saved_with_the_model_in_the_config_still_load(tmp_path):
    """Before the stage took the model as its input, OnDeviceConfig held it: such JSON still loads."""
    from workbench.core import serial

    cfg = serial.from_dict(OnDeviceConfig, {"model": "tiny", "trainable": "last", "steps": 3})
    assert cfg.trainable is Trainable.LAST and cfg.steps == 3 and not hasattr(cfg, "model")
