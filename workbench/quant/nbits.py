"""Which weight-only bit widths this ONNX Runtime builds and runs: ``MatMulNBitsQuantizer`` where it exists
(onnxruntime 1.20+), and a probe that quantizes one small MatMul and runs it. Kept apart from
:mod:`workbench.quant.weightonly` so that :mod:`workbench.quant.config` can ask without importing the
quantizer (which imports the config)."""

from __future__ import annotations

import numpy as np


def nbits_quantizer_class():
    """``MatMulNBitsQuantizer`` (2, 4 or 8 bits: onnxruntime 1.20+, the current stack), None in 1.19.2."""
    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    except ImportError:
        return None
    return MatMulNBitsQuantizer


_PROBED: dict[str, tuple[tuple[int, ...], str]] = {}


def probe_bits() -> tuple[tuple[int, ...], str]:
    """(weight-only bits that this ONNX Runtime's quantizer writes and its CPU kernel runs, the version).

    1.19.2 writes 4 bits only (MatMul4BitsQuantizer) and its kernel refuses 8; from 1.20,
    ``MatMulNBitsQuantizer`` writes 8 bits too, and the CPU kernel of 1.32 runs them. Checked, not assumed:
    one 64x32 MatMul is quantized to 8 bits and run; the result must be within 2% of the float product."""
    import onnxruntime as ort

    if ort.__version__ in _PROBED:
        return _PROBED[ort.__version__]
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
    _PROBED[ort.__version__] = (tuple(bits), ort.__version__)
    return _PROBED[ort.__version__]
