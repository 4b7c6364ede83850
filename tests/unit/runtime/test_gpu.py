"""The CUDA path on a real GPU: sessions on the CUDA provider, I/O binding, placement and Memcpy
analysis, CUDA-graph capture of the fused graph, FP16 validated on the GPU, PyTorch's GPU peers.

Marked ``gpu``: without a CUDA device and ONNX Runtime's CUDA provider every test here is skipped
with the reason (``workbench.runtime.device.cuda_problem``), in any checkout; run them in the inference GPU
environment (``make setup-gpu-infer``) with ``pytest -m gpu``.
"""

from __future__ import annotations

import numpy as np
import pytest

from workbench.runtime.device import CPU_PROVIDER, CUDA_PROVIDER, cuda_facts, cuda_problem, require_device
from workbench.runtime.ortinfer import probe_placement
from workbench.runtime.ortinfer import BoundRunner, latency_by_shape, make_feed, make_session, synthetic_batch

WHY_NOT = cuda_problem(cuda_facts())
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(WHY_NOT is not None, reason=f"needs CUDA: {WHY_NOT}")]


def test_cuda_sessions_run_on_the_cuda_provider(exported_tiny):
    assert require_device("cuda") == "cuda"
    session = make_session(exported_tiny.onnx_path, device="cuda")
    assert session.get_providers()[0] == CUDA_PROVIDER
    feed = make_feed(session, synthetic_batch(2, 16, 1000))
    runner = BoundRunner(session, feed, "cuda")
    runner.run()
    expected = make_session(exported_tiny.onnx_path).run(None, feed)[0]
    np.testing.assert_allclose(runner.binding.copy_outputs_to_cpu()[0], expected, atol=1e-3)


def test_the_fused_graph_runs_its_compute_on_cuda_and_captures_a_cuda_graph(fused_tiny):
    path = fused_tiny.fused_path
    feed = make_feed(make_session(path), synthetic_batch(1, 32, 1000))
    rep = probe_placement(path, "cuda", feed, try_graph_capture=True)
    assert rep.nodes_by_provider.get(CUDA_PROVIDER, 0) > 0
    assert rep.cpu_compute_nodes == [], rep.summary()
    assert rep.graph_capture is True, rep.capture_refusal
    lat = latency_by_shape(path, ((1, 32), (2, 32)), warmup=2, repeats=5, device="cuda", cuda_graph=True)
    assert [(s.batch, s.seq) for s in lat] == [(1, 32), (2, 32)] and all(s.stats.median_ms > 0 for s in lat)


def test_placement_of_the_unfused_graph_is_reported(exported_tiny):
    """An H100 run: the unfused graph keeps shape nodes (and a Memcpy) on the CPU and
    refuses graph capture. Whatever this GPU does, the report must be consistent with itself."""
    path = exported_tiny.onnx_path
    feed = make_feed(make_session(path), synthetic_batch(1, 32, 1000))
    rep = probe_placement(path, "cuda", feed, graph_optimization="all", try_graph_capture=True)
    assert set(rep.nodes_by_provider) <= {CUDA_PROVIDER, CPU_PROVIDER}
    assert len(rep.cpu_nodes) == rep.nodes_by_provider.get(CPU_PROVIDER, 0)
    assert rep.graph_capture is not None
    if rep.graph_capture is False:
        assert rep.capture_refusal is not None and rep.capture_refusal.error


def test_gpu_fusion_report_with_fp16_cuda_graphs_and_pytorch_peers(exported_tiny, tmp_path):
    from workbench.graph import FusionConfig, run_fusion, table

    cfg = FusionConfig.gpu(shapes=((1, 32), (4, 32)), warmup=3, repeats=10)
    r = run_fusion(exported_tiny, cfg, tmp_path)
    assert r.device == "cuda" and r.all_passed, [v.validation.message for v in r.variants]
    assert r.variant("transformer_fp16").validation.passed
    assert set(r.placement) == {"unoptimized", "transformer", "transformer_fp16"}
    assert r.placement["transformer_fp16"].graph_capture is True
    assert "transformer_fp16" in r.cuda_graph_latency
    assert set(r.pytorch_peers) == {"sdpa_fp16", "compile_fp16"} and r.pytorch_latency
    text = table(r)
    assert "device: cuda" in text and "  + CUDA graph" in text


def test_quantization_timing_on_cuda(quant_tiny_baseline, tmp_path):
    from workbench.quant import EvalConfig, QuantConfig, TimingConfig, run_quantization

    q = run_quantization(quant_tiny_baseline, QuantConfig.preset("dynamic"), tmp_path, evaluation=EvalConfig(n_boot=100),
                         timing=TimingConfig.quick(device="cuda"))
    assert q.latency and q.latency[0].stats.median_ms > 0
