"""Missing fusions: what the BERT fusions should produce for a graph, and why one fell short.

For L layers: 1 EmbedLayerNormalization, L Attention, 2L SkipLayerNormalization and, with a GELU, L
BiasGelu/FastGelu. A missing one's cause is read off the exported graph.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..models.architectures import ARCHITECTURES
from .provenance import GraphIndex

ATTENTION_OPS = ("Attention", "MultiHeadAttention")
# Each expected fusion's family of fused operators, as ONNX Runtime names them.
FAMILY_OPS = {"Attention": ATTENTION_OPS,
              "SkipLayerNormalization": ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization"),
              "BiasGelu/FastGelu": ("BiasGelu", "FastGelu", "Gelu", "BiasFastGelu", "GemmFastGelu", "QuickGelu")}


@dataclass(frozen=True)
class Diagnosis:
    """An expected fusion that did not happen: what was found, why, and what to do."""

    fusion: str
    expected: int
    found: int
    cause: str
    fix: str
    evidence: str = ""

    @property
    def text(self) -> str:
        return f"{self.fusion}: expected {self.expected}, found {self.found}. Cause: {self.cause} Fix: {self.fix}"


def _scores_matmul(g: GraphIndex, softmax):
    """The MatMul of Q and K that feeds ``softmax`` (through the scale and the mask Add), or None."""
    node, hops = g.producer.get(softmax.input[0]), 0
    while node is not None and node.op_type != "MatMul" and hops < 4:
        node, hops = g.producer.get(node.input[0]), hops + 1
    return node if node is not None and node.op_type == "MatMul" else None


def _attention_style(model) -> str:
    """'sdpa' when Q and K are each scaled by a Mul before the scores MatMul (torch 2.6 by a Sqrt, later by a
    folded constant), 'eager' when scaled after it (Div or Mul), 'none' without Softmax, else 'unknown'."""
    g = model if isinstance(model, GraphIndex) else GraphIndex(model)
    softmaxes = [n for n in g.nodes if n.op_type == "Softmax"]
    if not softmaxes:
        return "none"
    styles = set()
    for sm in softmaxes:
        node = _scores_matmul(g, sm)
        if node is None:
            styles.add("unknown")
            continue
        feeders = [g.producer.get(t) for t in node.input]
        scaled = [f for f in feeders if f is not None and f.op_type == "Mul"]
        by_sqrt = any((p := g.producer.get(t)) is not None and p.op_type == "Sqrt" for f in scaled for t in f.input)
        styles.add("sdpa" if by_sqrt or len(scaled) == 2 else "eager")
    return styles.pop() if len(styles) == 1 else "unknown"


def _constant_values(g: GraphIndex, tensor: str) -> list[int]:
    """The integer values of a constant tensor (or a Concat of constants); [] when any part is computed."""
    from onnx import numpy_helper

    node = g.producer.get(tensor)
    if node is None:
        init = next((i for i in g.model.graph.initializer if i.name == tensor), None)
        return [int(v) for v in numpy_helper.to_array(init).reshape(-1)] if init is not None and not init.external_data else []
    if node.op_type == "Constant":
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        return [int(v) for v in numpy_helper.to_array(value).reshape(-1)] if value is not None else []
    if node.op_type == "Concat":
        parts = [_constant_values(g, t) for t in node.input]
        return [v for p in parts for v in p] if all(parts) else []
    return []


def _concat_tail(g: GraphIndex, tensor: str) -> list[int]:
    """The last two entries of a Reshape's target shape (heads, head size) when constant, else []."""
    whole = _constant_values(g, tensor)
    if len(whole) >= 2:
        return whole[-2:]
    node = g.producer.get(tensor)
    if node is not None and node.op_type == "Concat" and len(node.input) >= 2:
        tail = [_constant_values(g, t) for t in node.input[-2:]]
        if all(len(t) == 1 for t in tail):
            return [tail[0][0], tail[1][0]]
    return []


