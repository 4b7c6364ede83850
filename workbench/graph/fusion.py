"""What ONNX Runtime did to the graph, whether it still computes the same thing, and what it bought.

``run_fusion(export_result_or_onnx_path, FusionConfig(...), out_dir) -> FusionReport`` builds
each *variant* of the exported graph and measures it the same way:

==============  ===============================================  ===============================
variant         graph                                            session level when it runs
==============  ===============================================  ===============================
unoptimized     the exported graph                               ``disabled``
ort_basic       ONNX Runtime's basic level (constant folding,    ``basic``
                redundant-node removal), saved to a file
ort_extended    + ONNX Runtime's fusions (FusedMatMul, BiasGelu) ``extended``
ort_all         + layout optimizations                           ``all``
transformer     ``onnxruntime.transformers.optimizer`` (the      ``cfg.transformer_session``
                BERT fusions: EmbedLayerNormalization,           (``all`` by default: what a
                Attention, SkipLayerNormalization, BiasGelu)     deployment gets)
==============  ===============================================  ===============================

For each variant: the graph file, its operator histogram and node count, size on disk,
validation against PyTorch's logits on real examples (the reference saved at export, see
:mod:`workbench.graph.export`), latency by shape, the nodes removed and added, and the
**provenance** of every fused node: the original nodes it replaced, i.e. the subgraph of the
exported graph between the fused node's inputs and its outputs.

How provenance is found. A node of the optimized graph is *new* when the exported graph has no
node of that name and type; the exported nodes that are gone were *removed*. Starting from a
new node's outputs (tensor names the two graphs share), walk back through the removed producers
until reaching a tensor the optimized graph still computes. Some fusions give their output a new
name (``EmbedLayerNormalization_0_output``); those are matched by value: both graphs run once on
the same batch and the new tensor is identified with the exported tensor that holds the same
numbers. Removed nodes reached from two fused nodes (the attention-mask preparation, shared by
every layer) are listed under each and flagged as shared.

When an expected fusion is missing (for a BERT-like model with L layers: 1
EmbedLayerNormalization, L Attention, 2L SkipLayerNormalization, L BiasGelu/FastGelu), a
:class:`Diagnosis` says what was found, the likely cause (SDPA attention export, no GELU, ...) and
the fix. The transformer-optimized graph is :attr:`FusionReport.fused_path`: what quantization
starts from (quantizing it needs ``extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT}``
in onnxruntime 1.19.2: the contrib ops carry no type information for some weights).

Timing: PyTorch is timed first, before any ONNX Runtime session exists (a live session's
spinning threads slow down whatever runs next on a small machine), then each variant, all with
the same synthetic batches and ``cfg.threads``. Figures vary from run to run with the load on
the machine; compare ratios measured in one report.
"""

from __future__ import annotations

import enum
import os
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np

from .. import runs
from .export import ExportConfig, ExportResult, Validation, file_size_mib, load_export, op_histogram
from ..device import PlacementReport
from ..metrics import Metric
from ..ortinfer import GRAPH_OPTIMIZATION_LEVELS, ShapeLatency, check_shapes

RESULT_FILE = "fusion.json"
FUSED_FILE = "model_fused.onnx"
FUSED_FP16_FILE = "model_fused_fp16.onnx"

# Families of fused operators, as ONNX Runtime names them.
GELU_OPS = ("BiasGelu", "FastGelu", "Gelu", "BiasFastGelu", "GemmFastGelu", "QuickGelu")
ATTENTION_OPS = ("Attention", "MultiHeadAttention")
SKIP_LN_OPS = ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization")
# New nodes that only convert or rename (the optimizer casts input ids to int32): not fusions.
BOOKKEEPING_OPS = ("Cast", "Identity")
OPTIMIZER_MODEL_TYPES = ("bert", "bart", "gpt2", "t5", "unet", "vae", "clip")
# The optimizer's ``model_type`` for each encoder architecture ("auto" picks it from the export).
# onnxruntime 1.19.2's optimizer.MODEL_TYPES has no entry for RoBERTa, DistilBERT, XLM-RoBERTa,
# ELECTRA, MPNet, DeBERTa-v2 or ModernBERT: its encoder fusions all live in BertOnnxModel
# ("bert"), which matches DistilBERT's and RoBERTa's attention and position patterns too (see
# fusion_embedlayer.py). The other types apply decoder or diffusion patterns. What "bert" fuses
# for each architecture is measured in the README's coverage matrix (tests/core/test_zoo.py).
ARCH_OPTIMIZER_TYPE = {arch: "bert" for arch in (
    "bert", "roberta", "distilbert", "xlm-roberta", "electra", "mpnet", "deberta-v2", "modernbert")}


def optimizer_model_type(architecture: str) -> str:
    """The transformer optimizer's ``model_type`` for a Hugging Face ``config.model_type``."""
    return ARCH_OPTIMIZER_TYPE.get(architecture, "bert")


class FusionError(RuntimeError):
    """A variant could not be built; the message names the variant and what to do."""


class Variant(str, enum.Enum):
    UNOPTIMIZED = "unoptimized"
    ORT_BASIC = "ort_basic"
    ORT_EXTENDED = "ort_extended"
    ORT_ALL = "ort_all"
    TRANSFORMER = "transformer"
    TRANSFORMER_FP16 = "transformer_fp16"  # the fused graph in float16 (FusionConfig.fp16; inputs/outputs kept float32)


# Session graph-optimization level each ONNX Runtime variant stands for.
ORT_LEVEL = {Variant.ORT_BASIC: "basic", Variant.ORT_EXTENDED: "extended", Variant.ORT_ALL: "all"}
# The FP32 variants; the FP16 one is built when FusionConfig.fp16 asks for it (it needs the transformer variant).
ALL_VARIANTS = tuple(v for v in Variant if v is not Variant.TRANSFORMER_FP16)


def _to_variant(v) -> Variant:
    try:
        return v if isinstance(v, Variant) else Variant(v)
    except ValueError:
        raise ValueError(
            f"unknown variant {v!r}; variants are {[x.value for x in Variant]} (e.g. "
            "FusionConfig(variants=('unoptimized', 'transformer')))"
        ) from None


