"""The fusion stage: what ONNX Runtime did to the graph, whether it still computes the same, and what it bought.

Quantizing a fused graph needs ``extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT}`` in onnxruntime
1.19.2 (contrib ops carry no type for some weights). On a GPU, PyTorch and its peers are timed first, on their
own, so no ONNX Runtime session holds device memory while they run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

import numpy as np

from .. import runs
from ..runtime.device import PlacementReport
from ..perf.machine_profile import LoadCheck
from ..runtime.ortinfer import ShapeLatency
from ..perf.speed import Speed
from .build import BuiltVariant, build_variants
from .candidates import FusionChoice, choose_fusion, graph_logits, time_graphs
from .diagnose import Diagnosis, attention_shape, diagnose, expected_fusions
from .export import ExportResult
from .facts import file_size_mib, op_histogram
from .provenance import FusedNode, fused_counts, graph_diff, provenance
from .sources import FusionSource, pytorch_model, reload_model, resolve_source
from .validate import Validation, compare_logits
from .variants import FusionConfig, Variant, optimizer_model_type, to_variant

from ..runs.layout import FUSION_DIR, FUSION_FILE  # noqa: E402, F401  (the run layout names every file)


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

    def fused_node(self, name: str) -> FusedNode:
        for f in self.provenance:
            if f.name == name:
                return f
        raise KeyError(f"no fused node {name!r} in {self.name.value}; fused nodes: {[f.name for f in self.provenance][:20]}")


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
    # CPU: every variant against PyTorch (else the unoptimized graph), interleaved, and the load check
    speed: list[Speed] = field(default_factory=list)
    load: Optional[LoadCheck] = None
    # which fused graph later stages take and why (workbench.graph.candidates); None in an older fusion.json
    choice: Optional[FusionChoice] = None

    def variant(self, name: Union[str, Variant]) -> VariantResult:
        key = to_variant(name)
        for v in self.variants:
            if v.name == key:
                return v
        raise KeyError(f"variant {key.value!r} was not built; built: {[v.name.value for v in self.variants]}")

    @property
    def fused(self) -> VariantResult:
        return self.variant(Variant.TRANSFORMER)

    @property
    def chosen_path(self) -> Optional[Path]:
        """The fused graph later stages take: the timed choice's, else the fully fused graph."""
        return self.choice.path if self.choice is not None and self.choice.path is not None else self.fused_path

    @property
    def fused_op_counts(self) -> dict[str, int]:
        return dict(self.fused.fused_ops)

    @property
    def all_passed(self) -> bool:
        return all(v.validation.passed for v in self.variants)

    def speedups(self, baseline: str = "pytorch") -> dict[str, dict[str, float]]:
        """``{variant: {"BxS": baseline_ms / variant_ms}}`` (>1 is faster); ``baseline``: ``"pytorch"`` or a variant name."""
        latency = self.pytorch_latency if baseline == "pytorch" else self.variant(baseline).latency
        base = {(s.batch, s.seq): s.stats.median_ms for s in latency}
        if not base:
            raise ValueError(f"no timings for the baseline {baseline!r}: run with measure_latency/time_pytorch on")
        return {v.name.value: {f"{s.batch}x{s.seq}": base[(s.batch, s.seq)] / s.stats.median_ms
                               for s in v.latency if (s.batch, s.seq) in base} for v in self.variants}


