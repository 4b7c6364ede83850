"""The GPU environments and the GPU benchmark, checked without a GPU: `make setup-gpu` stops on
Python 3.12, the inference GPU lock is consistent (one CUDA major, no training build), and the
GPU benchmark says why it measured nothing and builds its table and goal check from a report."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.benchmarks import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
PY312 = next((p for p in (shutil.which("python3.12"), "/root/.pyenv/versions/3.12.1/bin/python3.12", "/usr/bin/python3.12")
              if p and Path(p).is_file() and subprocess.run([p, "-V"], capture_output=True).returncode == 0), None)


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line.strip())
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


@pytest.mark.skipif(PY312 is None, reason="no Python 3.12 interpreter on this machine")
def test_setup_gpu_stops_on_python_3_12(tmp_path):
    # a copy of the script in an empty folder: if it did not stop, it would only touch tmp_path
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    r = subprocess.run(["bash", "scripts/setup.sh", "--gpu"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "PYTHON": PY312})
    assert r.returncode == 1
    assert "wheels for Python 3.10 and 3.11 only" in r.stderr and "make setup-gpu-infer" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scripts"]  # no .venv created


def test_the_inference_gpu_lock_is_consistent():
    top = _pins(ROOT / "requirements" / "gpu-infer.in")
    lock = _pins(ROOT / "requirements" / "constraints-gpu-infer.txt")
    for name, version in top.items():
        assert lock.get(name) == version, f"{name}=={version} in gpu-infer.in but {lock.get(name)} in the lock"
    assert "onnxruntime-gpu" in lock
    assert not {"onnxruntime", "onnxruntime-training", "onnxruntime-training-cpu"} & set(lock)  # one onnxruntime module
    # onnxruntime-gpu 1.26 is a CUDA 12 build: torch's CUDA libraries must be CUDA 12 too
    assert "nvidia-cuda-runtime-cu12" in lock and not any(n.endswith("-cu13") for n in lock)
    # the training lock is untouched by the GPU inference environment
    assert "onnxruntime-training-cpu" in _pins(ROOT / "requirements" / "constraints.txt")


def test_setup_gpu_infer_rejects_unknown_options():
    r = subprocess.run(["bash", str(ROOT / "scripts" / "setup_gpu_infer.sh"), "--gpu"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown option --gpu" in r.stderr


def test_bench_gpu_without_cuda_measures_nothing_and_says_why(tmp_path):
    from workbench.runtime.device import cuda_facts, cuda_problem

    why = cuda_problem(cuda_facts())
    if why is None:
        pytest.skip("CUDA is available here: the benchmark would measure")
    out = tmp_path / "bench_gpu.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0 and "GPU benchmark skipped, nothing measured" in r.stdout
    assert json.loads(out.read_text())["skipped"] == why
    assert subprocess.run(cmd + ["--require-gpu"], capture_output=True, text=True, timeout=120, cwd=tmp_path).returncode == 2


def test_bench_gpu_table_rows_and_goal_check(fused_tiny):
    bench_gpu = load_benchmark("bench_gpu")
    lat = fused_tiny.variant("transformer").latency
    slower = [dataclasses.replace(s, stats=dataclasses.replace(s.stats, median_ms=s.stats.median_ms * 3)) for s in lat]
    report = dataclasses.replace(fused_tiny, device="cuda", cuda_graph_latency={"transformer_fp16": lat},
                                 pytorch_peers={"sdpa_fp16": lat, "compile_fp16": slower})
    labels = [label for label, _ in bench_gpu.rows(report)]
    assert labels == ["PyTorch eager FP32", "PyTorch SDPA FP16", "torch.compile reduce-overhead FP16 (CUDA graphs)",
                      "ONNX Runtime CUDA, exported FP32", "ONNX Runtime CUDA, fused FP32",
                      "ONNX Runtime CUDA, fused FP16 + CUDA graph"]  # no FP16 variant in this report: no row
    goals = bench_gpu.goal_check(report)
    assert [g["shape"] for g in goals] == [[s.batch, s.seq] for s in lat]
    assert all(g["speedup"] == pytest.approx(3.0) for g in goals)
    by_batch = {g["shape"][0]: g for g in goals}
    if 1 in by_batch:
        assert by_batch[1]["goal"] == 2.5 and by_batch[1]["met"] is True