@dataclass
class FusionConfig:
    """Which variants to build and how to time them.

    ``shapes`` are the ``(batch, sequence)`` shapes timed; ``threads`` the intra-op threads for
    both ONNX Runtime and PyTorch (None: each runtime's default). ``tolerance`` overrides the
    export's validation tolerance (fused kernels reorder float sums: about 1e-5 on MiniLM).
    ``num_heads``/``hidden_size`` (0: taken from the export, else detected by the optimizer)
    and ``model_type``/``opt_level`` are passed to ``onnxruntime.transformers.optimizer``;
    ``model_type="auto"`` picks the optimizer's type for the exported architecture
    (:data:`ARCH_OPTIMIZER_TYPE`: "bert" for every supported encoder).
    """

    variants: tuple[Variant, ...] = ALL_VARIANTS
    shapes: tuple[tuple[int, int], ...] = ((1, 32), (1, 128), (8, 128))
    warmup: int = 3
    repeats: int = 20
    max_seconds_per_shape: Optional[float] = 20.0
    threads: Optional[int] = None
    measure_latency: bool = True
    time_pytorch: bool = True
    transformer_session: str = "all"
    model_type: str = "auto"
    opt_level: int = 1
    num_heads: int = 0
    hidden_size: int = 0
    tolerance: Optional[float] = None
    validation_examples: Optional[int] = None
    match_by_value: bool = True
    device: str = "cpu"
    fp16: bool = False
    cuda_graph: bool = False
    time_pytorch_peers: bool = True

    def __post_init__(self) -> None:
        from ..device import normalize_device

        self.device = normalize_device(self.device)
        if self.cuda_graph and self.device == "cpu":
            raise ValueError("cuda_graph=True needs device='cuda' (CUDA graphs are a CUDA-provider feature); "
                             "use FusionConfig.gpu() on a machine with a GPU")
        self.variants = tuple(_to_variant(v) for v in self.variants)
        if self.fp16 or Variant.TRANSFORMER_FP16 in self.variants:
            self.fp16 = True
            self.variants = (*self.variants, Variant.TRANSFORMER, Variant.TRANSFORMER_FP16)
        if not self.variants:
            raise ValueError("variants must name at least one variant, e.g. ('unoptimized', 'transformer')")
        if Variant.UNOPTIMIZED not in self.variants:
            self.variants = (Variant.UNOPTIMIZED, *self.variants)  # the baseline every diff is taken against
        self.variants = tuple(v for v in Variant if v in self.variants)
        self.shapes = check_shapes(self.shapes)
        if self.warmup < 0 or self.repeats < 1:
            raise ValueError(f"warmup must be >= 0 and repeats >= 1, got warmup={self.warmup}, repeats={self.repeats}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be a positive number or None, got {self.threads}")
        if self.transformer_session not in GRAPH_OPTIMIZATION_LEVELS:
            raise ValueError(
                f"transformer_session must be one of {list(GRAPH_OPTIMIZATION_LEVELS)}, got {self.transformer_session!r}; "
                "'all' is what a deployment runs, 'disabled' shows the optimizer's fusions alone"
            )
        if self.model_type != "auto" and self.model_type not in OPTIMIZER_MODEL_TYPES:
            raise ValueError(
                f"model_type must be one of {['auto', *OPTIMIZER_MODEL_TYPES]}, got {self.model_type!r}; "
                "'auto' (the default) picks 'bert', which covers BERT, RoBERTa, DistilBERT, MiniLM and the other encoders"
            )
        if self.opt_level not in (0, 1, 2, 99):
            raise ValueError(f"opt_level must be one of [0, 1, 2, 99], got {self.opt_level!r}; 1 is the default for BERT")
        if self.num_heads < 0 or self.hidden_size < 0:
            raise ValueError("num_heads and hidden_size must be >= 0 (0: detect)")
        if self.tolerance is not None and not self.tolerance > 0:
            raise ValueError(f"tolerance must be a positive number or None, got {self.tolerance}")
        if self.validation_examples is not None and self.validation_examples < 1:
            raise ValueError(f"validation_examples must be at least 1 or None, got {self.validation_examples}")

    @classmethod
    def default(cls, **kw) -> "FusionConfig":
        """Every variant, three shapes, 3 warm-up + 20 timed runs each."""
        return cls(**kw)

    @classmethod
    def quick(cls, **kw) -> "FusionConfig":
        """Every variant, two small shapes, 1 + 3 runs, one thread: tests and workshops."""
        return cls(**{"shapes": ((1, 16), (2, 32)), "warmup": 1, "repeats": 3, "threads": 1,
                      "max_seconds_per_shape": 5.0, **kw})

    @classmethod
    def gpu(cls, **kw) -> "FusionConfig":
        """The GPU comparison: exported, fused and fused FP16 graphs on CUDA with I/O binding, each
        also as a CUDA graph where ONNX Runtime accepts it, next to PyTorch eager, SDPA FP16 and
        torch.compile(mode="reduce-overhead") at batch 1 and 32, sequence 128."""
        return cls(**{"variants": (Variant.UNOPTIMIZED, Variant.TRANSFORMER, Variant.TRANSFORMER_FP16),
                      "shapes": ((1, 128), (32, 128)), "warmup": 10, "repeats": 100, "device": "cuda", "fp16": True,
                      "cuda_graph": True, **kw})

    @classmethod
    def inspect_only(cls, **kw) -> "FusionConfig":
        """Build, diff and validate every variant; time nothing."""
        return cls(**{"measure_latency": False, "time_pytorch": False, **kw})

    @classmethod
    def transformer_only(cls, **kw) -> "FusionConfig":
        """Just the transformer optimizer against the unoptimized graph (what quantization needs)."""
        return cls(**{"variants": (Variant.UNOPTIMIZED, Variant.TRANSFORMER), **kw})


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


