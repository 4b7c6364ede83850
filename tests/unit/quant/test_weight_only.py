"""Weight-only quantization (MatMulNBits, 4-bit) as a preset measured like the others."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.quant import PRESETS, QuantConfig, QuantizeError
from workbench.quant.config import available_presets
from workbench.quant.nbits import probe_bits
from workbench.quant.formats import EIGHT_BIT_REFUSAL
from workbench.quant.weightonly import quantize_weight_only


def _dequantize_nbits(packed: np.ndarray, scales: np.ndarray, zero_points, k: int, n: int, block_size: int) -> np.ndarray:
    """The K x N float weight a MatMulNBits node (4 bits) stands for: ``(q - zp) * scale`` per block
    (zero point 8 when the node has none)."""
    k_blocks = (k + block_size - 1) // block_size
    p = packed.reshape(n, k_blocks, block_size // 2)
    q = np.empty((n, k_blocks, block_size), np.float32)
    q[..., 0::2], q[..., 1::2] = p & 0x0F, p >> 4
    if zero_points is None:
        zp = np.full((n, k_blocks), 8.0, np.float32)
    else:
        z = zero_points.reshape(n, -1)
        zp = np.empty((n, z.shape[1] * 2), np.float32)
        zp[:, 0::2], zp[:, 1::2] = z & 0x0F, z >> 4
        zp = zp[:, :k_blocks]
    w = (q - zp[..., None]) * scales.reshape(n, k_blocks)[..., None]
    return w.reshape(n, k_blocks * block_size)[:, :k].T


def _matmul_graph(path, k: int, n: int, seed: int = 0):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(seed).normal(0, 0.5, (k, n)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", n])],
                          [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), str(path))
    return w


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("accuracy_level", [0, 4])
def test_packing_is_what_onnxruntimes_kernel_reads(tmp_path, symmetric, accuracy_level):
    """ONNX Runtime's MatMulNBits kernel on the quantized graph equals x @ (the weights dequantized
    from the stored blocks by the spec), and that is close to x @ W: a wrong nibble order, scale
    sign or zero-point layout breaks one or the other."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    k, n = 96, 40  # 3 blocks of 32 (an odd count: the zero points' last byte is half used)
    w = _matmul_graph(tmp_path / "f.onnx", k, n)
    cfg = QuantConfig.preset("weight-only-int4", accuracy_level=accuracy_level, weight_symmetric=symmetric)
    out = quantize_weight_only(tmp_path / "f.onnx", cfg, tmp_path / "q.onnx")
    m = onnx.load(str(out))
    (node,) = m.graph.node
    assert node.op_type == "MatMulNBits" and node.domain == "com.microsoft"
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert (attrs["K"], attrs["N"], attrs["bits"], attrs["block_size"]) == (k, n, 4, 32)
    assert attrs.get("accuracy_level", 0) == accuracy_level
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    zp = inits[node.input[3]] if len(node.input) > 3 else None
    assert (zp is None) == symmetric
    wd = _dequantize_nbits(inits[node.input[1]], inits[node.input[2]], zp, k, n, 32)
    # round to nearest: each weight within half a step of its block; symmetric maps the value of
    # largest magnitude to -8, so the other side's extreme clips at +7 (up to one step)
    step = np.abs(inits[node.input[2]]).reshape(n, 3)
    assert (np.abs(wd - w).T.reshape(n, 3, 32) <= step[..., None] * (1.0 if symmetric else 0.5) + 1e-6).all()
    x = np.random.default_rng(1).normal(size=(5, k)).astype(np.float32)
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = s.run(None, {"x": x})[0]
    tol = 2e-2 if accuracy_level == 4 else 1e-4  # level 4 also quantizes x to INT8 per block
    np.testing.assert_allclose(got, x @ wd, rtol=tol, atol=tol * np.abs(x @ wd).max())
    assert np.abs(got - x @ w).max() < 0.15 * np.abs(x @ w).max()


def test_eight_bits_and_bad_options_refused_in_one_line():
    eight = [] if 8 in probe_bits()[0] else [({"mode": "weight-only", "weight_bits": 8}, "Only 4b quantization is supported")]
    for kw, match in [*eight, ({"mode": "weight-only", "weight_bits": 3}, "weight_bits=3: MatMulNBits in onnxruntime"),
                      ({"mode": "weight-only", "per_channel": True},
                       "per_channel=True: per_channel applies to dynamic and static quantization only"),
                      ({"mode": "weight-only", "block_size": 24}, "power of 2"),
                      ({"mode": "weight-only", "accuracy_level": 5}, "accuracy_level must be one of"),
                      ({"mode": "weight-only", "op_types": ("Gemm",)}, "cannot be quantized in weight-only mode"),
                      ({"mode": "dynamic", "accuracy_level": 4},
                       "accuracy_level=4: accuracy_level applies to weight-only quantization only")]:
        with pytest.raises(QuantizeError, match=match) as e:
            QuantConfig(**kw)
        assert "\n" not in str(e.value)
    assert "weight-only-int8" not in PRESETS
    if 8 in probe_bits()[0]:  # onnxruntime >= 1.31 (the current stack): its CPU kernel runs 8-bit weights
        assert QuantConfig.preset("weight-only-int8").bits == 8 and "weight-only-int8" in available_presets()
        return
    with pytest.raises(QuantizeError, match="preset 'weight-only-int8'") as e:
        QuantConfig.preset("weight-only-int8")
    assert EIGHT_BIT_REFUSAL in str(e.value)
    assert {"weight-only-int4", "weight-only-int4-acc4"} <= set(PRESETS)


