"""Which weight-only bit widths this ONNX Runtime runs (a probe), apart from ``weightonly`` so ``config`` can ask cheaply."""

from __future__ import annotations

import functools

import numpy as np


def nbits_quantizer_class():
    """``MatMulNBitsQuantizer`` (2, 4 or 8 bits: onnxruntime 1.20+, the current stack), None in 1.19.2."""
    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    except ImportError:
        return None
    return MatMulNBitsQuantizer


@functools.cache  # once per process: the runtime does not change under it
def probe_bits() -> tuple[tuple[int, ...], str]:
    """(weight-only bits this ONNX Runtime's quantizer writes and its CPU kernel runs, its version): 4, and 8
    when one 64x32 MatMul quantized to 8 bits runs within 2% of the float product (1.32 does; 1.19.2 cannot)."""
    import onnxruntime as ort

    bits = [4]
    cls = nbits_quantizer_class()
    if cls is not None:
        from onnx import TensorProto, helper, numpy_helper

        rng = np.random.default_rng(0)
        w = rng.standard_normal((64, 32)).astype(np.float32)
        graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "probe",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 64])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 32])],
                                  [numpy_helper.from_array(w, "w")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        try:
            q = cls(model, bits=8, block_size=32, is_symmetric=True)
            q.process()
            session = ort.InferenceSession(q.model.model.SerializeToString(), providers=["CPUExecutionProvider"])
            x = rng.standard_normal((3, 64)).astype(np.float32)
            err = float(np.abs(session.run(None, {"x": x})[0] - x @ w).max() / np.abs(x @ w).max())
            if err < 0.02 and any(n.op_type == "MatMulNBits" for n in q.model.model.graph.node):
                bits.append(8)
        except Exception:  # noqa: BLE001  (a kernel that refuses 8 bits: 4 only, which check_bits then says)
            pass
    return tuple(bits), ort.__version__
