"""The embedding graph's variants, built with the workbench's own graph and quantization functions:
``fused`` (ONNX Runtime's transformer optimizer, :mod:`workbench.graph.build`) and one quantized
graph per preset (:func:`workbench.quant.quantize.quantize_graph`: dynamic, per-channel, the
fp32-embeddings preset, static QDQ with calibration on real texts, weight-only), optionally with the
nodes of the worst per-node error left in FP32 (:mod:`workbench.quant.sqnr`) and re-quantized.

Dynamic and weight-only presets quantize the fused graph (what a deployment runs); static QDQ
quantizes the exported graph (``quant_pre_process`` needs shapes the fused contrib ops lack).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..runs import layout
from .. import runs
from .export import EmbedExportResult
from .folder import EmbedError

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


def graph_size_mib(path: Path) -> float:
    extra = path.with_name(path.name + ".data")
    return (path.stat().st_size + (extra.stat().st_size if extra.exists() else 0)) / 2**20


def fuse(export: EmbedExportResult, out_path: str | os.PathLike) -> Path:
    """The exported graph through ONNX Runtime's transformer optimizer (BERT fusions)."""
    from ..graph.build import transformer_variant
    from ..graph.variants import FusionConfig, optimizer_model_type

    out_path = Path(out_path)
    transformer_variant(Path(export.onnx_path), out_path, FusionConfig(), export.num_heads, export.hidden_size,
                         optimizer_model_type(export.model_type))
    return out_path