@dataclass(frozen=True)
class VariantResult:
    name: Variant
    path: Path
    session_optimization: str
    node_count: int
    op_histogram: dict[str, int]
    fused_ops: dict[str, int]
    size_mib: float
    validation: Validation
    latency: list[ShapeLatency]
    nodes_removed: int
    nodes_added: int
    removed_by_op: dict[str, int]
    added_by_op: dict[str, int]
    provenance: list[FusedNode]
    build_seconds: float

    def median_ms(self, batch: int, seq: int) -> float:
        for s in self.latency:
            if (s.batch, s.seq) == (batch, seq):
                return s.stats.median_ms
        raise KeyError(f"shape ({batch}, {seq}) was not timed; timed: {[(s.batch, s.seq) for s in self.latency]}")

    def metrics(self) -> list[Metric]:
        """Size, node count and median latency per timed shape, with units and directions."""
        out = [Metric("size on disk", self.size_mib, "MiB", higher_is_better=False),
               Metric("nodes", float(self.node_count), "", higher_is_better=False)]
        out += [Metric(f"latency {s.batch}x{s.seq}", s.stats.median_ms, "ms", higher_is_better=False) for s in self.latency]
        return out + self.validation.metrics()

    def fused_node(self, name: str) -> FusedNode:
        for f in self.provenance:
            if f.name == name:
                return f
        raise KeyError(f"no fused node {name!r} in {self.name.value}; fused nodes: {[f.name for f in self.provenance][:20]}")


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


@dataclass(frozen=True)
class FusionReport:
    source_path: Path
    export_path: Optional[Path]
    attn_implementation: str
    num_layers: int
    variants: list[VariantResult]
    pytorch_latency: list[ShapeLatency]
    expected_fusions: dict[str, int]
    diagnoses: list[Diagnosis]
    fused_path: Optional[Path]
    shapes: list[tuple[int, int]]
    reference: str  # what the variants were validated against
    notes: list[str]
    config: FusionConfig = field(default_factory=FusionConfig)
    device: str = "cpu"
    # CUDA only: where each variant's nodes ran, Memcpy nodes, CUDA-graph capture (empty on the CPU)
    placement: dict[str, PlacementReport] = field(default_factory=dict)
    # CUDA graphs: latency of the variants ONNX Runtime captured (I/O binding, fixed shapes)
    cuda_graph_latency: dict[str, list[ShapeLatency]] = field(default_factory=dict)
    # PyTorch's GPU peers timed in the same run: sdpa_fp16, compile_fp16 (reduce-overhead: CUDA graphs)
    pytorch_peers: dict[str, list[ShapeLatency]] = field(default_factory=dict)

    def variant(self, name: Union[str, Variant]) -> VariantResult:
        key = _to_variant(name)
        for v in self.variants:
            if v.name == key:
                return v
        raise KeyError(f"variant {key.value!r} was not built; built: {[v.name.value for v in self.variants]}")

    @property
    def fused(self) -> VariantResult:
        """The transformer-optimized variant (what quantization consumes)."""
        return self.variant(Variant.TRANSFORMER)

    @property
    def fused_op_counts(self) -> dict[str, int]:
        return dict(self.fused.fused_ops)

    @property
    def all_passed(self) -> bool:
        return all(v.validation.passed for v in self.variants)

    def speedups(self, baseline: str = "pytorch") -> dict[str, dict[str, float]]:
        """``{variant: {"BxS": baseline_ms / variant_ms}}`` for every timed shape (>1 is faster).

        ``baseline`` is ``"pytorch"`` (eager) or a variant name."""
        if baseline == "pytorch":
            base = {(s.batch, s.seq): s.stats.median_ms for s in self.pytorch_latency}
        else:
            base = {(s.batch, s.seq): s.stats.median_ms for s in self.variant(baseline).latency}
        if not base:
            raise ValueError(f"no timings for the baseline {baseline!r}: run with measure_latency/time_pytorch on")
        out = {}
        for v in self.variants:
            out[v.name.value] = {f"{s.batch}x{s.seq}": base[(s.batch, s.seq)] / s.stats.median_ms
                                 for s in v.latency if (s.batch, s.seq) in base}
        return out


# ---- graph helpers -----------------------------------------------------------------------------
def _load(path):
    import onnx

    return onnx.load(str(path), load_external_data=False)


class _Graph:
    """Index of an ONNX graph: producers, consumers, names."""

    def __init__(self, model):
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

    def is_leaf(self, tensor: str) -> bool:
        return tensor in self.inputs or tensor in self.initializers or tensor not in self.producer


def _original(n) -> OriginalNode:
    return OriginalNode(n.name, n.op_type, [i for i in n.input], [o for o in n.output])


def _match_by_value(orig_path: Path, opt_path: Path, orig: _Graph, opt: _Graph, wanted: list[str],
                    vocab_size: int) -> dict[str, str]:
    """Map new tensor names of the optimized graph to exported tensors with the same values.

    Both graphs run once, unoptimized, on the same synthetic batch with the tensors of interest
    added as graph outputs (ONNX Runtime infers their types).
    """
    import onnx
    import onnxruntime as ort

    from ..ortinfer import make_feed, synthetic_batch

    if not wanted:
        return {}
    batch = synthetic_batch(2, 11, vocab_size)

    def run(path: Path, names: list[str]) -> dict[str, np.ndarray]:
        model = onnx.load(str(path))
        present = {o.name for o in model.graph.output}
        for name in names:
            if name not in present:
                model.graph.output.append(onnx.ValueInfoProto(name=name))
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.log_severity_level = 3
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        outs = sess.run(names, make_feed(sess, batch))
        return dict(zip(names, outs))

    removed_outputs = [t for n in orig.nodes if (n.name, n.op_type) not in opt.keys for t in n.output if t]
    got = run(opt_path, wanted)
    ref = run(orig_path, removed_outputs)
    mapping = {}
    for name, value in got.items():
        if value.dtype.kind != "f" or value.size < 2 or float(np.std(value)) == 0.0:
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


def provenance(orig_path: Path, opt_path: Path, match_by_value: bool = True, vocab_size: int = 1000) -> list[FusedNode]:
    """Fused nodes of ``opt_path`` and the nodes of ``orig_path`` each replaced (see module docs)."""
    orig, opt = _Graph(_load(orig_path)), _Graph(_load(opt_path))
    new_nodes = [n for n in opt.nodes if (n.name, n.op_type) not in orig.keys]
    renamed = [o for n in new_nodes for o in n.output if o and o not in orig.tensors]
    by_value: dict[str, str] = {}
    if match_by_value and renamed:
        by_value = _match_by_value(orig_path, opt_path, orig, opt, renamed, vocab_size)
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
                if t in surviving or orig.is_leaf(t):
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
            replaced=[_original(r) for r in replaced], boundary_inputs=boundary, shared=shared,
            matched_by_value={o: by_value[o] for o in node.output if o in by_value},
        ))
    return out


