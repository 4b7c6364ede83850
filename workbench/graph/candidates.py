"""The fusion stage's choice of graph: the full fusion, or one with a family of :data:`FAMILIES` left out when
that runs measurably faster on this machine under this ONNX Runtime (``--fusion timed``).

Fusing is not always faster: one runtime's SkipLayerNormalization kernel can take twice another's, while the
Add and LayerNormalization it replaces run as fast as ever. A candidate leaves its family out of the optimizer
and out of every session that opens the graph (recorded by :mod:`workbench.runtime.graphmeta`). The rule
(:func:`pick_fusion`): a candidate replaces the full fusion only when it is faster beyond doubt at every timed
shape (the low end of its speed-up's 95% interval above 1) and by at least ``FUSION_MARGIN`` in geometric mean;
among those the highest geometric mean wins. The margin is on the mean, not on each low end: a margin on the low
ends would prefer a candidate with tight intervals to one faster at every shape. Otherwise (none qualifies, a
busy machine, nothing timed) the full fusion stays. A candidate not chosen is deleted (its figures stay in
``fusion.json``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from statistics import geometric_mean
from typing import Mapping, Optional, Sequence

import numpy as np

from ..core.latency import Ratio
from ..perf.machine_profile import LoadCheck
from ..perf.speed import Speed
from ..runs.layout import fusion_candidate
from ..runtime.ortinfer import ShapeLatency
from .sources import FusionSource
from .validate import Validation, compare_logits
from .variants import FusionConfig

FULL = "full"  # the candidate with every fusion: the transformer optimizer's default graph
FUSION_MARGIN = 0.03  # the geometric-mean speed-up a candidate needs (besides being faster beyond doubt at every shape)
FUSED_DOMAIN = "com.microsoft"  # ONNX Runtime's contrib operators: what the optimizer's fusions make


@dataclass(frozen=True)
class Family:
    """One fusion family the optimizer can leave out, and the session optimizers that would fuse it back.
    The ``FusionOptions`` flag names are the same in onnxruntime 1.19 and 1.32."""

    candidate: str
    op: str
    options_off: tuple[str, ...]
    session_off: tuple[str, ...]


FAMILIES = (
    Family("no_skip_layer_norm", "SkipLayerNormalization", ("enable_skip_layer_norm", "enable_bias_skip_layer_norm"),
           ("SkipLayerNormFusion",)),
    Family("no_attention", "Attention", ("enable_attention",), ("AttentionFusion",)),
    # the GELU itself stays one Gelu node; the optimizer's GELU approximation (FastGelu) is off in every candidate
    Family("no_bias_gelu", "BiasGelu", ("enable_bias_gelu",), ("BiasGeluFusion",)),
    Family("no_embed_layer_norm", "EmbedLayerNormalization", ("enable_embed_layer_norm",), ("EmbedLayerNormFusion",)),
)


@dataclass(frozen=True)
class Candidate:
    name: str
    left_out: str  # the fused operator this candidate leaves out ("" for the full fusion)
    path: Optional[Path]  # None once deleted (a candidate not chosen)
    fused_ops: dict[str, int]  # ONNX Runtime's fused (contrib) operators by type
    op_counts: dict[str, int]  # every operator by type
    node_count: int
    session_disabled: tuple[str, ...] = ()  # session optimizers the graph asks its sessions to leave out
    validation: Optional[Validation] = None
    latency: list[ShapeLatency] = field(default_factory=list)
    speed: list[Speed] = field(default_factory=list)  # over the full fusion, per shape (empty for the full fusion)

    @property
    def ratios(self) -> dict[str, Ratio]:
        return {f"{s.batch}x{s.seq}": s.ratio for s in self.speed}


@dataclass(frozen=True)
class FusionChoice:
    mode: str  # "timed" or "full" (FusionConfig.fusion)
    chosen: str  # a candidate's name: "full" or "no_<family>"
    path: Optional[Path]  # the chosen graph
    reason: str  # one line
    candidates: list[Candidate] = field(default_factory=list)
    margin: float = FUSION_MARGIN
    load: Optional[LoadCheck] = None

    def candidate(self, name: str) -> Candidate:
        for c in self.candidates:
            if c.name == name:
                return c
        raise KeyError(f"no fusion candidate {name!r}; considered: {[c.name for c in self.candidates]}")


def pick_fusion(ratios: Mapping[str, Mapping[str, Ratio]], margin: float = FUSION_MARGIN, contended: bool = False) -> tuple[str, str]:
    """The rule of the module doc over ``ratios`` (name -> {"BxS": Ratio}); (chosen name, why, in one line)."""
    timed = {n: r for n, r in ratios.items() if r}
    if not timed:
        return FULL, "full fusion kept: no candidate with a fusion left out validated and was timed"
    if contended:
        return FULL, "full fusion kept: the candidates were timed while other work used the CPU; time again on a quiet machine"

    def worst(name: str) -> tuple[str, Ratio]:
        return min(timed[name].items(), key=lambda kv: kv[1].lo)

    def mean(name: str) -> float:
        return geometric_mean([r.value for r in timed[name].values()])

    qualified = [n for n in timed if worst(n)[1].lo > 1 and mean(n) >= 1 + margin]
    if not qualified:
        best = max(timed, key=mean)
        shape, r = worst(best)
        return FULL, (f"full fusion kept: no candidate was faster beyond doubt at every shape and by {margin:.0%} in "
                      f"geometric mean (closest: {best}, {mean(best):.2f}x, {r.text()} at {shape})")
    chosen = max(qualified, key=mean)
    shape, r = worst(chosen)
    return chosen, (f"{chosen}: {mean(chosen):.2f}x the full fusion's speed (geometric mean over {len(timed[chosen])} "
                    f"shape(s), past the {margin:.0%} margin), faster beyond doubt at every shape; its least, {r.text()} at {shape}")


def graph_logits(path: Path, level: str, inputs: FusionSource, cfg: FusionConfig, device: str) -> np.ndarray:
    from ..runtime.ortinfer import as_session, predict_dataset

    vcfg = inputs.validation_cfg
    examples = inputs.examples.select(range(min(vcfg.validation_examples, len(inputs.examples))))
    session = as_session(path, threads=cfg.threads, graph_optimization=level, device=device)
    return predict_dataset(session, inputs.tokenizer, examples, vcfg.max_length, vcfg.validation_batch_size)


def time_graphs(graphs: Mapping[str, Path], base: str, inputs: FusionSource, cfg: FusionConfig, **kw):
    """``graphs`` timed side by side against ``base`` at the stage's shapes, rounds and threads (a SpeedRun)."""
    from ..perf.speed import time_side_by_side

    return time_side_by_side(graphs, base, cfg.shapes, warmup=cfg.warmup, rounds=cfg.repeats, repeats=3, threads=cfg.threads,
                             max_seconds=cfg.max_seconds_per_shape, vocab_size=inputs.vocab_size, retimes=cfg.retimes, **kw)


