"""One real ORTModule training step on the tiny model, proving ONNX Runtime ran it."""

from __future__ import annotations

import torch


def test_one_ortmodule_step_runs_in_onnxruntime(tiny):
    from onnxruntime.training.ortmodule import ORTModule
    from onnxruntime.training.ortmodule._fallback import _FallbackPolicy
    from workbench.models.load import load_model

    eager = load_model("tiny", dropout=False, seed=1).model
    wrapped = ORTModule(load_model("tiny", dropout=False, seed=1).model)
    enc = tiny.tokenizer(["a fine film", "a dull and lifeless film"], padding=True, return_tensors="pt")
    labels = torch.tensor([1, 0])
    for m in (eager, wrapped):
        m.train()
    out_ort = wrapped(**enc, labels=labels)
    out_ort.loss.backward()
    out_eager = eager(**enc, labels=labels)
    out_eager.loss.backward()

    manager = wrapped._torch_module._execution_manager(True)
    # the policy ORTModule itself parsed: any failure raises instead of quietly training in PyTorch
    assert manager._fallback_manager.policy == _FallbackPolicy.FALLBACK_DISABLE
    assert manager._fallback_manager._exception is None  # no fallback happened
    assert manager._execution_agent is not None  # an ORT training session exists...
    assert manager._onnx_models.optimized_model is not None  # ...built from the exported graph
    # and it computed the same loss and gradients as PyTorch
    assert abs(out_ort.loss.item() - out_eager.loss.item()) < 1e-5
    g_ort = wrapped._torch_module._original_module.classifier.weight.grad
    g_eager = eager.classifier.weight.grad
    assert g_ort is not None and torch.allclose(g_ort, g_eager, atol=1e-5)