def _first_block(model) -> tuple[GraphIndex, Optional[Any], Optional[Any]]:
    """(the graph indexed, its first Softmax, the Reshape that brings Q or K into that attention block's scores)."""
    g = model if isinstance(model, GraphIndex) else GraphIndex(model)
    softmax = next((n for n in g.nodes if n.op_type == "Softmax"), None)
    scores = _scores_matmul(g, softmax) if softmax is not None else None
    if scores is None:
        return g, softmax, None
    node, hops = g.producer.get(scores.input[0]), 0
    while node is not None and node.op_type != "Reshape" and hops < 4:
        node, hops = g.producer.get(node.input[0]), hops + 1
    return g, softmax, node if node is not None and node.op_type == "Reshape" else None


def attention_shape(model) -> tuple[int, int]:
    """``(num_heads, hidden_size)`` of the first attention block, else ``(0, 0)``. transformers 5 reshapes Q to
    ``(-1, head_size)``; the optimizer finds no Attention in such a graph unless told both numbers."""
    g, _, node = _first_block(model)
    if node is None:
        return 0, 0
    tail = _concat_tail(g, node.input[1])
    if len(tail) != 2 or tail[1] <= 0:
        return 0, 0
    heads, head_size = tail
    width, proj, hops = 0, g.producer.get(node.input[0]), 0
    while proj is not None and proj.op_type != "MatMul" and hops < 3:  # back through the bias Add
        computed = [g.producer[t] for t in proj.input if t in g.producer
                    and g.producer[t].op_type not in ("Identity", "Constant")]  # a weight may come through an Identity
        proj, hops = (computed[0] if computed else None), hops + 1
    if proj is not None and proj.op_type == "MatMul":
        weight = next((i for i in g.model.graph.initializer if i.name in proj.input), None)
        if weight is not None and len(weight.dims) == 2:
            width = int(weight.dims[1])
    if heads <= 0:
        heads = width // head_size if width and width % head_size == 0 else 0
    if heads <= 0:
        return 0, 0
    return heads, width or heads * head_size


def transformers5_attention(model) -> list[str]:
    """Which of transformers 5's eager-attention forms the first attention block has: Q, K, V reshaped to
    ``(batch, seq, -1, head_size)``, and the padding mask added from a Where (transformers 4: Sub, Mul)."""
    g, softmax, node = _first_block(model)
    if softmax is None or _scores_matmul(g, softmax) is None:
        return []
    found = []
    if node is not None and (tail := _concat_tail(g, node.input[1])) and tail[0] == -1:
        found.append("its Q, K and V reshapes carry no head count (-1)")
    add = g.producer.get(softmax.input[0])
    if add is not None and add.op_type == "Add":
        feeders = [g.producer.get(t) for t in add.input]
        if any(f is not None and f.op_type == "Where" for f in feeders):
            found.append("its padding mask reaches the scores through a Where")
    return found


def optimizer_reads_transformers5() -> bool:
    """Whether the installed ONNX Runtime's attention fusion matches transformers 5's eager attention (1.32's
    does, 1.19.2's does not); read off the fusion's own pattern list, so any version answers for itself."""
    import inspect

    try:
        from onnxruntime.transformers.fusion_attention import FusionAttention
    except ImportError:
        return False
    source = inspect.getsource(FusionAttention)
    return '"And", "Reshape", "Reshape", "Gather", "Flatten"' in source


def exported_by(model) -> str:
    """Which torch exporter wrote the graph, by node names: ``"torchscript"`` module paths
    (``/bert/encoder/layer.0/...``), ``"dynamo"`` (default from torch 2.9) ``node_<op>_<n>``; else ``"unknown"``."""
    nodes = model.nodes if isinstance(model, GraphIndex) else model.graph.node
    names = [n.name for n in nodes]
    if not names:
        return "unknown"
    if any(n.startswith("/") for n in names):
        return "torchscript"
    if sum(n.startswith("node_") for n in names) * 2 > len(names):
        return "dynamo"
    return "unknown"


