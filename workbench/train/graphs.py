"""The training graphs ORTModule built (saved with ``TrainConfig.save_graphs``), one ONNX file per stage
of its graph building, summarised: nodes, op types, fused kernels and what changed from the stage before."""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class GraphStage:
    """One graph ORTModule built for the training step, and what changed from the stage before."""

    name: str  # torch_exported | post_processed | optimized_pre_grad | optimized | execution_model
    path: str
    nodes: int
    op_counts: dict[str, int]
    fused_op_counts: dict[str, int]  # ops that stand for several of the exported ops (FusedMatMul, ...)
    added_ops: dict[str, int]  # op types whose count went up from the previous stage (by how much)
    removed_ops: dict[str, int]  # op types whose count went down


@dataclass(frozen=True)
class TrainGraphs:
    folder: str
    stages: list[GraphStage]


GRAPH_STAGES = ("torch_exported", "post_processed", "optimized_pre_grad", "optimized", "execution_model")
# Kernels that stand for a pattern of several exported ops (forward and gradient).
FUSED_OP_TYPES = frozenset({
    "FusedMatMul", "FusedGemm", "FusedConv", "Gemm", "LayerNormalization", "SimplifiedLayerNormalization",
    "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "EmbedLayerNormalization", "BiasGelu",
    "FastGelu", "Gelu", "QuickGelu", "BiasDropout", "BitmaskDropout", "BitmaskBiasDropout", "BiasSoftmax",
    "BiasSoftmaxDropout", "Attention", "MultiHeadAttention", "MatMulScaleTranspose",
    "SoftmaxCrossEntropyLossInternal", "SoftmaxCrossEntropyLossInternalGrad", "LayerNormalizationGrad",
    "SimplifiedLayerNormalizationGrad", "InvertibleLayerNormalizationGrad", "GeluGrad", "FastGeluGrad",
    "BiasGeluGrad_dX", "BiasFastGeluGrad_dX", "BitmaskDropoutGrad", "SoftmaxGrad_13", "ReduceAllL2",
    "ConcatTraining", "PadAndUnflatten", "FlattenAndUnpad", "ScaledSum", "BatchScale", "MemcpyFromHost",
})


def summarize_graph(path: str | os.PathLike, name: str, previous: Optional[GraphStage] = None) -> GraphStage:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    counts: dict[str, int] = {}

    def walk(graph):
        for node in graph.node:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)

    walk(model.graph)
    fused = {k: v for k, v in counts.items() if k in FUSED_OP_TYPES}
    before = previous.op_counts if previous else {}
    added = {k: v - before.get(k, 0) for k, v in counts.items() if v > before.get(k, 0)} if previous else {}
    removed = {k: v - counts.get(k, 0) for k, v in before.items() if v > counts.get(k, 0)} if previous else {}
    return GraphStage(name, str(path), sum(counts.values()), dict(sorted(counts.items())), dict(sorted(fused.items())),
                      dict(sorted(added.items())), dict(sorted(removed.items())))


def finalise_graphs(tmp: Path, final: Path) -> Optional[TrainGraphs]:
    """Summarise the graphs in ``tmp`` and rename the folder to ``final``. They hold no weights (parameters are
    graph inputs): about 1 MB for MiniLM, kept whole."""
    found = [(stage, files[0]) for stage in GRAPH_STAGES if (files := sorted(tmp.glob(f"*_{stage}_training.onnx")))]
    if not found:
        return None
    stages: list[GraphStage] = []
    for stage, path in found:
        stages.append(summarize_graph(path, stage, stages[-1] if stages else None))
    old = final.with_name(f".{final.name}.{os.getpid()}.old")
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    stages = [dataclasses.replace(s, path=str(final / Path(s.path).name)) for s in stages]
    return TrainGraphs(str(final), stages)