def run_fusion(source: Union[ExportResult, str, os.PathLike], cfg: Optional[FusionConfig] = None,
               out_dir: str | os.PathLike | None = None, *, data=None, model=None) -> FusionReport:
    """Build, validate, diff and time every variant of an export or an ONNX file; save ``fusion.json``.
    ``model``: the PyTorch eager reference (default: reloaded from the export)."""
    from ..runtime.device import require_device

    cfg = cfg or FusionConfig()
    device = require_device(cfg.device)  # before any work: CUDA asked for and absent is one clear error
    out = Path(out_dir) if out_dir is not None else runs.default_out(FUSION_DIR)
    out.mkdir(parents=True, exist_ok=True)
    inputs = resolve_source(source, cfg, data)
    notes = list(inputs.notes)
    model_type = cfg.model_type if cfg.model_type != "auto" else optimizer_model_type(inputs.architecture)

    num_heads, hidden_size = _heads(inputs, notes)
    # 1. build every variant's graph file (each parsed once, right after it is written)
    built = build_variants(inputs.graph, cfg, out, num_heads, hidden_size, model_type)
    # 2. validate: every variant against PyTorch's logits from the export (or the unoptimized graph)
    validations, reference_name, unfused = _validate(built, inputs, cfg, device, notes)
    # 3. time every variant side by side (module doc)
    side, pt_latency, pt_peers = None, [], {}
    latency: dict[Variant, list[ShapeLatency]] = {v: [] for v in built}
    if cfg.measure_latency:
        pt_latency, pt_peers, latency, side = _time_side_by_side(built, inputs, cfg, device, model, notes)
    # 3b. CUDA only: where each variant's nodes ran, Memcpy nodes, and CUDA graphs where ONNX Runtime accepts them
    placement, graph_latency = _place(built, inputs, cfg, device) if device != "cpu" else ({}, {})
    # 3c. the graph later stages take: the full fusion, or one with a fusion family left out that runs faster here
    full = built.get(Variant.TRANSFORMER)
    fused_path = full.path.resolve() if full is not None else None
    choice = (choose_fusion(fused_path, inputs, cfg, out, (num_heads, hidden_size, model_type), unfused, device,
                            full.graph.model) if full is not None else None)

    # 4. diff and provenance against the exported graph, from the graphs parsed in step 1
    results = []
    for variant, b in built.items():
        removed, added, removed_by, added_by = graph_diff(inputs.graph, b.graph)
        # FP16: its nodes are the fused graph's plus Casts; provenance is the transformer variant's
        prov = ([] if variant in (Variant.UNOPTIMIZED, Variant.TRANSFORMER_FP16)
                else provenance(inputs.graph, b.graph, cfg.match_by_value, inputs.vocab_size))
        results.append(VariantResult(
            name=variant, path=Path(b.path).resolve(), session_optimization=b.session_optimization,
            node_count=len(b.graph.nodes), op_histogram=op_histogram(b.graph.model), fused_ops=fused_counts(prov),
            size_mib=file_size_mib(b.path), validation=validations[variant], latency=latency[variant],
            nodes_removed=removed, nodes_added=added, removed_by_op=removed_by, added_by_op=added_by,
            provenance=prov, build_seconds=b.seconds,
        ))

    # 5. diagnoses on the transformer graph (or the most optimized one built)
    orig_model = inputs.graph.model
    num_layers = inputs.num_layers or sum(1 for n in inputs.graph.nodes if n.op_type == "Softmax")
    expected = expected_fusions(orig_model, num_layers) if num_layers else {}
    target = next((r for r in results if r.name is Variant.TRANSFORMER),
                  [r for r in results if r.name is not Variant.TRANSFORMER_FP16][-1])
    diagnoses = []
    if expected and target.name is not Variant.UNOPTIMIZED:
        diagnoses = diagnose(orig_model, target.op_histogram, expected, inputs.attn,
                             [i.name for i in orig_model.graph.input], num_heads, hidden_size,
                             architecture=inputs.architecture)
    if target.name is not Variant.TRANSFORMER:
        notes.append("the transformer variant was not built: diagnoses refer to "
                     f"{target.name.value}, whose session-level fusions do not include Attention on the CPU")

    report = FusionReport(
        source_path=inputs.source.resolve(), export_path=inputs.export_path.resolve() if inputs.export_path else None,
        attn_implementation=inputs.attn, num_layers=num_layers, variants=results, pytorch_latency=pt_latency,
        expected_fusions=expected, diagnoses=diagnoses, fused_path=fused_path, shapes=list(cfg.shapes),
        reference=reference_name, notes=notes, config=cfg, device=device, placement=placement,
        cuda_graph_latency=graph_latency, pytorch_peers=pt_peers,
        speed=list(side.speeds) if side is not None else [], load=side.load if side is not None else None, choice=choice,
    )
    runs.save_result(report, out / FUSION_FILE)
    return report


def _heads(inputs: FusionSource, notes: list[str]) -> tuple[int, int]:
    """``(num_heads, hidden_size)`` for the optimizer, else read off the graph: a bare transformers 5 graph
    carries no head count the optimizer can read, so it would fuse no Attention."""
    if inputs.num_heads and inputs.hidden_size:
        return inputs.num_heads, inputs.hidden_size
    heads, hidden = attention_shape(inputs.graph)
    if not heads:
        return inputs.num_heads, inputs.hidden_size
    num_heads, hidden_size = inputs.num_heads or heads, inputs.hidden_size or hidden
    notes.append(f"num_heads {num_heads} and hidden_size {hidden_size} read off the graph's first attention block "
                 "(FusionConfig(num_heads=..., hidden_size=...) sets them)")
    return num_heads, hidden_size


def load_fusion(path: str | os.PathLike) -> FusionReport:
    """Read a ``fusion.json`` (or the folder holding it)."""
    return runs.load_result(FusionReport, path, FUSION_FILE)