def _candidate(name: str, left_out: str, path: Path, session_off: Sequence[str], inputs: FusionSource, cfg: FusionConfig,
               device: str, unfused: np.ndarray, model=None) -> Candidate:
    from .facts import load_graph

    nodes = (model if model is not None else load_graph(path)).graph.node
    ops = Counter(n.op_type for n in nodes)
    fused = Counter(n.op_type for n in nodes if n.domain == FUSED_DOMAIN)
    vcfg = inputs.validation_cfg
    logits = graph_logits(path, cfg.transformer_session, inputs, cfg, device)
    validation = compare_logits(logits, unfused, vcfg.tolerance, vcfg.min_label_agreement, what=f"the {name} candidate")
    return Candidate(name, left_out, path, dict(fused.most_common()), dict(ops.most_common()), len(nodes), tuple(session_off),
                     validation)


def choose_fusion(full_path: Path, inputs: FusionSource, cfg: FusionConfig, out: Path, shape: tuple[int, int, str],
                  unfused: np.ndarray, device: str, full_model=None) -> FusionChoice:
    """Build, validate and time the candidates beside the fully fused graph and choose one (module doc)."""
    full = _candidate(FULL, "", full_path, (), inputs, cfg, device, unfused, full_model)
    if cfg.fusion == "full":
        return FusionChoice("full", FULL, full_path, "full fusion kept: --fusion full (FusionConfig(fusion='full'))", [full])
    why_untimed = ("full fusion kept: the candidates are timed only when the stage times (--latency)" if not cfg.measure_latency
                   else f"full fusion kept: the timed choice runs on the CPU; this run is on {device}" if device != "cpu" else "")
    if why_untimed:
        return FusionChoice("timed", FULL, full_path, why_untimed, [full])
    from .build import transformer_variant

    candidates = [full]
    for fam in (f for f in FAMILIES if full.fused_ops.get(f.op)):  # only the families the full fusion made
        path = out / fusion_candidate(fam.candidate)
        transformer_variant(inputs.source, path, cfg, shape[0], shape[1], shape[2], fam.options_off, fam.session_off)
        candidates.append(_candidate(fam.candidate, fam.op, path, fam.session_off, inputs, cfg, device, unfused))
    return _time_and_choose(candidates, inputs, cfg)


def _time_and_choose(candidates: list[Candidate], inputs: FusionSource, cfg: FusionConfig) -> FusionChoice:
    import dataclasses

    valid = [c for c in candidates if c.name == FULL or (c.validation is not None and c.validation.passed)]
    side = None
    if len(valid) > 1:
        graphs = {c.name: c.path for c in valid}
        side = time_graphs(graphs, FULL, inputs, cfg, floors=False, graph_optimization={n: cfg.transformer_session for n in graphs})
        candidates = [dataclasses.replace(c, latency=side.latency.get(c.name, []),
                                          speed=[s for s in side.speeds if s.name == c.name]) for c in candidates]
    chosen, reason = pick_fusion({c.name: c.ratios for c in candidates if c.name != FULL and c.speed},
                            contended=bool(side is not None and side.contended))
    kept = []
    for c in candidates:
        if c.name not in (FULL, chosen) and c.path is not None:
            c.path.unlink(missing_ok=True)
            c = dataclasses.replace(c, path=None)
        kept.append(c)
    path = next(c.path for c in kept if c.name == chosen)
    return FusionChoice("timed", chosen, path, reason, kept, load=side.load if side is not None else None)