DYNAMO_ATTENTION_CAUSE = (
    "the graph was written by torch's dynamo exporter (torch.export, the default of torch.onnx.export from torch 2.9): "
    "its attention subgraph is not the one ONNX Runtime's BERT attention fusion was written for (the TorchScript "
    "export's): the padding mask reaches the scores through GatherND and a single Where instead of the TorchScript "
    "graph's Expand and Where pair, and the fusion's pattern matcher finds no attention block in it. The logits are "
    "the same; only the fusion is lost (and with it EmbedLayerNormalization, which needs a fused Attention).")
DYNAMO_ATTENTION_FIX = (
    "re-export with the TorchScript exporter while torch ships it: run_export(model, ExportConfig(exporter='torchscript'), "
    "...) or `workbench export --exporter torchscript` (the default, auto, picks it); the training stack's torch 2.6 "
    "exports with it always.")


def _transformers5_cause(found: list[str]) -> tuple[str, str]:
    """(cause, fix) for an Attention fusion that an older optimizer missed in a graph from transformers 5."""
    import onnxruntime

    cause = ("the graph was exported from transformers 5 (eager attention): " + " and ".join(found) + "; the BERT "
             f"attention fusion of onnxruntime {onnxruntime.__version__} matches neither (onnxruntime 1.32's, on the current "
             "stack, matches both). The logits are the same; only the fusion is lost.")
    fix = ("fuse the graph on the current stack: `make setup-current`, then .venv-current/bin/workbench fuse "
           "(or export the model with this stack's transformers, whose graph this runtime fuses).")
    return cause, fix


def expected_fusions(model, num_layers: int) -> dict[str, int]:
    """What the BERT fusions should produce for a graph with ``num_layers`` attention layers."""
    ops = Counter(n.op_type for n in model.graph.node)
    expected = {"EmbedLayerNormalization": 1, "Attention": num_layers, "SkipLayerNormalization": 2 * num_layers}
    has_gelu = ops.get("Erf", 0) >= num_layers or ops.get("Gelu", 0) >= num_layers or \
        (ops.get("Tanh", 0) > num_layers and ops.get("Pow", 0) >= num_layers)
    if has_gelu:
        expected["BiasGelu/FastGelu"] = num_layers
    return expected


def _family_count(hist: dict[str, int], key: str) -> int:
    return sum(hist.get(o, 0) for o in FAMILY_OPS.get(key, (key,)))


# Why the BERT fusions cannot fire, per architecture: workbench.models.architectures (Architecture.fusion_limits).
ARCHITECTURE_LIMITS: dict[tuple[str, str], tuple[str, str]] = {
    (a.model_type, op): v for a in ARCHITECTURES.values() for op, v in a.fusion_limits.items()}


