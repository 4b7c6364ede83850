"""The doctor: passes here, and names the fix when a piece is missing."""

from __future__ import annotations

import json

import pytest

from workbench import cli
from workbench.doctor import checks as env

# what the training stack's doctor says (its ONNX Runtime training build, ORTModule's extensions); the current
# stack's doctor is checked in test_two_stacks.py
training_stack_only = pytest.mark.skipif(env.stack() == "current", reason="the training stack's doctor (make setup)")


@training_stack_only
def test_doctor_passes_in_the_set_up_environment():
    report = env.run_doctor()
    assert report.ok, report.as_text()
    assert report["onnxruntime"].value.startswith("1.19.2")
    assert "training build" in report["onnxruntime"].value
    assert "torch_interop_utils" in report["ortmodule extensions"].value
    assert "CPUExecutionProvider" in report["execution providers"].value


@training_stack_only
def test_missing_extensions_are_reported_with_the_fix(monkeypatch):
    monkeypatch.setattr(env, "ortmodule_extension_files", lambda: [])
    check = env.check_ortmodule_extensions()
    assert not check.ok and check.required
    assert "torch_cpp_extensions.install" in check.fix


def test_wrong_torch_and_missing_training_build(monkeypatch):
    real = env._version
    monkeypatch.setattr(env, "_version", lambda d: "2.8.0" if d == "torch" else real(d))
    check = env.check_torch()
    assert not check.ok and "2.4-2.6" in check.fix

    monkeypatch.setattr(env, "_version", lambda d: "1.22.0" if d == "onnxruntime" else None)
    check = env.check_onnxruntime()
    assert not check.ok and "not a training build" in check.value and "make setup" in check.fix

    monkeypatch.setattr(env, "_version", lambda d: {"onnxruntime": "1.22.0", "onnxruntime-training-cpu": "1.19.2"}.get(d))
    check = env.check_onnxruntime()
    assert not check.ok and "overwrite each other" in check.fix


@training_stack_only
def test_cli_doctor_exit_code_and_json(monkeypatch, capsys):
    assert cli.main(["doctor", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["ok"] is True and {c["name"] for c in payload["checks"]} >= {"torch", "ortmodule extensions"}

    monkeypatch.setattr(env, "ortmodule_extension_files", lambda: [])
    monkeypatch.setattr(env, "CHECKS", [env.check_python, env.check_ortmodule_extensions])
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "fix: compile them once" in out


# ---- GPU ---------------------------------------------------------------------------
@training_stack_only
def test_doctor_reports_the_gpu_the_cuda_provider_and_the_training_build(monkeypatch):
    from workbench.runtime import device
    from workbench.runtime.device import CPU_PROVIDER, CUDA_PROVIDER, CudaFacts

    here = env.run_doctor()["gpu"]
    assert not here.required and "CUDAExecutionProvider:" in here.value and "training build: CPU" in here.value

    h100 = dict(torch_version="2.11.0", torch_cuda_build="13.0", torch_cuda_available=True, device_count=1,
                device_names=("NVIDIA H100 80GB HBM3",), capabilities=("9.0",))
    monkeypatch.setattr(device, "cuda_facts", lambda: CudaFacts(ort_providers=(CUDA_PROVIDER, CPU_PROVIDER),
                                                                ort_dists={"onnxruntime-gpu": "1.31.1"}, **h100))
    monkeypatch.setattr(env, "_version", lambda d: "1.31.1" if d == "onnxruntime-gpu" else None)
    check = env.check_gpu()
    assert check.ok and "NVIDIA H100 80GB HBM3 (compute capability 9.0)" in check.value
    assert "CUDAExecutionProvider: yes (onnxruntime-gpu 1.31.1)" in check.value and "training build: none" in check.value

    # a GPU with the CPU builds installed: a warning that says what to install
    monkeypatch.setattr(device, "cuda_facts", lambda: CudaFacts(ort_providers=(CPU_PROVIDER,),
                                                                ort_dists={"onnxruntime-training-cpu": "1.19.2"}, **h100))
    monkeypatch.setattr(env, "_version", lambda d: "1.19.2" if d == "onnxruntime-training-cpu" else None)
    check = env.check_gpu()
    assert not check.ok and not check.required and check.status == "warn" and "onnxruntime-gpu" in check.fix


def test_the_inference_gpu_environment_says_training_needs_the_training_environment(monkeypatch):
    real = env._version
    monkeypatch.setattr(env, "_version", lambda d: "1.31.1" if d == "onnxruntime-gpu" else (
        None if d.startswith("onnxruntime") else ("2.11.0" if d == "torch" else real(d))))
    assert env.training_build() is None and env.inference_only()
    ext = env.check_ortmodule_extensions()
    assert not ext.ok and not ext.required and "onnxruntime-gpu 1.31.1 is inference-only" in ext.value
    assert "make setup-gpu" in ext.fix and "Python 3.10/3.11" in ext.fix
    report = env.run_doctor()
    for name in env.TRAINING_ONLY_CHECKS:
        assert not report[name].required, name
    assert not report["torch"].ok and "training only" in report["torch"].fix  # torch 2.11: fine for inference
    assert report.ok, report.as_text()  # nothing an inference stage needs is missing

    from workbench.train import TrainConfig, TrainConfigError, wrap_ortmodule

    with pytest.raises(TrainConfigError, match="the ortmodule backend cannot run: no ONNX Runtime training build"):
        wrap_ortmodule(None, TrainConfig.quick())
