"""The device choice (cpu | cuda) on a machine without CUDA: clear errors before any work, the
provider lists, I/O binding on the CPU, and the placement / Memcpy / graph-capture analysis on
real ONNX Runtime profiles and on constructed CUDA placements. The CUDA runs themselves are in
test_gpu.py (marked ``gpu``)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from workbench.core import serial
from workbench.cli import main
from workbench.runtime.device import (
    CPU_PROVIDER,
    CUDA_PROVIDER,
    CudaFacts,
    DeviceError,
    NodePlacement,
    analyze_placement,
    classify_capture_error,
    cuda_facts,
    cuda_problem,
    memcpy_counts,
    normalize_device,
    placements_from_profile,
    require_device,
    session_providers,
)
from workbench.runtime.ortinfer import BoundRunner, latency_by_shape, make_feed, make_session, probe_placement, synthetic_batch

NO_CUDA = cuda_problem(cuda_facts())
needs_no_cuda = pytest.mark.skipif(NO_CUDA is None, reason="CUDA is available here: the missing-CUDA errors cannot be shown")

CPU_ONLY = CudaFacts(ort_providers=(CPU_PROVIDER,), ort_dists={"onnxruntime-training-cpu": "1.19.2"},
                     torch_version="2.6.0", torch_cuda_build="12.4")
GPU_ORT_NO_DEVICE = CudaFacts(ort_providers=(CUDA_PROVIDER, CPU_PROVIDER), ort_dists={"onnxruntime-gpu": "1.31.1"},
                              torch_version="2.11.0", torch_cuda_build="13.0", torch_cuda_available=False)
H100 = CudaFacts(ort_providers=("TensorrtExecutionProvider", CUDA_PROVIDER, CPU_PROVIDER),
                 ort_dists={"onnxruntime-gpu": "1.31.1"}, torch_version="2.11.0", torch_cuda_build="13.0",
                 torch_cuda_available=True, device_count=1, device_names=("NVIDIA H100 80GB HBM3",), capabilities=("9.0",))


def test_device_names_are_normalized_and_anything_else_is_refused():
    assert normalize_device(" CUDA ") == "cuda" and normalize_device("cuda:1") == "cuda:1" and normalize_device("cpu") == "cpu"
    for bad in ("gpu", "cuda:x", "cuda:", "", None, "mps"):
        with pytest.raises(DeviceError, match=r"device must be 'cpu', 'cuda' or 'cuda:N', got "):
            normalize_device(bad)


def test_cuda_problem_names_the_missing_piece_and_what_to_install():
    cpu_build = cuda_problem(CPU_ONLY)
    assert "onnxruntime-training-cpu 1.19.2) is a CPU build" in cpu_build
    assert "onnxruntime-gpu" in cpu_build and "make setup-gpu-infer" in cpu_build and "--device cpu" in cpu_build
    assert "Python 3.10/3.11 only" in cpu_build  # the CUDA training build's limit, said where it is offered
    no_device = cuda_problem(GPU_ORT_NO_DEVICE)
    assert "no CUDA device is available" in no_device and "nvidia-smi" in no_device and "CUDA 13.0" in no_device
    cpu_torch = cuda_problem(CudaFacts(ort_providers=(CUDA_PROVIDER, CPU_PROVIDER), ort_dists={"onnxruntime-gpu": "1.31.1"},
                                       torch_version="2.11.0+cpu"))
    assert "CPU build (torch.version.cuda is None)" in cpu_torch
    assert "does not import" in cuda_problem(CudaFacts(ort_import_error="No module named 'onnxruntime'"))
    assert cuda_problem(H100) is None and cuda_problem(H100, "cuda:0") is None
    assert "only 1 device(s) are visible: use cuda:0..cuda:0" in cuda_problem(H100, "cuda:1")
    assert require_device("cuda", H100) == "cuda" and require_device("cpu", CPU_ONLY) == "cpu"
    with pytest.raises(DeviceError, match="is a CPU build"):
        require_device("cuda:0", CPU_ONLY)


@needs_no_cuda
def test_this_machine_has_no_cuda_and_says_so():
    assert cuda_problem(cuda_facts()) is not None
    with pytest.raises(DeviceError) as err:
        require_device("cuda")
    assert str(err.value) == NO_CUDA and ("onnxruntime-gpu" in NO_CUDA or "nvidia-smi" in NO_CUDA)
    with pytest.raises(DeviceError):
        make_session("does-not-matter.onnx", device="cuda")  # refused before the path is even looked at


def test_session_providers_for_each_device():
    assert session_providers("cpu") == ([CPU_PROVIDER], [{}])
    assert session_providers("cuda:1") == ([CUDA_PROVIDER, CPU_PROVIDER], [{"device_id": "1"}, {}])
    assert session_providers("cuda", cuda_graph=True)[1][0] == {"device_id": "0", "enable_cuda_graph": "1"}
    with pytest.raises(DeviceError, match="CUDA graphs need device='cuda'"):
        session_providers("cpu", cuda_graph=True)


# ---- placement on real graphs (CPU provider) ---------------------------------------------------
def test_placements_come_from_a_real_profile(exported_tiny, fused_tiny):
    path = exported_tiny.onnx_path
    feed = make_feed(make_session(path, graph_optimization="disabled"), synthetic_batch(2, 16, 1000))
    g = onnx.load(str(path)).graph
    plain = probe_placement(path, "cpu", feed, graph_optimization="disabled")
    # every node but the Constants (ONNX Runtime turns those into initializers) ran once, on the CPU
    assert sum(plain.nodes_by_provider.values()) == sum(1 for n in g.node if n.op_type != "Constant")
    assert set(plain.nodes_by_provider) == {CPU_PROVIDER}
    assert plain.cpu_nodes == [] and plain.memcpy_total == 0 and plain.graph_capture is None
    assert plain.summary().startswith("cpu: all ")
    # with level "all" the profile holds the optimized graph's nodes: as many as the ort_all variant has
    optimized = probe_placement(path, "cpu", feed, graph_optimization="all")
    assert sum(optimized.nodes_by_provider.values()) == fused_tiny.variant("ort_all").node_count


def test_placements_from_profile_reads_kernel_events_once_per_node():
    events = [
        {"cat": "Session", "name": "model_run", "args": {}},
        {"cat": "Node", "name": "Attention_0_fence_before", "args": {"op_name": "Attention"}},
        {"cat": "Node", "name": "Attention_0_kernel_time", "args": {"op_name": "Attention", "provider": CUDA_PROVIDER}},
        {"cat": "Node", "name": "Shape_3_kernel_time", "args": {"op_name": "Shape", "provider": CPU_PROVIDER}},
        {"cat": "Node", "name": "Attention_0_kernel_time", "args": {"op_name": "Attention", "provider": CUDA_PROVIDER}},
    ]
    assert placements_from_profile(events) == [NodePlacement("Attention_0", "Attention", CUDA_PROVIDER),
                                               NodePlacement("Shape_3", "Shape", CPU_PROVIDER)]


def _graph_with_memcpy(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("MemcpyToHost", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("MemcpyFromHost", ["b"], ["c"]), helper.make_node("MemcpyToHost", ["c"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
    path = tmp_path / "memcpy.onnx"
    onnx.save(model, str(path))
    return model, path


def test_memcpy_nodes_are_counted_in_a_model_and_a_file(tmp_path, exported_tiny):
    model, path = _graph_with_memcpy(tmp_path)
    assert memcpy_counts(model) == {"MemcpyToHost": 2, "MemcpyFromHost": 1} == memcpy_counts(path)
    assert memcpy_counts(exported_tiny.onnx_path) == {"MemcpyToHost": 0, "MemcpyFromHost": 0}


# The texts ONNX Runtime's inference_session.cc raises when a CUDA graph cannot be captured.
NOT_PARTITIONED = ("This session cannot use the CUDA Graph feature as requested by the user as all compute graph nodes "
                   "have not been partitioned to the CUDA EP.")
CONTROL_FLOW = ("This session cannot use the CUDA Graph feature as requested by the user as the model has control flow "
                "nodes which can't be supported by CUDAExecutionProvider")


def test_capture_refusals_are_explained():
    r = classify_capture_error(NOT_PARTITIONED)
    assert r.kind == "nodes_not_on_cuda" and "placed on the CPU" in r.reason and "fused graph" in r.fix and r.error == NOT_PARTITIONED
    assert classify_capture_error(CONTROL_FLOW).kind == "control_flow"
    assert classify_capture_error("something else entirely").kind == "unknown"


def test_a_cuda_placement_with_shape_ops_compute_and_memcpy_on_the_cpu():
    """What was measured on an H100 for the unfused graph, as placements: shape nodes and a
    Memcpy on the CPU, the rest on CUDA, graph capture refused."""
    placements = ([NodePlacement(f"MatMul_{i}", "MatMul", CUDA_PROVIDER) for i in range(4)]
                  + [NodePlacement("Shape_1", "Shape", CPU_PROVIDER), NodePlacement("Gather_2", "Gather", CPU_PROVIDER),
                     NodePlacement("Memcpy_3", "MemcpyToHost", CPU_PROVIDER), NodePlacement("Erf_9", "Erf", CPU_PROVIDER)])
    rep = analyze_placement(placements, "cuda", [CUDA_PROVIDER, CPU_PROVIDER], memcpy={"MemcpyToHost": 1, "MemcpyFromHost": 0},
                            capture_error=NOT_PARTITIONED)
    assert rep.nodes_by_provider == {CUDA_PROVIDER: 4, CPU_PROVIDER: 4}
    assert rep.cpu_ops == {"Shape": 1, "Gather": 1, "MemcpyToHost": 1, "Erf": 1}
    assert [p.name for p in rep.cpu_compute_nodes] == ["Erf_9"]  # shape bookkeeping and copies are not compute
    assert rep.memcpy_total == 1 and rep.graph_capture is False and rep.capture_refusal.kind == "nodes_not_on_cuda"
    text = rep.summary()
    assert "on the CPU: Shape 1, Gather 1, MemcpyToHost 1, Erf 1 (1 compute)" in text and "Memcpy nodes inserted: 1" in text
    assert "CUDA graph refused" in text
    # only shape nodes on the CPU: said as such; a captured graph is reported as captured
    fused = analyze_placement(placements[:5], "cuda", [CUDA_PROVIDER, CPU_PROVIDER], memcpy={}, captured=True)
    assert fused.cpu_compute_nodes == [] and "only shape bookkeeping" in fused.notes[0] and fused.summary().endswith("CUDA graph captured")
    # a session ONNX Runtime opened without the CUDA provider is named in the notes
    assert "did not load the CUDA provider" in analyze_placement(placements, "cuda", [CPU_PROVIDER]).notes[0]


# ---- I/O binding runs on the CPU too ----------------------------------------------------------
def test_bound_runner_on_the_cpu_matches_a_plain_run(exported_tiny):
    session = make_session(exported_tiny.onnx_path)
    feed = make_feed(session, synthetic_batch(3, 12, 1000))
    runner = BoundRunner(session, feed, "cpu")
    runner.run()
    np.testing.assert_array_equal(runner.binding.copy_outputs_to_cpu()[0], session.run(None, feed)[0])
    lat = latency_by_shape(exported_tiny.onnx_path, ((1, 8), (2, 8)), warmup=1, repeats=2, io_binding=True)
    assert [(s.batch, s.seq) for s in lat] == [(1, 8), (2, 8)] and all(s.stats.median_ms > 0 for s in lat)
    with pytest.raises(DeviceError, match="CUDA graphs need device='cuda'"):
        latency_by_shape(exported_tiny.onnx_path, ((1, 8),), warmup=0, repeats=1, cuda_graph=True)


# ---- every stage refuses CUDA before doing any work -------------------------------------------
def test_configs_carry_and_check_the_device():
    from workbench.graph import ExportConfig
    from workbench.graph import FusionConfig, Variant
    from workbench.quant import TimingConfig

    cfg = ExportConfig.quick(device="CUDA:0")
    assert cfg.device == "cuda:0" and serial.from_dict(ExportConfig, serial.to_dict(cfg)) == cfg
    assert TimingConfig(device="Cuda").device == "cuda"
    gpu = FusionConfig.gpu()
    assert gpu.device == "cuda" and gpu.fp16 and gpu.cuda_graph and gpu.shapes == ((1, 128), (32, 128))
    assert gpu.variants == (Variant.UNOPTIMIZED, Variant.TRANSFORMER, Variant.TRANSFORMER_FP16)
    assert serial.from_dict(FusionConfig, serial.to_dict(gpu)) == gpu
    with pytest.raises(ValueError, match="cuda_graph=True needs device='cuda'"):
        FusionConfig(cuda_graph=True)
    with pytest.raises(DeviceError, match="got 'gpu'"):
        ExportConfig(device="gpu")


@needs_no_cuda
def test_stages_refuse_cuda_before_writing_anything(tmp_path, exported_tiny, quant_tiny_baseline):
    from workbench.graph import ExportConfig, run_export
    from workbench.graph import FusionConfig, run_fusion
    from workbench.quant import QuantConfig, TimingConfig, run_quantization

    with pytest.raises(DeviceError, match="onnxruntime-gpu|nvidia-smi"):
        run_export("tiny", ExportConfig.quick(device="cuda"), tmp_path / "export")
    with pytest.raises(DeviceError, match="onnxruntime-gpu|nvidia-smi"):
        run_fusion(exported_tiny, FusionConfig.gpu(), tmp_path / "fusion")
    with pytest.raises(DeviceError, match="onnxruntime-gpu|nvidia-smi"):
        run_quantization(quant_tiny_baseline, QuantConfig.preset("dynamic"), tmp_path / "quant",
                         timing=TimingConfig.quick(device="cuda"))
    assert not any(p.exists() and any(p.iterdir()) for p in (tmp_path / "export", tmp_path / "fusion", tmp_path / "quant"))


@needs_no_cuda
@pytest.mark.parametrize("argv", [
    ["export", "--model", "tiny", "--preset", "quick", "--device", "cuda"],
    ["fuse", "{src}", "--device", "cuda"],
    ["fuse", "{src}", "--preset", "gpu"],  # the GPU preset means CUDA: refused the same way
    ["quantize", "{src}", "--quick", "--device", "cuda:0"],
])
def test_cli_device_cuda_without_cuda_is_exit_2_with_what_to_install(argv, exported_tiny, tmp_path, capsys):
    src = str(exported_tiny.onnx_path.parent)
    code = main([a.replace("{src}", src) for a in argv] + ["--run-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0 and err.startswith("workbench: error: CUDA was asked for")
    assert "onnxruntime-gpu" in err or "nvidia-smi" in err
    assert not (tmp_path / "out").exists()


def test_cli_rejects_an_unknown_device_in_one_line(exported_tiny, capsys):
    assert main(["fuse", str(exported_tiny.onnx_path.parent), "--device", "gpu"]) == 2
    assert capsys.readouterr().err.strip() == "workbench: error: --device must be 'cpu', 'cuda' or 'cuda:N', got 'gpu'"  # the flag's name


def test_fusion_summary_and_table_show_a_cuda_report(fused_tiny):
    """A report as a CUDA run writes it (placement, CUDA-graph latency, PyTorch peers), built from the
    CPU report: the text views and the JSON round trip carry every GPU field."""
    import dataclasses

    from workbench.graph import FusionReport, summary, table

    unopt = analyze_placement([NodePlacement("Shape_1", "Shape", CPU_PROVIDER), NodePlacement("Erf_2", "Erf", CPU_PROVIDER),
                               NodePlacement("MatMul_3", "MatMul", CUDA_PROVIDER)], "cuda", [CUDA_PROVIDER, CPU_PROVIDER],
                              memcpy={"MemcpyToHost": 1, "MemcpyFromHost": 2}, capture_error=NOT_PARTITIONED)
    fused = analyze_placement([NodePlacement("Attention_1", "Attention", CUDA_PROVIDER)], "cuda",
                              [CUDA_PROVIDER, CPU_PROVIDER], memcpy={}, captured=True)
    lat = fused_tiny.variant("transformer").latency
    report = dataclasses.replace(fused_tiny, device="cuda", placement={"unoptimized": unopt, "transformer": fused},
                                 cuda_graph_latency={"transformer": lat}, pytorch_peers={"sdpa_fp16": lat})
    s = summary(report)
    assert s["device"] == "cuda" and s["placement"]["unoptimized"]["memcpy_nodes"] == {"MemcpyToHost": 1, "MemcpyFromHost": 2}
    assert s["placement"]["unoptimized"]["capture_refusal"].startswith("nodes_not_on_cuda")
    assert s["placement"]["transformer"]["graph_capture"] is True
    assert set(s["cuda_graph_median_ms"]) == {"transformer"} and set(s["pytorch_peers_median_ms"]) == {"sdpa_fp16"}
    json.dumps(s)
    text = table(report)
    assert "device: cuda" in text and "  + CUDA graph" in text and "sdpa_fp16" in text
    assert "CUDA graph refused (nodes_not_on_cuda)" in text and "Memcpy nodes inserted: 3" in text
    back = serial.from_dict(FusionReport, serial.to_dict(report))
    assert back.placement["unoptimized"] == unopt and back.cuda_graph_latency.keys() == {"transformer"}
