"""The machine profile's GEMM chains: MiniLM layer-shaped ``MatMul`` (fp32), ``DynamicQuantizeMatMul`` (int8) or
``QLinearMatMul`` (qdq_int8), opened the way the workbench's sessions run."""

from __future__ import annotations

from typing import Optional

from ..core.latency import measure

# (K, N) of one transformer layer's GEMMs at MiniLM's sizes: attention projections, FFN in, FFN out
LAYER_GEMMS = ((384, 384), (384, 1536), (1536, 384))
CHAIN_LAYERS = 4  # layers of LAYER_GEMMS per timed graph (12 GEMMs: milliseconds, not microseconds)
KERNELS = ("fp32", "int8", "qdq_int8")


class MachineError(ValueError):
    """A setting the profile cannot work with; the message names the value and the fix."""


def gemm_chain(kernel: str, m: int, layers: int = CHAIN_LAYERS, seed: int = 0):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    k0 = LAYER_GEMMS[0][0]
    if kernel == "qdq_int8":
        x = helper.make_tensor_value_info("x", TensorProto.UINT8, [m, k0])
        y_type = TensorProto.UINT8
        inits += [numpy_helper.from_array(np.array(0.02, np.float32), "a_scale"),
                  numpy_helper.from_array(np.array(128, np.uint8), "a_zp"),
                  numpy_helper.from_array(np.array(0.01, np.float32), "b_scale"),
                  numpy_helper.from_array(np.array(0, np.int8), "b_zp")]
    else:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k0])
        y_type = TensorProto.FLOAT
    prev, i = "x", 0
    for _ in range(layers):
        for k, n in LAYER_GEMMS:
            out = f"h{i}"
            if kernel == "fp32":
                w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
                inits.append(numpy_helper.from_array(w, f"w{i}"))
                nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [out]))
            elif kernel == "int8":
                w = rng.integers(-127, 128, (k, n), dtype=np.int8)
                inits += [numpy_helper.from_array(w, f"w{i}"),
                          numpy_helper.from_array(np.array(0.01 / np.sqrt(k), np.float32), f"s{i}"),
                          numpy_helper.from_array(np.array(0, np.int8), f"z{i}")]
                nodes.append(helper.make_node("DynamicQuantizeMatMul", [prev, f"w{i}", f"s{i}", f"z{i}"], [out],
                                              domain="com.microsoft"))
            elif kernel == "qdq_int8":
                w = rng.integers(-127, 128, (k, n), dtype=np.int8)
                inits.append(numpy_helper.from_array(w, f"w{i}"))
                nodes.append(helper.make_node("QLinearMatMul", [prev, "a_scale", "a_zp", f"w{i}", "b_scale", "b_zp",
                                                                "a_scale", "a_zp"], [out]))
            else:
                raise MachineError(f"kernel must be one of {list(KERNELS)}, got {kernel!r}")
            prev, i = out, i + 1
    y = helper.make_tensor_value_info(prev, y_type, [m, LAYER_GEMMS[-1][1]])
    graph = helper.make_graph(nodes, f"gemm_{kernel}_{m}", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model


def chain_macs(m: int, layers: int = CHAIN_LAYERS) -> int:
    return m * layers * sum(k * n for k, n in LAYER_GEMMS)


def gemm_session(model, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # as the graphs' sessions run (workbench.runtime.session.make_session): spinning during a run, stopped when it returns
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1")
    opts.add_session_config_entry("session.force_spinning_stop", "1")
    return ort.InferenceSession(model.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"])


def gemm_feed(kernel: str, m: int):
    import numpy as np

    rng = np.random.default_rng(1)
    if kernel == "qdq_int8":
        return {"x": rng.integers(0, 256, (m, LAYER_GEMMS[0][0]), dtype=np.uint8)}
    return {"x": rng.standard_normal((m, LAYER_GEMMS[0][0])).astype(np.float32)}


def measure_gops(kernel: str, m: int, threads: int, repeats: int = 7, warmup: int = 2,
                 layers: int = CHAIN_LAYERS, max_seconds: Optional[float] = None) -> float:
    """GOP/s (2 operations per multiply-add) over the median run."""
    sess = gemm_session(gemm_chain(kernel, m, layers), threads)
    feed = gemm_feed(kernel, m)
    stats = measure(lambda: sess.run(None, feed), warmup=warmup, repeats=max(1, repeats), max_seconds=max_seconds)
    return 2.0 * chain_macs(m, layers) / stats.median_ms / 1e6