def diagnose(orig_model, fused_hist: dict[str, int], expected: dict[str, int], attn_implementation: str,
             input_names: Sequence[str], num_heads: int, hidden_size: int, architecture: str = "") -> list[Diagnosis]:
    """A :class:`Diagnosis` for every expected fusion that fell short; causes a re-export fixes come before
    the architecture's own limits (``architecture``: ``config.model_type``, :data:`ARCHITECTURE_LIMITS`)."""
    ops = Counter(n.op_type for n in orig_model.graph.node)
    style = _attention_style(orig_model)
    sdpa = attn_implementation == "sdpa" or style == "sdpa"
    exporter = exported_by(orig_model)
    dynamo = exporter == "dynamo"
    reexport = ("re-export with eager attention: run_export(model, ExportConfig(attn_implementation='eager'), ...) "
                "or `workbench export --attn eager`; load models with load_model(..., attn_implementation='eager')")
    out = []
    attention_short = _family_count(fused_hist, "Attention") < expected.get("Attention", 0)
    for key, want in expected.items():
        got = _family_count(fused_hist, key)
        if got >= want:
            continue
        evidence = (f"exported graph: {ops.get('Softmax', 0)} Softmax, {ops.get('Sqrt', 0)} Sqrt, "
                    f"{ops.get('LayerNormalization', 0)} LayerNormalization, {ops.get('Erf', 0)} Erf; "
                    f"attention pattern: {style}; recorded attention: {attn_implementation or 'unknown'}; "
                    f"exporter: {exporter}")
        limit = ARCHITECTURE_LIMITS.get((architecture, key))
        if limit is not None and not ((sdpa or dynamo) and key in ("Attention", "EmbedLayerNormalization")):
            cause, fix = limit
        elif key == "Attention":
            if dynamo:
                cause, fix = DYNAMO_ATTENTION_CAUSE, DYNAMO_ATTENTION_FIX
            elif sdpa:
                cause = ("the graph was exported with SDPA attention (torch scaled_dot_product_attention): the "
                         "exporter scales Q and K each (by the square root of the scale) before the MatMul and builds "
                         "the mask with Where, a pattern ONNX Runtime's BERT attention fusion does not match.")
                fix = reexport + "."
            elif (v5 := transformers5_attention(orig_model)) and not optimizer_reads_transformers5():
                cause, fix = _transformers5_cause(v5)
            elif style == "none":
                cause = "the graph has no Softmax, so there is no self-attention to fuse."
                fix = "nothing to fix if the model has no attention; otherwise check that the right graph was given."
            elif num_heads and hidden_size and hidden_size % num_heads:
                cause = f"hidden_size {hidden_size} is not a multiple of num_heads {num_heads}, so the fusion rejected the shapes."
                fix = "pass the model's real num_heads and hidden_size (FusionConfig(num_heads=..., hidden_size=...))."
            else:
                cause = ("the attention subgraph did not match the BERT pattern the optimizer knows "
                         "(MatMul -> Div or Mul -> Add mask -> Softmax -> MatMul with Q/K/V MatMul+Add and Reshape/Transpose).")
                fix = ("pass num_heads and hidden_size explicitly (FusionConfig(num_heads=..., hidden_size=...)), "
                       "export at opset 17 with eager attention, and check the model type is BERT-like.")
        elif key == "EmbedLayerNormalization":
            if attention_short:
                cause = ("the embedding fusion only fires when the embedding LayerNormalization feeds a fused "
                         "Attention node, and Attention was not fused.")
                fix = ("fix the Attention fusion first" + (f": {DYNAMO_ATTENTION_FIX}" if dynamo else
                                                           f": {reexport}." if sdpa else " (see its diagnosis)."))
            elif "token_type_ids" not in input_names:
                cause = ("the graph has no token_type_ids input and its word + position embedding sum did not match a "
                         "form the optimizer knows (BERT's or DistilBERT's position ids fuse without token types; "
                         "RoBERTa-style ids counted from the padding id do not in onnxruntime 1.19.2).")
                fix = "expected for RoBERTa-style models; nothing to fix (the LayerNormalization still runs)."
            else:
                cause = "the embedding sum (word, position and segment Gathers + Add + LayerNormalization) did not match the pattern."
                fix = "export at opset 17 with position ids computed inside the graph (the default Hugging Face export)."
        elif key == "SkipLayerNormalization":
            if ops.get("LayerNormalization", 0) == 0 and ops.get("ReduceMean", 0) == 0:
                cause = "the graph has no LayerNormalization (nor its ReduceMean pattern)."
                fix = "nothing to fix if the architecture uses no layer norm."
            else:
                cause = ("residual Add + LayerNormalization pairs did not match (an op between them, or a LayerNormalization "
                         "the optimizer could not fuse first).")
                fix = "export at opset 17 (LayerNormalization as one op) and keep opt_level 1 or higher."
        else:
            cause = "the GELU pattern (Div by sqrt 2, Erf, Add 1, Mul, Mul 0.5 after the bias Add) did not match."
            fix = "export at opset 17; approximate GELU (gelu_new) fuses as FastGelu, which is counted here too."
        out.append(Diagnosis(key, int(want), int(got), cause, fix, evidence))
    # Attention first: a missing Attention fusion also blocks the embedding fusion.
    priority = {"Attention": 0, "EmbedLayerNormalization": 1, "SkipLayerNormalization": 2}
    return sorted(out, key=lambda d: priority.get(d.fusion, 3))
