"""What a fusion starts from: an export result or a bare ONNX file (its own reference), and the PyTorch model
timed as the eager baseline. :func:`export_of` is the one way to find the export a graph came from.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from .. import runs
from ..runs.layout import FUSION_FILE
from .export import EXPORT_FILE, TOKENIZER_DIR, ExportConfig, ExportResult, load_export
from .facts import load_graph
from .provenance import GraphIndex
from .validate import select_examples
from .variants import FusionConfig


@dataclass(frozen=True)
class FusionSource:
    source: Path  # the exported graph
    graph: GraphIndex  # ... parsed once
    export: Optional[ExportResult]
    export_path: Optional[Path]
    tokenizer: Any
    examples: Any
    reference: Optional[np.ndarray]  # PyTorch's logits saved at export; None for a bare ONNX file
    validation_cfg: ExportConfig
    attn: str
    num_layers: int
    num_heads: int
    hidden_size: int
    vocab_size: int
    notes: tuple[str, ...]
    architecture: str = ""  # the Hugging Face config.model_type, when the export recorded it


def graph_file(graph: Any) -> Path:
    """The ONNX file a graph argument names (a path, an ``ExportResult``, a ``FusionReport``'s chosen graph)."""
    if isinstance(graph, (str, os.PathLike)):
        return Path(graph)
    if isinstance(graph, ExportResult):
        return Path(graph.onnx_path)
    # a FusionReport (imported by name it would be an import circle: fusion reads this module)
    for attr in ("chosen_path", "fused_path", "source_path", "onnx_path"):
        if getattr(graph, attr, None) is not None:
            return Path(getattr(graph, attr))
    raise TypeError(f"expected the graph as an ONNX path, an ExportResult or a FusionReport, got {type(graph).__name__}")


def export_of(graph: Any, export: Any = None) -> Optional[ExportResult]:
    """The export a graph came from: given, named, or recorded by the ``export.json``/``fusion.json`` beside an
    ONNX file for that very file. No guessing from folder positions: otherwise None."""
    if isinstance(export, ExportResult):
        return export
    if export is not None:
        return load_export(export)
    if isinstance(graph, ExportResult):
        return graph
    if isinstance(getattr(graph, "export", None), ExportResult):  # a result that carries its export
        return graph.export
    if not isinstance(graph, (str, os.PathLike)):
        named = getattr(graph, "export_path", None)  # a FusionReport records its export
        return load_export(named) if named is not None and Path(named).is_file() else None
    path = Path(graph).resolve()
    if (path.parent / EXPORT_FILE).is_file():
        beside = load_export(path.parent)
        if Path(beside.onnx_path).resolve() == path:
            return beside
    if (path.parent / FUSION_FILE).is_file():
        fusion = runs.read_result_json(path.parent / FUSION_FILE)  # read as JSON: fusion.py imports this module
        named = fusion.get("export_path")
        graphs = [fusion.get("fused_path"), (fusion.get("choice") or {}).get("path")]
        if named is not None and any(g and Path(g).resolve() == path for g in graphs) and Path(named).is_file():
            return load_export(named)
    return None


def _source_of(src) -> tuple[Optional[ExportResult], Optional[Path], Optional[Path]]:
    """(export result, its export.json, the bare ONNX path when there is none)."""
    if isinstance(src, ExportResult):
        return src, Path(src.out_dir) / EXPORT_FILE, None
    if not isinstance(src, (str, os.PathLike)):
        raise TypeError(f"expected an ExportResult, an export folder or an ONNX path, got {type(src).__name__}")
    path = Path(src)
    if path.is_dir() or path.name.endswith(".json"):
        return load_export(path), (path if path.name.endswith(".json") else path / EXPORT_FILE), None
    if not path.is_file():
        raise FileNotFoundError(f"no ONNX graph or export result at {path}: run the export first (workbench export)")
    found = export_of(path)
    if found is not None and Path(found.onnx_path).resolve() == path.resolve():  # the export's own graph
        return found, path.parent / EXPORT_FILE, None
    return None, None, path


def resolve_source(src, cfg: FusionConfig, data=None) -> FusionSource:
    """An export (result, folder or ``export.json``) or an ONNX file as a :class:`FusionSource`."""
    export, export_path, bare = _source_of(src)
    changes = {k: v for k, v in (("tolerance", cfg.tolerance), ("validation_examples", cfg.validation_examples)) if v is not None}
    if export is not None:
        source = Path(export.onnx_path)
        vcfg = dataclasses.replace(export.config, **changes)
        info = export.model_info
        return FusionSource(source, GraphIndex(load_graph(source), source), export, export_path, export.load_tokenizer(),
                            export.load_examples(), export.reference_logits(), vcfg, export.attn_implementation,
                            info.num_layers, cfg.num_heads or info.num_heads, cfg.hidden_size or info.hidden_size,
                            info.vocab_size or 1000, (), info.model_type)

    # A bare ONNX file: tokenizer beside it or MiniLM's, data given or the quick reviews; the
    # reference is the unoptimized graph itself (no PyTorch model to compare with).
    from ..data.load import DataConfig, load_data
    from ..models.load import load_tokenizer

    notes = []
    tok_dir = bare.parent / TOKENIZER_DIR
    if tok_dir.is_dir():
        from ..models.compat import load_tokenizer as _load_tokenizer

        tokenizer = _load_tokenizer(tok_dir)
    else:
        tokenizer = load_tokenizer("minilm")
        notes.append(f"no {TOKENIZER_DIR}/ folder beside {bare.name}: used MiniLM's tokenizer")
    data = data if data is not None else load_data(DataConfig.quick())
    vcfg = ExportConfig(**changes)
    examples = select_examples(data, vcfg)
    graph = GraphIndex(load_graph(bare), bare)
    num_layers = sum(1 for n in graph.nodes if n.op_type == "Softmax")
    notes.append("no export result: variants are validated against the unoptimized graph, not PyTorch; "
                 f"{num_layers} attention layers inferred from the Softmax count")
    return FusionSource(bare, graph, None, None, tokenizer, examples, None, vcfg, "", num_layers, cfg.num_heads,
                        cfg.hidden_size, getattr(tokenizer, "vocab_size", 1000) or 1000, tuple(notes))


def reload_model(exp: Optional[ExportResult], attn: str):
    """The exported PyTorch model loaded again with ``attn`` attention, or None when it cannot be."""
    from ..models.load import BUILTIN_MODELS, load_model

    if exp is None:
        return None
    n = len(exp.class_names)
    if exp.model_name in BUILTIN_MODELS:
        return load_model(exp.model_name, num_labels=n, attn_implementation=attn)
    if Path(exp.model_source).is_dir():
        return load_model(exp.model_source, num_labels=n, id2label=dict(enumerate(exp.class_names)),
                          attn_implementation=attn)
    return None


def pytorch_model(source: FusionSource, model=None):
    """The PyTorch model to time (``model`` when given, else the exported one reloaded), or (None, reason)."""
    if model is not None:
        return model, ""
    exp = source.export
    if exp is None:
        return None, "no PyTorch model to time: pass model=... (a LoadedModel) or fuse an export result"
    loaded = reload_model(exp, exp.attn_implementation if exp.attn_implementation in ("eager", "sdpa") else "eager")
    if loaded is None:
        return None, (f"PyTorch eager not timed: the exported model ({exp.model_source}) cannot be reloaded; "
                      "pass model=... to run_fusion")
    return loaded, ""