def graph_diff(orig_path: Path, opt_path: Path) -> tuple[int, int, dict[str, int], dict[str, int]]:
    """(nodes removed, nodes added, removed by op, added by op) going from ``orig`` to ``opt``."""
    orig, opt = _Graph(_load(orig_path)), _Graph(_load(opt_path))
    removed = Counter(n.op_type for n in orig.nodes if (n.name, n.op_type) not in opt.keys or not n.name)
    added = Counter(n.op_type for n in opt.nodes if (n.name, n.op_type) not in orig.keys or not n.name)
    if orig_path == opt_path:
        removed, added = Counter(), Counter()
    return (sum(removed.values()), sum(added.values()),
            dict(removed.most_common()), dict(added.most_common()))


# ---- diagnoses ---------------------------------------------------------------------------------
def _attention_style(model) -> str:
    """'sdpa' when the scores MatMul feeding a Softmax takes Q and K each scaled by a Sqrt (what the
    exporter writes for ``scaled_dot_product_attention``), 'eager' when it is scaled after the
    MatMul (Div or Mul), 'none' without Softmax, else 'unknown'."""
    g = _Graph(model)
    softmaxes = [n for n in g.nodes if n.op_type == "Softmax"]
    if not softmaxes:
        return "none"
    styles = set()
    for sm in softmaxes:
        node, hops = g.producer.get(sm.input[0]), 0
        while node is not None and node.op_type != "MatMul" and hops < 4:
            node, hops = g.producer.get(node.input[0]), hops + 1
        if node is None or node.op_type != "MatMul":
            styles.add("unknown")
            continue
        feeders = [g.producer.get(t) for t in node.input]
        scaled = [f for f in feeders if f is not None and f.op_type == "Mul"
                  and any((p := g.producer.get(t)) is not None and p.op_type == "Sqrt" for t in f.input)]
        styles.add("sdpa" if scaled else "eager")
    return styles.pop() if len(styles) == 1 else "unknown"


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
    if key == "Attention":
        return sum(hist.get(o, 0) for o in ATTENTION_OPS)
    if key == "SkipLayerNormalization":
        return sum(hist.get(o, 0) for o in SKIP_LN_OPS)
    if key == "BiasGelu/FastGelu":
        return sum(hist.get(o, 0) for o in GELU_OPS)
    return hist.get(key, 0)


_ARCH_LIMIT_FIX = ("nothing to fix in the export: this is what onnxruntime 1.19.2's optimizer does for this "
                   "architecture, and the unfused operators still run and validate. ")
_ROBERTA_POSITIONS = (
    "RoBERTa-style position ids are counted from the padding id (cumulative sum of input_ids != padding_idx, "
    "plus padding_idx), and onnxruntime 1.19.2 switches that match off in fusion_embedlayer.py ('TODO: Support "
    "roberta (position starts from 2 instead of 0) in EmbedLayerNormalization kernel'), so the word + position "
    "embedding sum and its LayerNormalization stay separate ops.")
# Why the BERT fusions cannot fire for an architecture, read off its exported graph (opset 17,
# eager attention, transformers 4.57.6) and onnxruntime 1.19.2's fusion code; (cause, fix).
ARCHITECTURE_LIMITS: dict[tuple[str, str], tuple[str, str]] = {
    ("roberta", "EmbedLayerNormalization"): (_ROBERTA_POSITIONS, _ARCH_LIMIT_FIX + "It would take the kernel "
                                             "supporting a position offset (the TODO above)."),
    ("xlm-roberta", "EmbedLayerNormalization"): (_ROBERTA_POSITIONS, _ARCH_LIMIT_FIX + "It would take the kernel "
                                                 "supporting a position offset (the TODO above)."),
    ("mpnet", "Attention"): (
        "MPNet adds a relative-position bias (bucketed relative positions, shared by every layer) to the scores "
        "before the mask: MatMul -> Div -> Add(position bias) -> Add(mask) -> Softmax. The BERT attention fusion "
        "expects the mask Add right after the scaling and does not match the extra Add.",
        _ARCH_LIMIT_FIX + "It would take fusing to MultiHeadAttention with the bias as its attention_bias input "
                          "(a pattern onnxruntime 1.19.2's BERT fusion does not write)."),
    ("mpnet", "EmbedLayerNormalization"): (
        "MPNet's position ids are counted from the padding id as in RoBERTa (not matched by onnxruntime 1.19.2), "
        "and the embedding fusion also needs a fused Attention after the LayerNormalization, which MPNet has not.",
        _ARCH_LIMIT_FIX.rstrip() + ""),
    ("deberta-v2", "Attention"): (
        "DeBERTa-v2/v3 attention is disentangled: the scores add content-to-position and position-to-content "
        "terms (relative-position embeddings gathered with GatherElements), scaled by sqrt(3 x head size), and "
        "masked with Where. onnxruntime 1.19.2's optimizer has no fusion for that pattern.",
        _ARCH_LIMIT_FIX + "It would take a DeBERTa attention fusion in ONNX Runtime; the FP32 graph runs "
                          "unfused, and dynamic INT8 still quantizes its MatMuls."),
    ("deberta-v2", "EmbedLayerNormalization"): (
        "DeBERTa-v3 has no absolute position embedding (position_biased_input=False): the embedding is a word "
        "Gather + LayerNormalization, not the word + position (+ segment) sum the fusion matches; it also needs "
        "a fused Attention after it.",
        _ARCH_LIMIT_FIX.rstrip()),
    ("modernbert", "Attention"): (
        "ModernBERT projects Q, K and V with one Linear and Splits it, applies rotary position embeddings to Q "
        "and K (Sin/Cos, Neg, Concat, Mul, Add), scales with Mul and picks a global or sliding-window mask with "
        "Where. The BERT attention fusion matches none of that, and the optimizer's RotaryEmbedding fusion "
        "(its patterns are those of decoder models such as LLaMA and Phi) did not match the in-graph Sin/Cos "
        "either: the fused graph has no RotaryEmbedding node.",
        _ARCH_LIMIT_FIX + "It would take a ModernBERT attention fusion (rotary + packed QKV + local window) in "
                          "ONNX Runtime."),
    ("modernbert", "EmbedLayerNormalization"): (
        "ModernBERT has no position embedding (rotary attention instead) and its LayerNormalization has no bias: "
        "the embedding is a word Gather + LayerNormalization, not the sum the fusion matches; it also needs a "
        "fused Attention after it.",
        _ARCH_LIMIT_FIX.rstrip()),
}


