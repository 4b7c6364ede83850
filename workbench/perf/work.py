"""The multiply-adds an ONNX graph does at one shape, by op and precision, and the floor they set on this machine.

Counted from the graph's own shapes inferred at concrete ``(batch, seq)`` (the contrib ops known), so it
holds for exported, fused, INT8, QDQ and weight-only graphs alike: matrix products and attention's
projections, QK^T and AV. Element-wise ops, normalizations and softmax are memory-bound and small: not counted.
MiniLM-L6 at 1x128 is 1.435 G multiply-adds in the exported, fused and INT8 graphs alike (tested).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

if TYPE_CHECKING:
    import onnx

    from .machine_profile import MachineProfile

FP32, INT8 = "fp32", "int8"
# INT8 kernels of static QDQ graphs (the profile's qdq_int8_gops when measured)
STATIC_INT8_OPS = ("QLinearMatMul", "QGemm", "MatMul(QDQ)", "Gemm(QDQ)")
MATMUL_OPS = ("MatMul", "FusedMatMul", "MatMulInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QLinearMatMul",
              "MatMulNBits", "MatMulBnb4", "MatMulFpQ4")
GEMM_OPS = ("Gemm", "QGemm")
ATTENTION_OPS = ("Attention", "QAttention", "MultiHeadAttention")
INT8_MATMUL_OPS = ("MatMulInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QLinearMatMul")


class WorkError(ValueError):
    """A graph whose work cannot be counted; the message says which node and why."""


@dataclass(frozen=True)
class GraphWork:
    batch: int
    seq: int
    fp32_macs: int
    int8_macs: int
    by_op: dict[str, dict[str, int]]
    # INT8 multiply-adds in static QDQ kernels (QLinearMatMul and kin); part of int8_macs
    static_int8_macs: int = 0
    uncounted_ops: list[str] = field(default_factory=list)  # matrix ops whose shapes could not be inferred

    @property
    def total_macs(self) -> int:
        return self.fp32_macs + self.int8_macs

    def text(self) -> str:
        ops = ", ".join(f"{op} {v.get(FP32, 0) / 1e6:.0f}M FP32 + {v.get(INT8, 0) / 1e6:.0f}M INT8"
                        for op, v in sorted(self.by_op.items()))
        return (f"{self.total_macs / 1e9:.3f} G multiply-adds at {self.batch}x{self.seq} "
                f"(FP32 {self.fp32_macs / 1e9:.3f} G, INT8 {self.int8_macs / 1e9:.3f} G): {ops}")


def _load(model) -> "onnx.ModelProto":
    import onnx

    if isinstance(model, onnx.ModelProto):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        return m
    path = Path(model)
    if not path.is_file():
        raise WorkError(f"no ONNX graph at {path}: pass an exported, fused or quantized model.onnx")
    return onnx.load(str(path))


def _fix_inputs(model, batch: int, seq: int) -> None:
    inits = {i.name for i in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        dims = inp.type.tensor_type.shape.dim
        for i, d in enumerate(dims):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            if i > 1:
                raise WorkError(f"input {inp.name!r} has a symbolic dim {d.dim_param!r} at position {i}: only the "
                                "batch (first) and sequence (second) dims may be symbolic")
            d.Clear()
            d.dim_value = batch if i == 0 else seq


def _inference_class():
    """``SymbolicShapeInference`` taught the contrib ops onnxruntime 1.19 leaves unknown: without
    them every shape after the embeddings of a dynamic-INT8 fused graph stays unknown."""
    import onnx
    from onnx import helper
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    float_ = onnx.TensorProto.FLOAT

    class Inference(SymbolicShapeInference):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.dispatcher_.update({
                "QEmbedLayerNormalization": self._q_embed,
                "QAttention": self._q_attention,
                "DynamicQuantizeMatMul": self._float_matmul,
                "MatMulIntegerToFloat": self._float_matmul,
                "FusedMatMul": self._fused_matmul,
                "QGemm": self._q_gemm,
            })

        def _set(self, name, dtype, shape):
            self.known_vi_[name].CopyFrom(helper.make_tensor_value_info(name, dtype, shape))

        def _q_embed(self, node):
            ids, word = self._get_shape(node, 0), self._get_shape(node, 2)
            self._set(node.output[0], float_, [*ids, word[1]])
            if len(node.output) > 1 and node.output[1]:
                self._set(node.output[1], onnx.TensorProto.INT32, [ids[0]])

        def _q_attention(self, node):
            x, w = self._get_shape(node, 0), self._get_shape(node, 1)
            sizes = _attr(node, "qkv_hidden_sizes")
            hidden = int(sizes[2]) if sizes else w[1] // 3
            self._set(node.output[0], float_, [x[0], x[1], hidden])

        def _float_matmul(self, node):
            self._compute_matmul_shape(node, float_)

        def _fused_matmul(self, node):
            a, b = list(self._get_shape(node, 0)), list(self._get_shape(node, 1))
            if _attr(node, "transA", 0):
                a[-2], a[-1] = a[-1], a[-2]
            if _attr(node, "transB", 0):
                b[-2], b[-1] = b[-1], b[-2]
            batch = self._broadcast_shapes(a[:-2], b[:-2]) if len(a) > 2 or len(b) > 2 else []
            self._set(node.output[0], self.known_vi_[node.input[0]].type.tensor_type.elem_type, [*batch, a[-2], b[-1]])

        def _q_gemm(self, node):
            a, b = self._get_shape(node, 0), self._get_shape(node, 3)
            m = a[1] if _attr(node, "transA", 0) else a[0]
            n = b[0] if _attr(node, "transB", 0) else b[1]
            dtype = float_ if len(node.input) < 8 or not node.input[7] else onnx.TensorProto.UINT8
            self._set(node.output[0], dtype, [m, n])

    return Inference


def _shapes(model) -> dict[str, list[int]]:
    # The steps of SymbolicShapeInference.infer_shapes, minus its habit of saving the model as
    # sym_shape_infer_temp.onnx in the working folder when some shape stays unknown.
    try:
        inference = _inference_class()(2**31 - 1, True, True, 0)
        inference._preprocess(model)
        while inference.run_:
            inference._infer_impl()
        inference._update_output_from_vi()
        inferred = inference.out_mp_
    except Exception as exc:  # the inference tool raises plain Exceptions and AssertionErrors
        raise WorkError(f"shape inference failed on this graph ({type(exc).__name__}: {exc}); "
                        "is it a valid ONNX model with batch and sequence inputs?") from exc
    if inferred is None:
        raise WorkError("shape inference gave up on this graph (an op it does not know); its work cannot be counted")
    shapes: dict[str, list[int]] = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
            if all(isinstance(d, int) and d >= 0 for d in dims):
                shapes[vi.name] = dims
    for init in g.initializer:
        shapes[init.name] = list(init.dims)
    return shapes, inferred


def _attr(node, name, default=None):
    from onnx.helper import get_attribute_value

    return next((get_attribute_value(a) for a in node.attribute if a.name == name), default)


def _matmul_k(node, a_shape) -> Optional[int]:
    if node.op_type == "MatMulNBits":
        return int(_attr(node, "K"))
    if not a_shape:
        return None
    if node.op_type in GEMM_OPS:
        return None if len(a_shape) != 2 else a_shape[0] if _attr(node, "transA", 0) else a_shape[1]
    if node.op_type == "FusedMatMul" and _attr(node, "transA", 0) and len(a_shape) >= 2:
        return a_shape[-2]
    return a_shape[-1]


def graph_work(model: Union["onnx.ModelProto", str, Path], batch: int, seq: int) -> GraphWork:
    """A ``MatMul``/``Gemm`` of two ``DequantizeLinear`` outputs counts as INT8 (ONNX Runtime fuses it);
    ``QAttention``'s attention products are FP32; ``MatMulNBits`` is FP32 unless ``accuracy_level=4``."""
    for name, v in (("batch", batch), ("seq", seq)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise WorkError(f"{name} must be a positive whole number, got {v!r}")
    m = _load(model)
    _fix_inputs(m, batch, seq)
    shapes, inferred = _shapes(m)
    producer = {o: n for n in inferred.graph.node for o in n.output}

    def dequantized(name: str) -> bool:
        p = producer.get(name)
        return p is not None and p.op_type == "DequantizeLinear"

    by_op: dict[str, dict[str, int]] = {}
    uncounted: list[str] = []
    static_int8 = 0

    def add(op: str, prec: str, macs: int) -> None:
        nonlocal static_int8
        d = by_op.setdefault(op, {FP32: 0, INT8: 0})
        d[prec] += int(macs)
        if prec == INT8 and op in STATIC_INT8_OPS:
            static_int8 += int(macs)

    for node in inferred.graph.node:
        op = node.op_type
        out = shapes.get(node.output[0]) if node.output else None
        if op in MATMUL_OPS or op in GEMM_OPS:
            k = _matmul_k(node, shapes.get(node.input[0]))
            if out is None or k is None:
                uncounted.append(f"{op} {node.name}")
                continue
            macs = math.prod(out) * k
            if op in INT8_MATMUL_OPS or op == "QGemm" or (op == "MatMulNBits" and _attr(node, "accuracy_level", 0) == 4):
                add(op, INT8, macs)
            elif op in ("MatMul", "Gemm") and len(node.input) > 1 and dequantized(node.input[0]) and dequantized(node.input[1]):
                add(f"{op}(QDQ)", INT8, macs)
            else:
                add(op, FP32, macs)
        elif op in ATTENTION_OPS:
            macs = _attention_macs(node, shapes)
            if macs is None:
                uncounted.append(f"{op} {node.name}")
                continue
            proj, products = macs
            add(op, INT8 if op == "QAttention" else FP32, proj)
            add(op, FP32, products)
    fp32 = sum(v[FP32] for v in by_op.values())
    int8 = sum(v[INT8] for v in by_op.values())
    return GraphWork(batch=batch, seq=seq, fp32_macs=fp32, int8_macs=int8, by_op=by_op,
                     static_int8_macs=static_int8, uncounted_ops=uncounted)


def _attention_macs(node, shapes) -> Optional[tuple[int, int]]:
    """(projection, QK^T + AV) multiply-adds of an attention node."""
    x = shapes.get(node.input[0])
    if node.op_type == "MultiHeadAttention":
        # query [B, S, Dq], key [B, L, Dk] (or packed forms: not counted), value [B, L, Dv]
        key = shapes.get(node.input[1]) if len(node.input) > 1 and node.input[1] else None
        value = shapes.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if x is None or len(x) != 3 or key is None or len(key) != 3:
            return None
        b, s, d = x
        dv = value[2] if value is not None and len(value) == 3 else d
        return 0, b * s * key[1] * (d + dv)
    w = shapes.get(node.input[1]) if len(node.input) > 1 else None
    if x is None or w is None or len(x) != 3 or len(w) != 2:
        return None
    b, s, d_in = x
    proj = b * s * d_in * w[1]
    sizes = _attr(node, "qkv_hidden_sizes")
    if sizes:
        dq, _dk, dv = (int(v) for v in sizes)
    else:
        dq = dv = w[1] // 3
    # past state (a decoder's cache) would add to the key length; encoder graphs have none
    return proj, b * s * s * (dq + dv)


@dataclass(frozen=True)
class Floor:
    floor_ms: float
    fp32_macs: int
    int8_macs: int
    profile_key: str
    # at the kernels' best throughput whatever the row count: far below floor_ms at short texts
    peak_floor_ms: Optional[float] = None

    def text(self) -> str:
        return f"floor {self.floor_ms:.2f} ms (FP32 {self.fp32_macs / 1e9:.3f} G + INT8 {self.int8_macs / 1e9:.3f} G multiply-adds)"


def floor_seconds(fp32_macs: float, dynamic_int8_macs: float, static_int8_macs: float, rows: Optional[int],
                  profile: "MachineProfile") -> float:
    """``rows=None``: at the best figures. Static QDQ work goes at the QLinearMatMul figure, else as dynamic INT8."""
    if profile.fp32_gops <= 0 or profile.int8_gops <= 0:
        raise WorkError(f"the machine profile's throughput must be positive, got FP32 {profile.fp32_gops} and "
                        f"INT8 {profile.int8_gops} GOP/s; re-measure it (workbench machine --refresh)")

    def gops(kernel: str) -> float:
        return profile.gops_at(kernel, rows) if rows is not None else {
            "fp32": profile.fp32_gops, "int8": profile.int8_gops, "qdq_int8": profile.qdq_int8_gops}[kernel]

    if not profile.qdq_int8_gops:
        dynamic_int8_macs, static_int8_macs = dynamic_int8_macs + static_int8_macs, 0
    seconds = 2.0 * fp32_macs / (gops("fp32") * 1e9)
    if dynamic_int8_macs:
        seconds += 2.0 * dynamic_int8_macs / (gops("int8") * 1e9)
    if static_int8_macs:
        seconds += 2.0 * static_int8_macs / (gops("qdq_int8") * 1e9)
    return seconds


def floor_for(work: GraphWork, profile: "MachineProfile") -> Floor:
    """No graph runs a matrix multiply faster than ONNX Runtime's kernel runs it alone at that row count."""
    args = (work.fp32_macs, work.int8_macs - work.static_int8_macs, work.static_int8_macs)
    seconds = floor_seconds(*args, rows=work.batch * work.seq, profile=profile)
    peak = floor_seconds(*args, rows=None, profile=profile)
    return Floor(floor_ms=seconds * 1e3, fp32_macs=work.fp32_macs, int8_macs=work.int8_macs, profile_key=profile.key,
                 peak_floor_ms=peak * 1e3)
