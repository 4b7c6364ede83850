"""What was fused into what: the exported nodes each new node of an optimized graph replaced.

:func:`provenance` walks back from a new node's outputs through the removed producers to a tensor the
optimized graph still computes. A fusion output with a new name (``EmbedLayerNormalization_0_output``) is
matched by value: both graphs run once on the same batch. Removed nodes reached from two fused nodes (the
attention-mask preparation, shared by every layer) are listed under each and flagged as shared.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from .facts import load_graph

# New nodes that only convert or rename (the optimizer casts input ids to int32): not fusions.
BOOKKEEPING_OPS = ("Cast", "Identity")


@dataclass(frozen=True)
class OriginalNode:
    name: str
    op_type: str
    inputs: list[str]
    outputs: list[str]


@dataclass(frozen=True)
class FusedNode:
    """One new node of an optimized graph and the exported nodes it replaced."""

    name: str
    op_type: str
    inputs: list[str]
    outputs: list[str]
    replaced: list[OriginalNode]
    boundary_inputs: list[str]  # exported tensors where the replaced subgraph begins (weights left out)
    shared: list[str] = field(default_factory=list)  # replaced nodes also attributed to another fused node
    matched_by_value: dict[str, str] = field(default_factory=dict)  # new output name -> exported tensor

    @property
    def replaced_ops(self) -> dict[str, int]:
        return dict(Counter(n.op_type for n in self.replaced).most_common())

    @property
    def label(self) -> str:
        return self.name or f"{self.op_type} (unnamed)"


class GraphIndex:
    """Index of a parsed ONNX graph; ``path`` loads external weights when it runs for the value match."""

    def __init__(self, model, path: Optional[Union[str, os.PathLike]] = None):
        self.model = model
        self.path = Path(path) if path is not None else None
        g = model.graph
        self.nodes = list(g.node)
        self.inputs = {i.name for i in g.input}
        self.initializers = {i.name for i in g.initializer}
        self.producer: dict[str, Any] = {}
        self.order: dict[str, int] = {}
        for idx, n in enumerate(self.nodes):
            for o in n.output:
                if o:
                    self.producer[o] = n
                    self.order[o] = idx
        self.keys = {(n.name, n.op_type) for n in self.nodes if n.name}
        self.tensors = set(self.producer) | self.inputs | self.initializers


GraphLike = Union[GraphIndex, Any, str, os.PathLike]  # an index, a ModelProto or a path


def index_graph(graph: GraphLike) -> GraphIndex:
    """``graph`` indexed: an index as given, a ``ModelProto`` indexed, a path parsed then indexed."""
    if isinstance(graph, GraphIndex):
        return graph
    if isinstance(graph, (str, os.PathLike)):
        return GraphIndex(load_graph(graph), graph)
    return GraphIndex(graph)


def _run_with_outputs(g: GraphIndex, names: list[str], batch) -> dict[str, np.ndarray]:
    """Run ``g`` once, unoptimized, with ``names`` added as outputs; on a copy, so others' parsed model stays."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_model

    from ..runtime.ortinfer import make_feed, make_session

    model = onnx.ModelProto()
    model.CopyFrom(g.model)
    if g.path is not None:
        load_external_data_for_model(model, str(g.path.parent))  # no-op unless weights live beside the file
    present = {o.name for o in model.graph.output}
    for name in names:
        if name not in present:
            model.graph.output.append(onnx.ValueInfoProto(name=name))
    sess = make_session(model.SerializeToString(), graph_optimization="disabled")
    outs = sess.run(names, make_feed(sess, batch))
    return dict(zip(names, outs))