def diagnose(orig_model, fused_hist: dict[str, int], expected: dict[str, int], attn_implementation: str,
             input_names: Sequence[str], num_heads: int, hidden_size: int, architecture: str = "") -> list[Diagnosis]:
    """A :class:`Diagnosis` for every expected fusion that fell short.

    ``architecture`` is the Hugging Face ``config.model_type`` when known: for the architectures
    whose attention or embeddings the BERT fusions cannot match (:data:`ARCHITECTURE_LIMITS`), the
    cause names the part of the architecture that prevents it (after the general causes such as
    an SDPA export, which a re-export fixes)."""
    ops = Counter(n.op_type for n in orig_model.graph.node)
    style = _attention_style(orig_model)
    sdpa = attn_implementation == "sdpa" or style == "sdpa"
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
                    f"attention pattern: {style}; recorded attention: {attn_implementation or 'unknown'}")
        limit = ARCHITECTURE_LIMITS.get((architecture, key))
        if limit is not None and not (sdpa and key in ("Attention", "EmbedLayerNormalization")):
            cause, fix = limit
        elif key == "Attention":
            if sdpa:
                cause = ("the graph was exported with SDPA attention (torch scaled_dot_product_attention): the "
                         "exporter scales Q and K by Sqrt before the MatMul and builds the mask with Where, a "
                         "pattern ONNX Runtime's BERT attention fusion does not match.")
                fix = reexport + "."
            elif style == "none":
                cause = "the graph has no Softmax, so there is no self-attention to fuse."
                fix = "nothing to fix if the model has no attention; otherwise check that the right graph was given."
            elif num_heads and hidden_size and hidden_size % num_heads:
                cause = f"hidden_size {hidden_size} is not a multiple of num_heads {num_heads}, so the fusion rejected the shapes."
                fix = "pass the model's real num_heads and hidden_size (FusionConfig(num_heads=..., hidden_size=...))."
            else:
                cause = ("the attention subgraph did not match the BERT pattern the optimizer knows "
                         "(MatMul -> Div -> Add mask -> Softmax -> MatMul with Q/K/V MatMul+Add and Reshape/Transpose).")
                fix = ("pass num_heads and hidden_size explicitly (FusionConfig(num_heads=..., hidden_size=...)), "
                       "export at opset 17 with eager attention, and check the model type is BERT-like.")
        elif key == "EmbedLayerNormalization":
            if attention_short:
                cause = ("the embedding fusion only fires when the embedding LayerNormalization feeds a fused "
                         "Attention node, and Attention was not fused.")
                fix = ("fix the Attention fusion first" + (f": {reexport}." if sdpa else " (see its diagnosis)."))
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
                cause = "residual Add + LayerNormalization pairs did not match (an op between them, or a LayerNormalization the optimizer could not fuse first)."
                fix = "export at opset 17 (LayerNormalization as one op) and keep opt_level 1 or higher."
        else:
            cause = "the GELU pattern (Div by sqrt 2, Erf, Add 1, Mul, Mul 0.5 after the bias Add) did not match."
            fix = "export at opset 17; approximate GELU (gelu_new) fuses as FastGelu, which is counted here too."
        out.append(Diagnosis(key, int(want), int(got), cause, fix, evidence))
    # Attention first: a missing Attention fusion also blocks the embedding fusion.
    priority = {"Attention": 0, "EmbedLayerNormalization": 1, "SkipLayerNormalization": 2}
    return sorted(out, key=lambda d: priority.get(d.fusion, 3))


# ---- building variants -------------------------------------------------------------------------
def _ort_variant(src: Path, level: str, dst: Path) -> None:
    from ..ortinfer import make_session

    with runs.atomic_path(dst) as tmp:
        session = make_session(src, threads=1, graph_optimization=level, optimized_model_path=tmp)
        del session


def _transformer_variant(src: Path, dst: Path, cfg: FusionConfig, num_heads: int, hidden_size: int,
                         model_type: Optional[str] = None) -> None:
    model_type = model_type or (cfg.model_type if cfg.model_type != "auto" else "bert")
    try:
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as exc:
        raise FusionError(
            f"onnxruntime.transformers.optimizer cannot be imported ({exc}); it needs 'coloredlogs' and "
            "'sympy' next to the onnxruntime-training wheel: run `make setup`"
        ) from exc
    try:
        optimizer = optimize_model(str(src), model_type=model_type, num_heads=num_heads, hidden_size=hidden_size,
                                   opt_level=cfg.opt_level, use_gpu=False)
    except Exception as exc:
        raise FusionError(
            f"the transformer optimizer failed on {src} (model_type={model_type}, num_heads={num_heads}, "
            f"hidden_size={hidden_size}, opt_level={cfg.opt_level}): {type(exc).__name__}: {exc}. Try opt_level=0, "
            "or pass the model's num_heads and hidden_size"
        ) from exc
    with runs.atomic_path(dst) as tmp:
        optimizer.save_model_to_file(str(tmp))


def _fused_counts(nodes: list[FusedNode]) -> dict[str, int]:
    counts = Counter(f.op_type for f in nodes if f.replaced and f.op_type not in BOOKKEEPING_OPS)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass
class _Inputs:
    source: Path
    export: Optional[ExportResult]
    export_path: Optional[Path]
    tokenizer: Any
    examples: Any
    reference: Optional[np.ndarray]
    validation_cfg: ExportConfig
    attn: str
    num_layers: int
    num_heads: int
    hidden_size: int
    vocab_size: int
    notes: list
    architecture: str = ""  # the Hugging Face config.model_type, when the export recorded it


