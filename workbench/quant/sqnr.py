"""Per-node quantization error: SQNR of every quantized node between the FP32 and the INT8 graph."""

from __future__ import annotations

import dataclasses
import enum
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from ..core.options import parse_choice
from ..core.threads import cap_session_threads
from .config import QuantizeError
from .quantize import quantized_nodes

SQNR_EPS = float(np.finfo("float").eps)  # qdq_loss_debug's floor for norms


@dataclass(frozen=True)
class NodeError:
    """Quantization error at one node in dB of SQNR (higher is better; 6 dB is about a bit): accumulated up to
    its ``output`` or ``input``, or added by quantizing its ``activation`` or ``weight`` alone; ``local``, the lower
    of those two, ranks the nodes, since it does not depend on what happened upstream."""

    node: str
    op_type: str
    output: str
    output_sqnr_db: float
    input_sqnr_db: float
    activation_sqnr_db: float
    weight_sqnr_db: float
    local_sqnr_db: float
    rank: int = 0


def _sqnr_db(signal_sq: float, noise_sq: float) -> float:
    """20*log10(||x|| / ||x - y||) with qdq_loss_debug's epsilon floors (never infinite)."""
    return 20.0 * math.log10(max(math.sqrt(signal_sq), SQNR_EPS) / max(math.sqrt(noise_sq), SQNR_EPS))


def _augment_outputs(model_path: Path, outputs: dict[str, int], out_path: Path) -> None:
    import onnx
    from onnx import helper

    model = onnx.load(str(model_path))
    have = {o.name for o in model.graph.output}
    for name, elem in outputs.items():
        if name not in have:
            model.graph.output.append(helper.make_tensor_value_info(name, elem, None))
    onnx.save(model, str(out_path))


def _weight_sqnr(finit: dict, qinit: dict, dq_nodes: dict, weight: str) -> float:
    """SQNR of a quantized weight against the FP32 weight (NaN if not quantized), in float64:
    ``qdq_loss_debug.create_weight_matching`` subtracts the zero point in the weight's integer type, which
    wraps around for uint8 weights (ONNX Runtime 1.19's per-tensor QDQ MatMul weights: about -15 dB)."""
    from onnx import numpy_helper
    from onnxruntime.quantization.qdq_loss_debug import compute_signal_to_quantization_noice_ratio

    qname = f"{weight}_quantized"
    if weight not in finit or qname not in qinit:
        return float("nan")
    dq = dq_nodes.get(qname)
    scale_name = dq.input[1] if dq is not None else f"{weight}_scale"
    zp_name = dq.input[2] if dq is not None and len(dq.input) > 2 else f"{weight}_zero_point"
    if scale_name not in qinit:
        return float("nan")
    w = numpy_helper.to_array(finit[weight]).astype(np.float64)
    q = numpy_helper.to_array(qinit[qname]).astype(np.float64)
    scale = numpy_helper.to_array(qinit[scale_name]).astype(np.float64)
    zp = numpy_helper.to_array(qinit[zp_name]).astype(np.float64) if zp_name in qinit else np.zeros_like(scale)
    if scale.size > 1:
        if dq is not None:
            axis = next((a.i for a in dq.attribute if a.name == "axis"), 1)
        elif q.shape[-1] == scale.size:
            axis = q.ndim - 1
        else:
            axis = int(np.flatnonzero(np.array(q.shape) == scale.size)[0])
        shape = [1] * q.ndim
        shape[axis] = scale.size
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    deq = (q - zp) * scale
    if deq.shape != w.shape or not np.any(w):
        return float("nan")  # an all-zero tensor (an untrained bias) has no signal to compare
    return float(compute_signal_to_quantization_noice_ratio(w, deq))


def node_errors(
    float_path: str | os.PathLike,
    quant_path: str | os.PathLike,
    feeds: Sequence[Mapping[str, np.ndarray]],
    op_types: Iterable[str] = ("MatMul", "Gemm", "Attention", "Gather", "EmbedLayerNormalization"),
) -> list[NodeError]:
    """SQNR per quantized node between the FP32 and the quantized graph on the same ``feeds``, worst first: the
    sums of squares are accumulated batch by batch (``qdq_loss_debug``'s number, without holding every batch)."""
    import onnx

    float_path, quant_path = Path(float_path), Path(quant_path)
    if not feeds:
        raise QuantizeError("node_errors needs at least one batch of inputs")
    fmodel = onnx.load(str(float_path))
    qmodel = onnx.load(str(quant_path))
    plan, f_out, q_out = _comparison_plan(fmodel, qmodel, quantized_nodes(float_path, quant_path, op_types))
    acc = _accumulate_errors(float_path, quant_path, f_out, q_out, plan, feeds)

    def db(key: str) -> float:
        return _sqnr_db(*acc[key]) if key in acc else float("nan")

    finit_map = {i.name: i for i in fmodel.graph.initializer}
    qinit_map = {i.name: i for i in qmodel.graph.initializer}
    dq_nodes = {n.input[0]: n for n in qmodel.graph.node if n.op_type == "DequantizeLinear"}
    rows = []
    for node, out, acts, weights in plan:
        wv = _lowest(_weight_sqnr(finit_map, qinit_map, dq_nodes, w) for w in weights)
        av = _lowest(db(f"qdq:{a}") for a in acts)
        rows.append(NodeError(node.name, node.op_type, out, db(f"out:{out}"), _lowest(db(f"in:{a}") for a in acts), av, wv,
                              _lowest((wv, av))))
    ranked = sorted(rows, key=lambda r: (math.isnan(r.local_sqnr_db), r.local_sqnr_db if not math.isnan(r.local_sqnr_db) else 0.0, r.node))
    return [dataclasses.replace(r, rank=i + 1) for i, r in enumerate(ranked)]