def _validate(built: dict[Variant, BuiltVariant], inputs: FusionSource, cfg: FusionConfig, device: str,
              notes: list[str]) -> tuple[dict[Variant, Validation], str, np.ndarray]:
    """(validations, the reference, the unfused logits); FP16 against the FP32 fused graph, at FP16's tolerance."""
    vcfg = inputs.validation_cfg
    logits = {variant: graph_logits(b.run_path, b.session_optimization, inputs, cfg, device) for variant, b in built.items()}
    if inputs.reference is not None:
        reference = inputs.reference[: len(logits[Variant.UNOPTIMIZED])]
        reference_name = "PyTorch logits saved at export"
    else:
        reference = logits[Variant.UNOPTIMIZED]
        reference_name = "the unoptimized graph (no PyTorch reference)"
    validations = {v: compare_logits(lg, reference, vcfg.tolerance, vcfg.min_label_agreement,
                                     what=f"the {v.value} graph") for v, lg in logits.items()
                   if v is not Variant.TRANSFORMER_FP16}
    if Variant.TRANSFORMER_FP16 in logits:
        from .fp16 import validate_fp16

        validations[Variant.TRANSFORMER_FP16] = validate_fp16(logits[Variant.TRANSFORMER_FP16], logits[Variant.TRANSFORMER],
                                                              where=device)
        if device == "cpu":
            notes.append("FP16 validated on the CPU provider: ONNX Runtime runs float16 nodes without a CPU kernel in "
                         "float32 between Casts, so this measures float16 storage, not the CUDA kernels' arithmetic")
    return validations, reference_name, logits[Variant.UNOPTIMIZED]


def _time_side_by_side(built: dict[Variant, BuiltVariant], inputs: FusionSource, cfg: FusionConfig, device: str, model,
                       notes: list[str]):
    """(PyTorch latency, its GPU peers, each variant's latency, SpeedRun), ratios against PyTorch (else the first)."""
    torch_models, pt_latency, pt_peers = {}, [], {}
    if cfg.time_pytorch:
        pt_model, why = pytorch_model(inputs, model)
        if pt_model is None:
            notes.append(why)
        elif device == "cpu":
            torch_models["pytorch"] = pt_model
        else:
            from ..perf.gpu_peers import torch_gpu_latency

            peers = ("eager_fp32", "sdpa_fp16", "compile_fp16") if cfg.time_pytorch_peers else ("eager_fp32",)
            pt_peers, peer_notes = torch_gpu_latency(pt_model, cfg.shapes, device, peers, cfg.warmup, cfg.repeats,
                                                     cfg.max_seconds_per_shape, inputs.vocab_size,
                                                     sdpa_loader=lambda: reload_model(inputs.export, "sdpa"))
            pt_latency = pt_peers.pop("eager_fp32", [])
            notes.extend(peer_notes)
            del pt_model
    graphs = {v.value: b.run_path for v, b in built.items()}
    levels = {v.value: b.session_optimization for v, b in built.items()}
    base = "pytorch" if torch_models else next(iter(graphs))
    side = time_graphs(graphs, base, inputs, cfg, device=device, torch_models=torch_models, graph_optimization=levels)
    notes.extend(side.notes)
    if side.contended:
        notes.append(f"timing {side.load.text()}: the speed-ups are not measured facts; time again on a quiet machine")
    latency = {v: side.latency[v.value] for v in built}
    return side.latency.get("pytorch", pt_latency), pt_peers, latency, side


def _place(built: dict[Variant, BuiltVariant], inputs: FusionSource, cfg: FusionConfig, device: str):
    """CUDA: (where each variant's nodes ran, latency of the variants ONNX Runtime captured as CUDA graphs)."""
    from ..runtime.ortinfer import probe_placement
    from ..runtime.ortinfer import latency_by_shape, make_feed, make_session, synthetic_batch

    placement: dict[str, PlacementReport] = {}
    graph_latency: dict[str, list[ShapeLatency]] = {}
    b0, s0 = cfg.shapes[0]
    for variant, b in built.items():
        level = b.session_optimization
        feed = make_feed(make_session(b.run_path, graph_optimization="disabled"), synthetic_batch(b0, s0, inputs.vocab_size))
        rep = probe_placement(b.run_path, device, feed, level, try_graph_capture=cfg.cuda_graph)
        placement[variant.value] = rep
        if cfg.cuda_graph and cfg.measure_latency and rep.graph_capture:
            graph_latency[variant.value] = latency_by_shape(b.run_path, cfg.shapes, cfg.warmup, cfg.repeats, cfg.threads,
                                                            level, cfg.max_seconds_per_shape, inputs.vocab_size,
                                                            device=device, cuda_graph=True)
    return placement, graph_latency