def _resolve_inputs(src, cfg: FusionConfig, data) -> _Inputs:
    notes: list[str] = []
    export, export_path = None, None
    if isinstance(src, ExportResult):
        export = src
        export_path = Path(src.out_dir) / "export.json"
    elif isinstance(src, (str, os.PathLike)):
        path = Path(src)
        if path.is_dir() or path.name.endswith(".json"):
            export = load_export(path)
            export_path = path if path.name.endswith(".json") else path / "export.json"
        elif not path.is_file():
            raise FileNotFoundError(f"no ONNX graph or export result at {path}: run the export first (workbench export)")
        elif (path.parent / "export.json").is_file():
            candidate = load_export(path.parent)
            if Path(candidate.onnx_path).resolve() == path.resolve():
                export, export_path = candidate, path.parent / "export.json"
        if export is None:
            source = path
    else:
        raise TypeError(f"expected an ExportResult, an export folder or an ONNX path, got {type(src).__name__}")

    if export is not None:
        source = Path(export.onnx_path)
        vcfg = export.config
        changes = {}
        if cfg.tolerance is not None:
            changes["tolerance"] = cfg.tolerance
        if cfg.validation_examples is not None:
            changes["validation_examples"] = cfg.validation_examples
        if changes:
            vcfg = ExportConfig(**{**{f: getattr(vcfg, f) for f in vcfg.__dataclass_fields__}, **changes})
        info = export.model_info
        return _Inputs(source, export, export_path, export.load_tokenizer(), export.load_examples(),
                       export.reference_logits(), vcfg, export.attn_implementation, info.num_layers,
                       cfg.num_heads or info.num_heads, cfg.hidden_size or info.hidden_size, info.vocab_size or 1000, notes,
                       info.model_type)

    # A bare ONNX file: tokenizer beside it or MiniLM's, data given or the quick reviews; the
    # reference is the unoptimized graph itself (no PyTorch model to compare with).
    from ..data import DataConfig, load_data
    from ..models import load_tokenizer

    tok_dir = source.parent / "tokenizer"
    if tok_dir.is_dir():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(tok_dir), local_files_only=True)
    else:
        tokenizer = load_tokenizer("minilm")
        notes.append(f"no tokenizer/ folder beside {source.name}: used MiniLM's tokenizer")
    data = data if data is not None else load_data(DataConfig.quick())
    from .export import select_examples

    vcfg = ExportConfig(**{k: v for k, v in (("tolerance", cfg.tolerance), ("validation_examples", cfg.validation_examples)) if v is not None})
    examples = select_examples(data, vcfg)
    model = _load(source)
    num_layers = sum(1 for n in model.graph.node if n.op_type == "Softmax")
    notes.append("no export result: variants are validated against the unoptimized graph, not PyTorch; "
                 f"{num_layers} attention layers inferred from the Softmax count")
    return _Inputs(source, None, None, tokenizer, examples, None, vcfg, "", num_layers, cfg.num_heads,
                   cfg.hidden_size, getattr(tokenizer, "vocab_size", 1000) or 1000, notes)


def _pytorch_model(inputs: _Inputs, model):
    """The PyTorch model to time, or (None, reason)."""
    if model is not None:
        return model, ""
    exp = inputs.export
    if exp is None:
        return None, "no PyTorch model to time: pass model=... (a LoadedModel) or fuse an export result"
    from ..models import BUILTIN_MODELS, load_model

    attn = exp.attn_implementation if exp.attn_implementation in ("eager", "sdpa") else "eager"
    n = len(exp.class_names)
    if exp.model_name in BUILTIN_MODELS:
        return load_model(exp.model_name, num_labels=n, attn_implementation=attn), ""
    if Path(exp.model_source).is_dir():
        return load_model(exp.model_source, num_labels=n, id2label=dict(enumerate(exp.class_names)),
                          attn_implementation=attn), ""
    return None, (f"PyTorch eager not timed: the exported model ({exp.model_source}) cannot be reloaded; "
                  "pass model=... to run_fusion")


def _pytorch_model_sdpa(inputs: _Inputs, model):
    """The same PyTorch model loaded with SDPA attention (for the GPU peers), or None."""
    from ..models import BUILTIN_MODELS, load_model

    exp = inputs.export
    if exp is None:
        return None
    n = len(exp.class_names)
    if exp.model_name in BUILTIN_MODELS:
        return load_model(exp.model_name, num_labels=n, attn_implementation="sdpa")
    if Path(exp.model_source).is_dir():
        return load_model(exp.model_source, num_labels=n, id2label=dict(enumerate(exp.class_names)), attn_implementation="sdpa")
    return None


