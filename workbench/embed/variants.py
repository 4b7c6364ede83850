"""The embedding graph's variants: ``fused`` and one quantized graph per preset. Dynamic and weight-only presets
quantize the fused graph (what a deployment runs); static QDQ the exported one (``quant_pre_process`` needs shapes
the fused contrib ops lack).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..graph.facts import file_size_mib
from ..runs import layout
from .. import runs
from .export import EmbedExportResult
from .folder import EmbedError, as_embed_error

FP32 = "fp32"
FUSED = "fused"
RESULT_FILE = "embed_variants.json"


@dataclass(frozen=True)
class EmbedVariant:
    name: str
    path: Path
    source: str  # the variant it was built from ("" for the exported graph)
    preset: str = ""
    excluded_nodes: tuple[str, ...] = ()
    seconds: float = 0.0
    size_mib: float = 0.0


@dataclass(frozen=True)
class EmbedVariants:
    variants: list[EmbedVariant]
    notes: list[str] = field(default_factory=list)

    def path(self, name: str) -> Path:
        for v in self.variants:
            if v.name == name:
                return v.path
        raise KeyError(f"no variant {name!r}; built: {[v.name for v in self.variants]}")

    @property
    def names(self) -> list[str]:
        return [v.name for v in self.variants]


def fuse(export: EmbedExportResult, out_path: str | os.PathLike) -> Path:
    """ONNX Runtime's transformer optimizer (BERT fusions)."""
    from ..graph.build import transformer_variant
    from ..graph.variants import FusionConfig, optimizer_model_type

    out_path = Path(out_path)
    transformer_variant(Path(export.onnx_path), out_path, FusionConfig(), export.num_heads, export.hidden_size,
                         optimizer_model_type(export.model_type))
    return out_path


def calibration_feeds(graph: Path, tokenizer, texts: Sequence[str], max_length: int, batch_size: int = 8) -> list[dict]:
    """Batches all padded to the longest text: the histogram calibrators stack them."""
    from ..runtime.ortinfer import make_feed, make_session

    texts = list(texts)[: (len(texts) // batch_size) * batch_size]
    if not texts:
        raise EmbedError(f"static quantization needs at least {batch_size} calibration texts, got fewer")
    session = make_session(graph)
    longest = max(len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"])
    return [make_feed(session, tokenizer(texts[i:i + batch_size], truncation=True, max_length=longest,
                                         padding="max_length", return_tensors="np"))
            for i in range(0, len(texts), batch_size)]


def embed_quantizer(export: EmbedExportResult, fused: Path, calibration_texts: Sequence[str] = ()):
    """The variants' and the search's :class:`~workbench.quant.quantizer.Quantizer`; nodes are ranked on up to 16 texts."""
    from ..quant.config import QuantMode
    from ..quant.quantizer import Quantizer
    from .encode import OnnxEncoder

    exported, texts, tok = Path(export.onnx_path), list(calibration_texts), export.load_tokenizer()
    kept: dict[tuple, list[dict]] = {}

    def calibration(cfg):
        if cfg.mode is not QuantMode.STATIC:
            return None
        key = (cfg.calibration.samples, cfg.calibration.batch_size)
        if key not in kept:
            kept[key] = calibration_feeds(exported, tok, texts[: key[0]], export.max_length, key[1])
        return kept[key]

    def rank_feeds():
        enc, few = OnnxEncoder(exported, tok, export.max_length), texts[:16]
        return [enc.feed(few[i:i + 4]) for i in range(0, len(few), 4)]

    return Quantizer(lambda cfg: exported if cfg.mode is QuantMode.STATIC else Path(fused), calibration, rank_feeds)


def preset_config(name: str):
    """The preset following this CPU."""
    from ..quant.config import QuantizeError, machine_preset

    with as_embed_error(QuantizeError):
        return machine_preset(name)


def _variant(name: str, preset: str, done, source: str, started: float) -> EmbedVariant:
    return EmbedVariant(name, done.path, source, preset, tuple(done.config.nodes_to_exclude), time.perf_counter() - started,
                        file_size_mib(done.path))


def build_variants(export: EmbedExportResult, presets: Sequence[str], out_dir: str | os.PathLike,
                   calibration_texts: Sequence[str] = (), exclude_worst: int = 0) -> EmbedVariants:
    """``fp32``, ``fused``, one graph per preset and, with ``exclude_worst`` k, ``<preset>+exclude<k>`` (k nodes of
    lowest local SQNR left in FP32)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    configs = {name: preset_config(name) for name in presets}  # every refusal before any work
    exported = Path(export.onnx_path)
    t0 = time.perf_counter()
    fused = fuse(export, out / layout.FUSED_GRAPH)
    built = [EmbedVariant(FP32, exported, "", size_mib=file_size_mib(exported)),
             EmbedVariant(FUSED, fused, FP32, seconds=time.perf_counter() - t0, size_mib=file_size_mib(fused))]
    from ..quant.config import machine_defaults

    notes = [f"INT8 weights on this CPU: {machine_defaults().why}"]  # the presets follow it (preset_config)
    quantizer = embed_quantizer(export, fused, calibration_texts)
    for name, cfg in configs.items():
        src = FUSED if quantizer.source(cfg) == fused else FP32
        t0 = time.perf_counter()
        done = quantizer.quantize(cfg, out / f"model.{name}.onnx")
        built.append(_variant(name, name, done, src, t0))
        if exclude_worst:
            ename = f"{name}+exclude{exclude_worst}"
            t0 = time.perf_counter()
            less = quantizer.without_worst(done, exclude_worst, out / f"model.{ename}.onnx")
            built.append(_variant(ename, name, less, src, t0))
            notes.append(f"{ename}: {less.note}")
    result = EmbedVariants(built, notes)
    runs.save_result(result, out / RESULT_FILE)
    return result