def test_weight_only_preset_builds_validates_and_is_scored(quant_tiny_baseline, tmp_path):
    """Through the same run_quantization path as the INT8 presets: graph, size, latency and floor
    beside the FP32 graph, validation, slices, notes that show the accuracy level."""
    import onnx

    from workbench.quant import EvalConfig, run_quantization

    cfg = QuantConfig.preset("weight-only-int4-acc4")
    res = run_quantization(quant_tiny_baseline, cfg, tmp_path / "wo", evaluation=EvalConfig(n_boot=100, node_error_samples=8))
    ops = [n.op_type for n in onnx.load(str(res.quantized_path)).graph.node]
    assert ops.count("MatMulNBits") == len(res.quantized_nodes) > 0
    assert res.op_histogram.get("MatMulNBits") == ops.count("MatMulNBits")
    assert res.validation.passed, res.validation.message
    assert res.name == "weight-only-int4-b32-acc4" and res.config.accuracy_level == 4
    assert any("accuracy_level 4: INT8 compute" in n for n in res.notes)
    assert res.report.n == quant_tiny_baseline.eval_set("test").n and res.report.slices
    assert res.latency and res.fp32_latency and res.speed and res.latency[0].median_ms > 0
    assert res.scoring is not None and res.scoring.order == "length" and res.scoring.rows == res.report.n
    assert 0 < res.size_mib < res.fp32_size_mib
    assert res.node_errors  # the per-node SQNR ranking works on MatMulNBits graphs too


def test_cli_offers_the_presets_and_refuses_eight_bits_in_one_line(exported_tiny):
    import subprocess
    import sys

    help_text = subprocess.run([sys.executable, "-m", "workbench.cli", "quantize", "--help"], capture_output=True, text=True).stdout
    assert "weight-only-int4-acc4" in help_text and "--accuracy-level" in help_text
    if 8 in probe_bits()[0]:
        pytest.skip(f"onnxruntime {probe_bits()[1]} builds and runs 8-bit weight-only graphs: "
                    "test_eight_bit_weights_build_and_run_where_the_kernel_runs_them checks them")
    p = subprocess.run([sys.executable, "-m", "workbench.cli", "quantize", str(exported_tiny.out_dir), "--preset", "weight-only-int8"],
                       capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip() and "CUDA" not in line]
    assert len(lines) == 1 and "Only 4b quantization is supported" in lines[0] and "Traceback" not in p.stderr
    from workbench.audit import AuditConfig
    from workbench.audit.config import AuditInputError

    with pytest.raises(AuditInputError, match="--presets weight-only-int8: .*4-bit weights only"):
        AuditConfig(data="x.csv", presets=("dynamic", "weight-only-int8"))
    assert AuditConfig(data="x.csv", presets=("weight-only-int4",)).presets == ("weight-only-int4",)


def test_eight_bit_weights_build_and_run_where_the_kernel_runs_them(tmp_path):
    """onnxruntime >= 1.31: MatMulNBitsQuantizer writes bits=8 and the CPU kernel runs it, closer to the float
    product than 4 bits; onnxruntime 1.19.2 (the training stack): refused in one line with the reason."""
    import onnx
    import onnxruntime as ort

    bits, version = probe_bits()
    assert bits[0] == 4 and set(bits) <= {4, 8}
    if version.startswith("1.19."):
        assert bits == (4,)
        with pytest.raises(QuantizeError, match="Only 4b quantization is supported") as e:
            QuantConfig(mode="weight-only", weight_bits=8)
        assert "\n" not in str(e.value)
        return
    assert 8 in bits, f"onnxruntime {version}: its MatMulNBits CPU kernel was expected to run 8-bit weights"
    w = _matmul_graph(tmp_path / "f.onnx", 128, 64)
    x = np.random.default_rng(1).normal(0, 1, (5, 128)).astype(np.float32)
    errors = {}
    for b in (4, 8):
        out = quantize_weight_only(tmp_path / "f.onnx", QuantConfig(mode="weight-only", weight_bits=b), tmp_path / f"q{b}.onnx")
        (node,) = onnx.load(str(out)).graph.node
        assert node.op_type == "MatMulNBits" and {a.name: a.i for a in node.attribute}["bits"] == b
        got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        errors[b] = float(np.abs(got - x @ w).max() / np.abs(x @ w).max())
    assert errors[8] < errors[4] / 4 and errors[8] < 0.02, errors