def run_fusion(source: Union[ExportResult, str, os.PathLike], cfg: Optional[FusionConfig] = None,
               out_dir: str | os.PathLike = "runs/fusion", data=None, model=None) -> FusionReport:
    """Build, validate, diff and time every variant of an exported graph; save ``fusion.json``.

    ``source``: an :class:`ExportResult`, a folder holding ``export.json``, or an ONNX file.
    ``data``: used only for a bare ONNX file (an export carries its validation examples).
    ``model``: the PyTorch model to time as the eager reference (default: reloaded from the export).
    """
    from .export import compare_logits
    from ..ortinfer import as_session, latency_by_shape, predict_dataset, torch_latency_by_shape

    from ..device import require_device

    cfg = cfg or FusionConfig()
    device = require_device(cfg.device)  # before any work: CUDA asked for and absent is one clear error
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    inputs = _resolve_inputs(source, cfg, data)
    notes = list(inputs.notes)
    src = inputs.source
    model_type = cfg.model_type if cfg.model_type != "auto" else optimizer_model_type(inputs.architecture)

    # 1. build every variant's graph file
    built: dict[Variant, tuple[Path, str, float]] = {}
    for variant in cfg.variants:
        t0 = time.perf_counter()
        if variant is Variant.UNOPTIMIZED:
            built[variant] = (src, "disabled", 0.0)
            continue
        if variant is Variant.TRANSFORMER:
            path = out / FUSED_FILE
            _transformer_variant(src, path, cfg, inputs.num_heads, inputs.hidden_size, model_type)
            built[variant] = (path, cfg.transformer_session, time.perf_counter() - t0)
        elif variant is Variant.TRANSFORMER_FP16:
            from .fp16 import Fp16Error, convert_fp16

            path = out / FUSED_FP16_FILE
            try:
                convert_fp16(built[Variant.TRANSFORMER][0], path, cfg.model_type, inputs.num_heads, inputs.hidden_size)
            except Fp16Error as exc:
                raise FusionError(f"the {variant.value} variant: {exc}") from exc
            built[variant] = (path, cfg.transformer_session, time.perf_counter() - t0)
        else:
            level = ORT_LEVEL[variant]
            path = out / f"model_ort_{level}.onnx"
            _ort_variant(src, level, path)
            built[variant] = (path, level, time.perf_counter() - t0)

    # 2. validate: every variant against PyTorch's logits from the export (or the unoptimized graph)
    vcfg = inputs.validation_cfg
    examples = inputs.examples.select(range(min(vcfg.validation_examples, len(inputs.examples))))
    logits: dict[Variant, np.ndarray] = {}
    for variant, (path, level, _) in built.items():
        run_path = src if variant in ORT_LEVEL else path  # ORT levels: the session optimizes the export
        session = as_session(run_path, threads=cfg.threads, graph_optimization=level, device=device)
        logits[variant] = predict_dataset(session, inputs.tokenizer, examples, vcfg.max_length, vcfg.validation_batch_size)
        del session
    if inputs.reference is not None:
        reference = inputs.reference[: len(examples)]
        reference_name = "PyTorch logits saved at export"
    else:
        reference = logits[Variant.UNOPTIMIZED]
        reference_name = "the unoptimized graph (no PyTorch reference)"
    validations = {v: compare_logits(lg, reference, vcfg.tolerance, vcfg.min_label_agreement,
                                     what=f"the {v.value} graph") for v, lg in logits.items()
                   if v is not Variant.TRANSFORMER_FP16}
    if Variant.TRANSFORMER_FP16 in logits:
        # FP16 is held to FP16's tolerance, against the FP32 fused graph it was converted from
        from .fp16 import validate_fp16

        validations[Variant.TRANSFORMER_FP16] = validate_fp16(logits[Variant.TRANSFORMER_FP16], logits[Variant.TRANSFORMER],
                                                              where=device)
        if device == "cpu":
            notes.append("FP16 validated on the CPU provider: ONNX Runtime runs float16 nodes without a CPU kernel in "
                         "float32 between Casts, so this measures float16 storage, not the CUDA kernels' arithmetic")

    # 3. time: PyTorch first (no ONNX Runtime session alive to compete for the cores), then each variant
    pt_latency: list[ShapeLatency] = []
    pt_peers: dict[str, list[ShapeLatency]] = {}
    if cfg.measure_latency and cfg.time_pytorch:
        pt_model, why = _pytorch_model(inputs, model)
        if pt_model is None:
            notes.append(why)
        elif device != "cpu":
            from ..gpu_peers import torch_gpu_latency

            peers = ("eager_fp32", "sdpa_fp16", "compile_fp16") if cfg.time_pytorch_peers else ("eager_fp32",)
            timed, peer_notes = torch_gpu_latency(pt_model, cfg.shapes, device, peers, cfg.warmup, cfg.repeats,
                                                  cfg.max_seconds_per_shape, inputs.vocab_size,
                                                  sdpa_loader=lambda: _pytorch_model_sdpa(inputs, model))
            pt_latency = timed.pop("eager_fp32", [])
            pt_peers = timed
            notes.extend(peer_notes)
            del pt_model
        else:
            pt_latency = torch_latency_by_shape(pt_model, cfg.shapes, cfg.warmup, cfg.repeats, cfg.threads,
                                                cfg.max_seconds_per_shape, inputs.vocab_size)
            del pt_model
    latency: dict[Variant, list[ShapeLatency]] = {}
    for variant, (path, level, _) in built.items():
        if not cfg.measure_latency:
            latency[variant] = []
            continue
        run_path = src if variant in ORT_LEVEL else path
        latency[variant] = latency_by_shape(run_path, cfg.shapes, cfg.warmup, cfg.repeats, cfg.threads, level,
                                            cfg.max_seconds_per_shape, inputs.vocab_size, device=device)

    # 3b. CUDA only: where each variant's nodes ran, Memcpy nodes, and CUDA graphs where ONNX Runtime accepts them
    placement: dict[str, PlacementReport] = {}
    graph_latency: dict[str, list[ShapeLatency]] = {}
    if device != "cpu":
        from ..device import probe_placement
        from ..ortinfer import make_feed, make_session, synthetic_batch

        b0, s0 = cfg.shapes[0]
        for variant, (path, level, _) in built.items():
            run_path = src if variant in ORT_LEVEL else path
            feed = make_feed(make_session(run_path, graph_optimization="disabled"), synthetic_batch(b0, s0, inputs.vocab_size))
            rep = probe_placement(run_path, device, feed, level, try_graph_capture=cfg.cuda_graph)
            placement[variant.value] = rep
            if cfg.cuda_graph and cfg.measure_latency and rep.graph_capture:
                graph_latency[variant.value] = latency_by_shape(run_path, cfg.shapes, cfg.warmup, cfg.repeats, cfg.threads,
                                                                level, cfg.max_seconds_per_shape, inputs.vocab_size,
                                                                device=device, cuda_graph=True)

    # 4. diff and provenance against the exported graph
    results = []
    for variant, (path, level, seconds) in built.items():
        removed, added, removed_by, added_by = graph_diff(src, path)
        # FP16: its nodes are the fused graph's plus Casts; provenance is the transformer variant's
        prov = ([] if variant in (Variant.UNOPTIMIZED, Variant.TRANSFORMER_FP16)
                else provenance(src, path, cfg.match_by_value, inputs.vocab_size))
        results.append(VariantResult(
            name=variant, path=Path(path).resolve(), session_optimization=level,
            node_count=len(_load(path).graph.node), op_histogram=op_histogram(path), fused_ops=_fused_counts(prov),
            size_mib=file_size_mib(path), validation=validations[variant], latency=latency[variant],
            nodes_removed=removed, nodes_added=added, removed_by_op=removed_by, added_by_op=added_by,
            provenance=prov, build_seconds=seconds,
        ))

    # 5. diagnoses on the transformer graph (or the most optimized one built)
    orig_model = _load(src)
    num_layers = inputs.num_layers or sum(1 for n in orig_model.graph.node if n.op_type == "Softmax")
    expected = expected_fusions(orig_model, num_layers) if num_layers else {}
    target = next((r for r in results if r.name is Variant.TRANSFORMER),
                  [r for r in results if r.name is not Variant.TRANSFORMER_FP16][-1])
    diagnoses = []
    if expected and target.name is not Variant.UNOPTIMIZED:
        diagnoses = diagnose(orig_model, target.op_histogram, expected, inputs.attn,
                             [i.name for i in orig_model.graph.input], inputs.num_heads, inputs.hidden_size,
                             architecture=inputs.architecture)
    if target.name is not Variant.TRANSFORMER:
        notes.append("the transformer variant was not built: diagnoses refer to "
                     f"{target.name.value}, whose session-level fusions do not include Attention on the CPU")
    fused_path = built[Variant.TRANSFORMER][0].resolve() if Variant.TRANSFORMER in built else None

    report = FusionReport(
        source_path=src.resolve(), export_path=inputs.export_path.resolve() if inputs.export_path else None,
        attn_implementation=inputs.attn, num_layers=num_layers, variants=results, pytorch_latency=pt_latency,
        expected_fusions=expected, diagnoses=diagnoses, fused_path=fused_path, shapes=list(cfg.shapes),
        reference=reference_name, notes=notes, config=cfg, device=device, placement=placement,
        cuda_graph_latency=graph_latency, pytorch_peers=pt_peers,
    )
    runs.save_result(report, out / RESULT_FILE)
    return report