def _lowest(values: Iterable[float]) -> float:
    return min((v for v in values if not math.isnan(v)), default=float("nan"))


def _comparison_plan(fmodel, qmodel, names: Sequence[str]) -> tuple[list, dict[str, int], dict[str, int]]:
    """Per quantized node ``(node, output, [activation inputs], [weights])``, and the tensors each graph must
    expose for it (name -> ONNX element type), QDQ outputs and DynamicQuantizeLinear parts included."""
    from onnx import TensorProto

    fnodes = {n.name: n for n in fmodel.graph.node}
    finit = {i.name for i in fmodel.graph.initializer}
    const_out = {o for n in fmodel.graph.node if n.op_type == "Constant" for o in n.output}
    qproduced = {o for n in qmodel.graph.node for o in n.output} | {i.name for i in qmodel.graph.input}
    float_inputs = {"MatMul": (0, 1), "Gemm": (0, 1), "Attention": (0,), "Conv": (0,)}

    plan = []  # (node, output, [activation inputs], [weights])
    f_out: dict[str, int] = {}
    q_out: dict[str, int] = {}
    for name in names:
        node = fnodes[name]
        out = node.output[0]
        acts = [node.input[i] for i in float_inputs.get(node.op_type, ()) if i < len(node.input)
                and node.input[i] and node.input[i] not in finit and node.input[i] not in const_out]
        weights = [x for x in node.input if x in finit]
        plan.append((node, out, acts, weights))
        if out in qproduced:
            f_out[out] = q_out[out] = TensorProto.FLOAT
        for a in acts:
            f_out[a] = TensorProto.FLOAT
            if a in qproduced:
                q_out[a] = TensorProto.FLOAT
            for post in (f"{a}_DequantizeLinear_Output", f"{a}_DequantizeLinear_Output_1"):
                if post in qproduced:
                    q_out[post] = TensorProto.FLOAT
            if f"{a}_quantized" in qproduced:  # DynamicQuantizeLinear outputs
                q_out[f"{a}_quantized"] = TensorProto.UINT8
                q_out[f"{a}_scale"] = TensorProto.FLOAT
                q_out[f"{a}_zero_point"] = TensorProto.UINT8
    return plan, f_out, q_out


def _accumulate_errors(float_path: Path, quant_path: Path, f_out: dict[str, int], q_out: dict[str, int], plan: list,
                       feeds: Sequence[Mapping[str, np.ndarray]]) -> dict[str, list[float]]:
    """Run both graphs (optimizations off, as ``qdq_loss_debug`` does) and sum ``[signal^2, noise^2]`` per key:
    ``out:<output>``, ``in:<activation>`` and ``qdq:<activation>`` (before and after its quantization)."""
    import tempfile

    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    cap_session_threads(opts)
    acc: dict[str, list[float]] = {}  # key -> [signal^2, noise^2]

    def add(key: str, x: np.ndarray, y: np.ndarray) -> None:
        x = np.asarray(x, dtype=np.float64).ravel()
        y = np.asarray(y, dtype=np.float64).ravel()
        s = acc.setdefault(key, [0.0, 0.0])
        s[0] += float((x**2).sum())
        s[1] += float(((x - y) ** 2).sum())

    with tempfile.TemporaryDirectory(prefix="node-errors-") as tmp:
        fa, qa = Path(tmp) / "float.onnx", Path(tmp) / "quant.onnx"
        _augment_outputs(float_path, f_out, fa)
        _augment_outputs(quant_path, q_out, qa)
        fs = ort.InferenceSession(str(fa), sess_options=opts, providers=["CPUExecutionProvider"])
        qs = ort.InferenceSession(str(qa), sess_options=opts, providers=["CPUExecutionProvider"])
        fnames, qnames = list(f_out), list(q_out)
        for feed in feeds:
            fv = dict(zip(fnames, fs.run(fnames, dict(feed))))
            qv = dict(zip(qnames, qs.run(qnames, dict(feed))))
            for node, out, acts, _ in plan:
                if out in qv:
                    add(f"out:{out}", fv[out], qv[out])
                for a in acts:
                    if a in qv:
                        add(f"in:{a}", fv[a], qv[a])
                        pre = qv[a]
                        post = qv.get(f"{a}_DequantizeLinear_Output", qv.get(f"{a}_DequantizeLinear_Output_1"))
                        if post is None and f"{a}_quantized" in qv:
                            post = (qv[f"{a}_quantized"].astype(np.float64) - float(qv[f"{a}_zero_point"])) * float(qv[f"{a}_scale"])
                        if post is not None:
                            add(f"qdq:{a}", pre, post)
    return acc


class RankBy(str, enum.Enum):
    """Which SQNR of :class:`NodeError` ranks the nodes (its field is ``<value>_sqnr_db``)."""

    LOCAL = "local"
    OUTPUT = "output"
    WEIGHT = "weight"
    ACTIVATION = "activation"


def worst_nodes(errors: Sequence[NodeError], k: int, rank_by: str | RankBy = RankBy.LOCAL) -> list[str]:
    """Names of the ``k`` nodes with the lowest SQNR (``rank_by``: local | output | weight | activation)."""
    field_name = f"{parse_choice(RankBy, rank_by, 'rank_by', QuantizeError, 'local ranks by the error the node adds itself').value}_sqnr_db"
    if k < 1:
        raise QuantizeError(f"worst_k must be at least 1, got {k}")
    usable = [e for e in errors if not math.isnan(getattr(e, field_name))]
    return [e.node for e in sorted(usable, key=lambda e: (getattr(e, field_name), e.node))[:k]]