def _match_by_value(orig: GraphIndex, opt: GraphIndex, wanted: list[str], vocab_size: int) -> dict[str, str]:
    """New tensor names of the optimized graph mapped to the exported tensors that hold the same values."""
    from ..runtime.ortinfer import synthetic_batch

    if not wanted:
        return {}
    batch = synthetic_batch(2, 11, vocab_size)
    removed_outputs = [t for n in orig.nodes if (n.name, n.op_type) not in opt.keys for t in n.output if t]
    got = _run_with_outputs(opt, wanted, batch)
    ref = _run_with_outputs(orig, removed_outputs, batch)
    mapping = {}
    ref = {k: v for k, v in ref.items() if v is not None}  # an optional output no node computes (a Dropout's mask)
    for name, value in got.items():
        if value is None or value.dtype.kind != "f" or value.size < 2 or float(np.std(value)) == 0.0:
            continue
        best = None
        for cand, cval in ref.items():
            if cval.shape != value.shape or cval.dtype.kind != "f":
                continue
            scale = 1.0 + float(np.abs(cval).max())
            if float(np.abs(cval - value).max()) <= 1e-4 * scale:
                if best is None or orig.order[cand] > orig.order[best]:
                    best = cand  # the last equal tensor: where the replaced computation ends
        if best is not None:
            mapping[name] = best
    return mapping


def provenance(orig: GraphLike, opt: GraphLike, match_by_value: bool = True, vocab_size: int = 1000) -> list[FusedNode]:
    """Fused nodes of ``opt`` and the nodes of ``orig`` each replaced; each a :class:`GraphIndex`, a ``ModelProto`` or a path."""
    orig, opt = index_graph(orig), index_graph(opt)
    new_nodes = [n for n in opt.nodes if (n.name, n.op_type) not in orig.keys]
    renamed = [o for n in new_nodes for o in n.output if o and o not in orig.tensors]
    by_value: dict[str, str] = {}
    if match_by_value and renamed:
        by_value = _match_by_value(orig, opt, renamed, vocab_size)
    # Exported tensors the optimized graph still computes (under the same or a matched name).
    surviving = (opt.tensors & orig.tensors) | set(by_value.values())

    claims: dict[str, list[str]] = defaultdict(list)
    found = []
    for idx, node in enumerate(new_nodes):
        anchors = [by_value.get(o, o) for o in node.output if o]
        anchors = [a for a in anchors if a in orig.producer]
        replaced, boundary, seen = [], [], set()
        stack = [orig.producer[a] for a in anchors]
        while stack:
            n = stack.pop()
            key = (n.name, n.op_type)
            if id(n) in seen or key in opt.keys:
                continue
            seen.add(id(n))
            replaced.append(n)
            for t in n.input:
                if not t or t in orig.initializers:
                    continue
                if t in surviving or t in orig.inputs or t not in orig.producer:  # where the replaced subgraph begins
                    if t not in boundary:
                        boundary.append(t)
                    continue
                stack.append(orig.producer[t])
        replaced.sort(key=lambda n: orig.order[n.output[0]] if n.output and n.output[0] in orig.order else 0)
        key = node.name or f"#{idx}"
        for r in replaced:
            claims[r.name].append(key)
        found.append((key, node, replaced, boundary))

    out = []
    for key, node, replaced, boundary in found:
        if not replaced and node.op_type in BOOKKEEPING_OPS:
            continue
        shared = [r.name for r in replaced if len(claims[r.name]) > 1]
        out.append(FusedNode(
            name=node.name, op_type=node.op_type, inputs=list(node.input), outputs=list(node.output),
            replaced=[OriginalNode(r.name, r.op_type, list(r.input), list(r.output)) for r in replaced],
            boundary_inputs=boundary, shared=shared,
            matched_by_value={o: by_value[o] for o in node.output if o in by_value},
        ))
    return out


def graph_diff(orig: GraphIndex, opt: GraphIndex) -> tuple[int, int, dict[str, int], dict[str, int]]:
    """(nodes removed, nodes added, removed by op, added by op) going from ``orig`` to ``opt`` (nothing for the same graph)."""
    if orig.model is opt.model:
        return 0, 0, {}, {}
    removed = Counter(n.op_type for n in orig.nodes if (n.name, n.op_type) not in opt.keys or not n.name)
    added = Counter(n.op_type for n in opt.nodes if (n.name, n.op_type) not in orig.keys or not n.name)
    return (sum(removed.values()), sum(added.values()),
            dict(removed.most_common()), dict(added.most_common()))


def fused_counts(nodes: list[FusedNode]) -> dict[str, int]:
    """Fused operators by type, most frequent first (nodes that replaced nothing, and conversions, left out)."""
    counts = Counter(f.op_type for f in nodes if f.replaced and f.op_type not in BOOKKEEPING_OPS)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
