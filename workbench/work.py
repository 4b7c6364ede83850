"""Work per graph: the multiply-adds an ONNX graph does at a given input shape, by op and precision,
and the floor that work sets on this machine.

``graph_work(model, batch, seq)`` reads every tensor's shape at ``(batch, seq)`` from one run of
the graph in ONNX Runtime (optimizations off, so the nodes are the file's; exact for its fused
contrib ops) and counts the multiply-adds of the ops that do the arithmetic:

- ``MatMul``, ``FusedMatMul``, ``Gemm``: FP32 (activation products included, e.g. Q·Kᵀ); INT8 in
  a static QDQ graph when both inputs come from ``DequantizeLinear`` (ONNX Runtime runs them as
  ``QLinearMatMul``).
- ``MatMulInteger``, ``DynamicQuantizeMatMul``, ``MatMulIntegerToFloat``, ``QLinearMatMul``,
  ``QGemm``: INT8.
- ``Attention`` (FP32) / ``QAttention`` (INT8 projection): the Q, K, V projection, plus Q·Kᵀ and
  softmax·V (FP32 in both; dynamic INT8 leaves them in FP32).
- ``MatMulNBits``: weight-only quantized; its weights are dequantized and the product runs in
  FP32 unless ``accuracy_level`` is 4 (INT8 compute).

``floor_for(work, profile)`` is the time that work takes at this machine's measured throughput
(:mod:`workbench.machine`): INT8 work ÷ INT8 throughput + FP32 work ÷ FP32 throughput, each at the
graph's token count. ``of_floor(measured, floor)`` is floor ÷ measured: 1.0 means the graph runs
as fast as its matrix multiplies allow here; the rest is the other ops and fixed per-op costs.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

if TYPE_CHECKING:
    import onnx

    from .machine import MachineProfile

FP32_MATMULS = {"MatMul", "FusedMatMul", "Gemm"}
INT8_MATMULS = {"MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QLinearMatMul", "QGemm"}
ATTENTION_OPS = {"Attention": "fp32", "QAttention": "int8"}


class WorkError(ValueError):
    """A graph whose work cannot be counted (one line naming the graph and why)."""


@dataclass(frozen=True)
class GraphWork:
    batch: int
    seq: int
    fp32_macs: int
    int8_macs: int
    by_op: dict[str, dict[str, int]]  # op type -> {"fp32": macs, "int8": macs}

    @property
    def total_macs(self) -> int:
        return self.fp32_macs + self.int8_macs

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


@dataclass(frozen=True)
class Floor:
    floor_ms: float
    fp32_macs: int
    int8_macs: int
    tokens: int
    profile_key: str


def _load(model: Union["onnx.ModelProto", str, os.PathLike]) -> "onnx.ModelProto":
    import onnx

    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            raise WorkError(f"no ONNX graph at {path}: export one first (workbench export)")
        try:
            return onnx.load(str(path))
        except Exception as exc:  # protobuf's DecodeError and friends: a file that is not a graph
            raise WorkError(f"{path} is not a readable ONNX graph ({type(exc).__name__}: {exc}); export it again") from exc
    return model


def _vocab(model: "onnx.ModelProto") -> int:
    """The word-embedding rows (the smallest table a Gather or EmbedLayerNormalization reads with
    the token ids), so synthetic ids stay inside it; 1000 when none is found."""
    dims = {i.name: list(i.dims) for i in model.graph.initializer}
    rows = []
    for node in model.graph.node:
        table = node.input[0] if node.op_type == "Gather" else node.input[2] if node.op_type == "EmbedLayerNormalization" else None
        if table in dims and len(dims[table]) == 2 and dims[table][0] >= 200:
            rows.append(int(dims[table][0]))
    return min([1000, *rows]) if rows else 1000


def _shapes(model: "onnx.ModelProto", batch: int, seq: int) -> dict[str, list[int]]:
    """Every tensor's shape at ``batch`` x ``seq``, by name: the initializers', and every node
    output's as ONNX Runtime computes it on one synthetic batch (exact for every op it runs, its
    fused contrib ops included, which static shape inference does not always follow)."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    from .ortinfer import make_feed, synthetic_batch

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    shapes: dict[str, list[int]] = {init.name: [int(d) for d in init.dims] for init in probe.graph.initializer}
    present = {o.name for o in probe.graph.output}
    for node in probe.graph.node:
        for name in node.output:
            if name and name not in present:
                probe.graph.output.append(onnx.ValueInfoProto(name=name))
                present.add(name)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the nodes as the file has them
    so.log_severity_level = 3
    try:
        session = ort.InferenceSession(probe.SerializeToString(), so, providers=["CPUExecutionProvider"])
        values = session.run(None, make_feed(session, synthetic_batch(batch, seq, _vocab(probe))))
    except Exception as exc:  # noqa: BLE001 - ONNX Runtime's errors are plain RuntimeErrors; say which step
        raise WorkError(f"ONNX Runtime could not run this graph at {batch}x{seq} to read its shapes "
                        f"({type(exc).__name__}: {str(exc).splitlines()[0]})") from exc
    for out, value in zip(session.get_outputs(), values):
        shapes[out.name] = list(np.shape(value))
    return shapes


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def _attr(node, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            from onnx import helper

            return helper.get_attribute_value(a)
    return default


def _node_macs(node, shapes: dict[str, list[int]], dequantized: frozenset = frozenset()) -> list[tuple[str, int]]:
    """[(precision, multiply-adds)] of one node; [] for ops that do no matrix arithmetic.
    ``dequantized``: tensors a DequantizeLinear produced (a static QDQ graph's MatMul whose inputs
    both are runs as an INT8 QLinearMatMul once ONNX Runtime fuses the Q/DQ pairs)."""
    op = node.op_type
    out = shapes.get(node.output[0]) if node.output else None
    if op in FP32_MATMULS or op in INT8_MATMULS:
        if op == "QLinearMatMul":
            a, b = shapes.get(node.input[0]), shapes.get(node.input[3])
        elif op == "QGemm":
            a, b = shapes.get(node.input[0]), shapes.get(node.input[3])
        else:
            a, b = shapes.get(node.input[0]), shapes.get(node.input[1])
        if out is None or a is None:
            raise WorkError(f"no shape for {op} node {node.name!r}")
        if op in ("Gemm", "QGemm"):
            k = a[0] if _attr(node, "transA", 0) else a[-1]
        else:
            k = a[-1]
        qdq = op in FP32_MATMULS and len(node.input) >= 2 and node.input[0] in dequantized and node.input[1] in dequantized
        precision = "int8" if op in INT8_MATMULS or qdq else "fp32"
        del b
        return [(precision, _prod(out) * int(k))]
    if op in ATTENTION_OPS:
        x, w = shapes.get(node.input[0]), shapes.get(node.input[1])
        if x is None or w is None:
            raise WorkError(f"no shape for {op} node {node.name!r}")
        heads = int(_attr(node, "num_heads", 1))
        batch, seq, hidden = int(x[0]), int(x[1]), int(x[2])
        qkv = int(w[-1])
        head = qkv // 3 // heads
        projection = batch * seq * hidden * qkv
        products = 2 * batch * heads * seq * seq * head  # Q·Kᵀ and softmax·V
        return [(ATTENTION_OPS[op], projection), ("fp32", products)]
    if op == "MatMulNBits":
        a = shapes.get(node.input[0])
        k, n = int(_attr(node, "K")), int(_attr(node, "N"))
        if a is None:
            raise WorkError(f"no shape for MatMulNBits node {node.name!r}")
        level = int(_attr(node, "accuracy_level", 0) or 0)
        return [("int8" if level == 4 else "fp32", _prod(a[:-1]) * k * n)]
    return []


def graph_work(model: Union["onnx.ModelProto", str, os.PathLike], batch: int, seq: int) -> GraphWork:
    """The multiply-adds of ``model`` (a path or a loaded graph) for ``batch`` sequences of ``seq``
    tokens, by op type and precision."""
    if batch < 1 or seq < 1:
        raise WorkError(f"batch and sequence must be at least 1, got {batch}x{seq}")
    loaded = _load(model)
    shapes = _shapes(loaded, batch, seq)
    by_op: dict[str, dict[str, int]] = defaultdict(lambda: {"fp32": 0, "int8": 0})
    dequantized = frozenset(n.output[0] for n in loaded.graph.node if n.op_type == "DequantizeLinear")
    for node in loaded.graph.node:
        for precision, macs in _node_macs(node, shapes, dequantized):
            by_op[node.op_type][precision] += macs
    fp32 = sum(v["fp32"] for v in by_op.values())
    int8 = sum(v["int8"] for v in by_op.values())
    return GraphWork(batch=batch, seq=seq, fp32_macs=fp32, int8_macs=int8, by_op={k: dict(v) for k, v in by_op.items()})


def floor_for(work: GraphWork, profile: "MachineProfile", qdq: Optional[bool] = None) -> Floor:
    """The floor of ``work`` on the machine of ``profile``: INT8 work at the INT8 throughput (the
    QLinearMatMul figure for static QDQ graphs, ``qdq=True``) plus FP32 work at the FP32 throughput,
    each at the graph's token count."""
    tokens = work.tokens
    int8_kind = "qdq_int8" if qdq else "int8"
    seconds = 0.0
    if work.int8_macs:
        seconds += 2.0 * work.int8_macs / (profile.gops(int8_kind, tokens) * 1e9)
    if work.fp32_macs:
        seconds += 2.0 * work.fp32_macs / (profile.gops("fp32", tokens) * 1e9)
    return Floor(floor_ms=seconds * 1e3, fp32_macs=work.fp32_macs, int8_macs=work.int8_macs, tokens=tokens,
                 profile_key=profile.key)


def of_floor(measured_ms: float, floor_ms: float) -> float:
    """floor ÷ measured: the fraction of this machine's matrix-multiply speed the graph reaches (1.0: at the floor)."""
    if not measured_ms or measured_ms <= 0 or floor_ms is None:
        return float("nan")
    return floor_ms / measured_ms


def is_qdq(model: Union["onnx.ModelProto", str, os.PathLike]) -> bool:
    """Whether the graph is static QDQ (QuantizeLinear/DequantizeLinear pairs ONNX Runtime fuses into QLinear ops)."""
    loaded = _load(model)
    return any(n.op_type == "QuantizeLinear" for n in loaded.graph.node)
