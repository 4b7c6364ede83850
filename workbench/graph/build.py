"""Building each variant's graph file into the fusion folder, each parsed once right after it is written."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from .. import runs
from .facts import load_graph
from .provenance import GraphIndex
from .variants import ORT_LEVEL, FusionConfig, FusionError, Variant, transformers_optimizer, variant_file


@dataclass(frozen=True)
class BuiltVariant:
    variant: Variant
    path: Path
    session_optimization: str
    seconds: float
    graph: GraphIndex
    source: Path  # the exported graph it was built from

    @property
    def run_path(self) -> Path:
        """The exported graph for ONNX Runtime's levels (the session optimizes it), else the variant's file."""
        return self.source if self.variant in ORT_LEVEL else self.path


def build_variants(source: GraphIndex, cfg: FusionConfig, out: Path, num_heads: int, hidden_size: int,
                   model_type: str) -> dict[Variant, BuiltVariant]:
    """Every variant of ``cfg.variants`` built from ``source`` into ``out`` (the unoptimized one is ``source``)."""
    src = source.path
    if src is None:
        raise ValueError("build_variants needs the exported graph's path (GraphIndex(model, path))")
    built: dict[Variant, BuiltVariant] = {}
    for variant in cfg.variants:
        t0 = time.perf_counter()
        if variant is Variant.UNOPTIMIZED:
            built[variant] = BuiltVariant(variant, src, "disabled", 0.0, source, src)
            continue
        path = out / variant_file(variant)
        if variant is Variant.TRANSFORMER:
            transformer_variant(src, path, cfg, num_heads, hidden_size, model_type)
            level = cfg.transformer_session
        elif variant is Variant.TRANSFORMER_FP16:
            from .fp16 import Fp16Error, convert_fp16

            fused = built[Variant.TRANSFORMER]
            try:
                convert_fp16(fused.path, path, cfg.model_type, num_heads, hidden_size, fp32_model=fused.graph.model)
            except Fp16Error as exc:
                raise FusionError(f"the {variant.value} variant: {exc}") from exc
            level = cfg.transformer_session
        else:
            level = ORT_LEVEL[variant]
            _ort_variant(src, level, path)
        seconds = time.perf_counter() - t0
        built[variant] = BuiltVariant(variant, path, level, seconds, GraphIndex(load_graph(path), path), src)
    return built


def _ort_variant(src: Path, level: str, dst: Path) -> None:
    from ..runtime.ortinfer import make_session

    with runs.atomic_path(dst) as tmp:
        session = make_session(src, threads=1, graph_optimization=level, optimized_model_path=tmp)
        del session


def transformer_variant(src: Path, dst: Path, cfg: FusionConfig, num_heads: int, hidden_size: int,
                         model_type: Optional[str] = None, options_off: Sequence[str] = (),
                         session_off: Sequence[str] = ()) -> None:
    """The transformer optimizer's graph of ``src`` written to ``dst``. ``session_off``: session optimizers the
    graph records for its sessions to disable, so none fuses a left-out family back."""
    model_type = model_type or (cfg.model_type if cfg.model_type != "auto" else "bert")
    optimize_model, FusionOptions = transformers_optimizer(FusionError)
    options = FusionOptions(model_type)
    for flag in options_off:
        if not hasattr(options, flag):
            import onnxruntime

            raise FusionError(f"FusionOptions has no flag {flag!r} in onnxruntime {onnxruntime.__version__}: this fusion "
                              "family cannot be left out here; keep the full fusion (--fusion full)")
        setattr(options, flag, False)
    try:
        optimizer = optimize_model(str(src), model_type=model_type, num_heads=num_heads, hidden_size=hidden_size,
                                   opt_level=cfg.opt_level, use_gpu=False, optimization_options=options)
    except Exception as exc:
        raise FusionError(
            f"the transformer optimizer failed on {src} (model_type={model_type}, num_heads={num_heads}, "
            f"hidden_size={hidden_size}, opt_level={cfg.opt_level}): {type(exc).__name__}: {exc}. Try opt_level=0, "
            "or pass the model's num_heads and hidden_size"
        ) from exc
    if session_off:
        from ..runtime.graphmeta import mark_disabled_optimizers

        mark_disabled_optimizers(optimizer.model, session_off)
    with runs.atomic_path(dst) as tmp:
        optimizer.save_model_to_file(str(tmp))