def calibration_feeds(graph: Path, tokenizer, texts: Sequence[str], max_length: int, batch_size: int = 8) -> list[dict]:
    """Equal-shape batches of real texts for static calibration (padded to the longest of them: the
    histogram calibrators stack batches)."""
    from ..runtime.ortinfer import make_feed, make_session

    texts = list(texts)[: (len(texts) // batch_size) * batch_size]
    if not texts:
        raise EmbedError(f"static quantization needs at least {batch_size} calibration texts, got fewer")
    session = make_session(graph)
    longest = max(len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"])
    return [make_feed(session, tokenizer(texts[i:i + batch_size], truncation=True, max_length=longest,
                                         padding="max_length", return_tensors="np"))
            for i in range(0, len(texts), batch_size)]


class VariantBuilder:
    """Quantizes one embedding export again and again with the workbench's quantization functions
    (the search and :func:`build_variants` share it): dynamic and weight-only configurations quantize
    the fused graph, static ones the exported graph, calibrated on ``calibration_texts`` (computed
    once); :meth:`worst` ranks a quantized graph's nodes by their local SQNR on a few of those texts."""

    def __init__(self, export: EmbedExportResult, fused: Path, calibration_texts: Sequence[str] = ()) -> None:
        self.export = export
        self.exported = Path(export.onnx_path)
        self.fused = Path(fused)
        self.calibration_texts = list(calibration_texts)
        self.tokenizer = export.load_tokenizer()
        self._feeds: dict[str, list[dict]] = {}

    def source(self, cfg) -> Path:
        from ..quant.config import QuantMode

        return self.exported if cfg.mode is QuantMode.STATIC else self.fused

    def quantize(self, cfg, out_path: Path):
        """(the quantized graph, the float graph its nodes are named after, the configuration used): a
        configuration with ``exclude_worst`` is quantized, ranked and quantized again with those nodes
        in FP32 (as :func:`workbench.quant.run.run_quantization` does), and the nodes it chose are in
        the configuration returned."""
        from ..quant.config import QuantMode
        from ..quant.quantize import quantize_graph

        feeds = None
        if cfg.mode is QuantMode.STATIC:
            if "static" not in self._feeds:
                self._feeds["static"] = calibration_feeds(self.exported, self.tokenizer, self.calibration_texts[: cfg.calibration.samples],
                                                          self.export.max_length, cfg.calibration.batch_size)
            feeds = self._feeds["static"]
        qpath, float_path = quantize_graph(self.source(cfg), cfg, out_path, feeds)
        if not cfg.exclude_worst:
            return qpath, float_path, cfg
        worst = self.worst(cfg, float_path, qpath, cfg.exclude_worst)
        used = dataclasses.replace(cfg, nodes_to_exclude=tuple(dict.fromkeys([*cfg.nodes_to_exclude, *worst])))
        qpath, float_path = quantize_graph(self.source(cfg), used, out_path, feeds)
        return qpath, float_path, used

    def worst(self, cfg, float_path: Path, quant_path: Path, k: int) -> list[str]:
        """The ``k`` quantized nodes of the lowest local SQNR on up to 16 calibration texts."""
        from ..quant.sqnr import node_errors, worst_nodes

        if "rank" not in self._feeds:
            if not self.calibration_texts:
                raise EmbedError("excluding the worst nodes ranks them on calibration texts, and none were given")
            from .encode import OnnxEncoder

            enc = OnnxEncoder(self.exported, self.tokenizer, self.export.max_length)
            texts = self.calibration_texts[:16]
            self._feeds["rank"] = [enc.feed(texts[i:i + 4]) for i in range(0, len(texts), 4)]
        return worst_nodes(node_errors(float_path, quant_path, self._feeds["rank"], cfg.resolved_op_types()), k, "local")

    @property
    def ranked_on(self) -> int:
        return min(16, len(self.calibration_texts))


def preset_config(name: str):
    """``QuantConfig.preset(name)``, its refusal an :class:`EmbedError` (one line, with the reason)."""
    from ..quant import QuantConfig
    from ..quant.config import QuantizeError

    try:
        return QuantConfig.preset(name)
    except QuantizeError as exc:
        raise EmbedError(str(exc)) from exc


def build_variants(export: EmbedExportResult, presets: Sequence[str], out_dir: str | os.PathLike,
                   calibration_texts: Sequence[str] = (), exclude_worst: int = 0,
                   nodes_to_exclude: Sequence[str] = ()) -> EmbedVariants:
    """``fp32`` (the export), ``fused`` and one graph per preset name (``QuantConfig.presets()``) in
    ``out_dir``. ``exclude_worst``: per preset, also build ``<preset>+exclude<k>``, with the ``k``
    quantized nodes of the lowest local SQNR on the calibration texts left in FP32.
    ``nodes_to_exclude``: nodes every preset leaves in FP32."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    configs = {name: preset_config(name) for name in presets}  # every refusal before any work
    exported = Path(export.onnx_path)
    t0 = time.perf_counter()
    fused = fuse(export, out / layout.FUSED_GRAPH)
    built = [EmbedVariant(FP32, exported, "", size_mib=graph_size_mib(exported)),
             EmbedVariant(FUSED, fused, FP32, seconds=time.perf_counter() - t0, size_mib=graph_size_mib(fused))]
    notes: list[str] = []
    builder = VariantBuilder(export, fused, calibration_texts)
    for name, cfg in configs.items():
        if nodes_to_exclude:
            cfg = dataclasses.replace(cfg, nodes_to_exclude=tuple(nodes_to_exclude))
        src = FUSED if builder.source(cfg) == fused else FP32
        t0 = time.perf_counter()
        qpath, float_path, cfg = builder.quantize(cfg, out / f"model.{name}.onnx")
        built.append(EmbedVariant(name, qpath, src, name, tuple(cfg.nodes_to_exclude), time.perf_counter() - t0, graph_size_mib(qpath)))
        if exclude_worst:
            worst = builder.worst(cfg, float_path, qpath, exclude_worst)
            ecfg = dataclasses.replace(cfg, nodes_to_exclude=tuple(dict.fromkeys([*cfg.nodes_to_exclude, *worst])))
            ename = f"{name}+exclude{exclude_worst}"
            t0 = time.perf_counter()
            epath, _, _ = builder.quantize(dataclasses.replace(ecfg, exclude_worst=0), out / f"model.{ename}.onnx")
            built.append(EmbedVariant(ename, epath, src, name, tuple(ecfg.nodes_to_exclude), time.perf_counter() - t0,
                                      graph_size_mib(epath)))
            notes.append(f"{ename}: left in FP32 the {exclude_worst} nodes of lowest local SQNR on {builder.ranked_on} "
                         f"calibration texts: {list(worst)}")
    result = EmbedVariants(built, notes)
    runs.save_result(result, out / RESULT_FILE)
    return result