def load_fusion(path: str | os.PathLike) -> FusionReport:
    """Read a ``fusion.json`` (or the folder holding it)."""
    return runs.load_result(FusionReport, path, RESULT_FILE)


# ---- text views (CLI, benchmark) ---------------------------------------------------------------
def summary(report: FusionReport) -> dict:
    """A compact, JSON-ready summary (the full report, provenance included, is in fusion.json)."""
    speed = report.speedups() if report.pytorch_latency else {}
    return {
        "source": str(report.source_path),
        "fused_path": str(report.fused_path) if report.fused_path else None,
        "reference": report.reference,
        "all_passed": report.all_passed,
        "expected_fusions": report.expected_fusions,
        "variants": [{
            "name": v.name.value, "path": str(v.path), "session_optimization": v.session_optimization,
            "node_count": v.node_count, "fused_ops": v.fused_ops, "size_mib": v.size_mib,
            "nodes_removed": v.nodes_removed, "nodes_added": v.nodes_added,
            "validation": {"passed": v.validation.passed, "max_abs_diff": v.validation.max_abs_diff,
                           "label_agreement": v.validation.label_agreement, "message": v.validation.message},
            "median_ms": {f"{s.batch}x{s.seq}": s.stats.median_ms for s in v.latency},
            "speedup_vs_pytorch": speed.get(v.name.value, {}),
        } for v in report.variants],
        "pytorch_median_ms": {f"{s.batch}x{s.seq}": s.stats.median_ms for s in report.pytorch_latency},
        "diagnoses": [{"fusion": d.fusion, "expected": d.expected, "found": d.found, "cause": d.cause, "fix": d.fix}
                      for d in report.diagnoses],
        "notes": report.notes,
        "device": report.device,
        "placement": {name: {"summary": p.summary(), "nodes_by_provider": p.nodes_by_provider, "cpu_ops": p.cpu_ops,
                             "memcpy_nodes": p.memcpy_nodes, "graph_capture": p.graph_capture,
                             "capture_refusal": (p.capture_refusal.kind + ": " + p.capture_refusal.reason)
                             if p.capture_refusal else None} for name, p in report.placement.items()},
        "cuda_graph_median_ms": {name: {f"{s.batch}x{s.seq}": s.stats.median_ms for s in lat}
                                 for name, lat in report.cuda_graph_latency.items()},
        "pytorch_peers_median_ms": {name: {f"{s.batch}x{s.seq}": s.stats.median_ms for s in lat}
                                    for name, lat in report.pytorch_peers.items()},
    }


def table(report: FusionReport) -> str:
    """The report as a plain-text table: one row per variant, medians per shape with speed-ups."""
    shapes = [(s[0], s[1]) for s in report.shapes]
    timed = bool(report.pytorch_latency) or any(v.latency for v in report.variants)
    w = max([13] + [len(v.name.value) for v in report.variants])
    head = f"{'variant':<{w}} {'session':<9} {'nodes':>5} {'MiB':>6} {'max|Δ|':>9} {'ok':>3}"
    if timed:
        head += "".join(f" {f'{b}x{s} ms':>12}" for b, s in shapes)
    lines = [head, "-" * len(head)]
    base = {(s.batch, s.seq): s.stats.median_ms for s in report.pytorch_latency}

    def cells(lat) -> str:
        got = {(s.batch, s.seq): s.stats.median_ms for s in lat}
        out = ""
        for shape in shapes:
            ms = got.get(shape)
            if ms is None:
                out += f" {'-':>12}"
            elif shape in base:
                out += f" {f'{ms:.2f} {base[shape] / ms:.2f}x':>12}"
            else:
                out += f" {f'{ms:.2f}':>12}"
        return out

    if report.pytorch_latency:
        lines.append(f"{'pytorch':<{w}} {'eager':<9} {'':>5} {'':>6} {'':>9} {'':>3}" + cells(report.pytorch_latency))
    for name, lat in report.pytorch_peers.items():
        lines.append(f"{'pytorch':<{w}} {name:<9} {'':>5} {'':>6} {'':>9} {'':>3}" + cells(lat))
    for v in report.variants:
        row = (f"{v.name.value:<{w}} {v.session_optimization:<9} {v.node_count:>5} {v.size_mib:>6.1f} "
               f"{v.validation.max_abs_diff:>9.2g} {'yes' if v.validation.passed else 'NO':>3}")
        lines.append(row + (cells(v.latency) if timed else ""))
        if v.name.value in report.cuda_graph_latency:
            lines.append(f"{'  + CUDA graph':<{w}} {'':<9} {'':>5} {'':>6} {'':>9} {'':>3}"
                         + cells(report.cuda_graph_latency[v.name.value]))
    if report.device != "cpu":
        lines.append(f"\ndevice: {report.device} (ONNX Runtime with I/O binding: inputs and outputs on the device)")
        for name, p in report.placement.items():
            lines.append(f"placement {name}: {p.summary()}")
            if p.capture_refusal is not None:
                lines.append(f"  CUDA graph refused ({p.capture_refusal.kind}): {p.capture_refusal.error}\n  fix: {p.capture_refusal.fix}")
    if report.fused_path is not None:
        counts = ", ".join(f"{k} {n}" for k, n in report.fused_op_counts.items()) or "none"
        lines.append(f"\nfused by the transformer optimizer: {counts}")
    if timed and report.pytorch_latency:
        lines.append("(ms: median per batch; x: speed-up over PyTorch eager measured in this run)")
    for d in report.diagnoses:
        lines.append(f"\nMISSING {d.fusion}: expected {d.expected}, found {d.found}\n  cause: {d.cause}\n  fix:   {d.fix}")
    for n in report.notes:
        lines.append(f"note: {n}")
    return "\n".join(lines)
