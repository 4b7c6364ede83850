"""Tracing a PyTorch classifier into an ONNX file: torch's TorchScript exporter and its quirks, or the dynamo
exporter (``torch.export``) where asked for or where torch no longer ships TorchScript.

:func:`resolve_exporter` prefers TorchScript while torch ships it (deprecated since torch 2.9, still in 2.14):
ONNX Runtime's BERT fusions match its graphs and not the dynamo exporter's.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from .. import runs
from .config import OPSET_RANGE
from ..runtime.exporters import torchscript_available, torchscript_registration

if TYPE_CHECKING:
    from .config import ExportConfig


class ExportError(RuntimeError):
    """Export failed; ``options`` lists what to try (another opset, eager attention, ...)."""

    def __init__(self, message: str, operator: Optional[str] = None, options: Sequence[str] = ()):
        self.operator = operator
        self.options = list(options)
        text = message
        if self.options:
            text += "\nOptions:\n" + "\n".join(f"  - {o}" for o in self.options)
        super().__init__(text)


def explain_export_failure(exc: BaseException, cfg: "ExportConfig", attn: str) -> ExportError:
    text = str(exc)
    op = re.search(r"operator '([^']+)'", text)
    operator = op.group(1) if op else None
    added = re.search(r"added in version (\d+)", text)
    options = []
    if added:
        options.append(f"export with opset {added.group(1)} or later: ExportConfig(opset={added.group(1)}) "
                       f"(or `workbench export --opset {added.group(1)}`)")
    elif operator:
        other = [o for o in (17, 18, 14) if o != cfg.opset][0]
        options.append(f"try another opset, e.g. ExportConfig(opset={other}) (allowed {OPSET_RANGE[0]}..{OPSET_RANGE[1]})")
    if attn != "eager" or (operator and "attention" in operator):
        options.append("load the model with eager attention: ExportConfig(attn_implementation='eager') or "
                       "load_model(..., attn_implementation='eager') (it is also what ONNX Runtime fuses)")
    if not options:
        options.append(f"try another opset (allowed {OPSET_RANGE[0]}..{OPSET_RANGE[1]}) or eager attention")
    options.append("if the model has custom layers, export a standard Hugging Face architecture "
                   "(BERT, RoBERTa, DistilBERT, ...) or register a symbolic for the operator")
    where = f"operator {operator!r} cannot be exported" if operator else "the export failed"
    return ExportError(
        f"ONNX export failed at opset {cfg.opset} with {attn} attention: {where}. "
        f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}",
        operator=operator, options=options,
    )


def _is_onnxruntime_symbolic(fn) -> bool:
    module = getattr(fn, "__module__", "") or ""
    return module == "onnxruntime" or module.startswith("onnxruntime.")


def resolve_exporter(asked: str) -> str:
    """``"torchscript"`` or ``"dynamo"``; ``"auto"`` is TorchScript while torch ships it (module doc)."""
    if asked == "auto":
        return "torchscript" if torchscript_available() else "dynamo"
    if asked == "torchscript" and not torchscript_available():
        import torch

        raise ExportError(f"exporter 'torchscript': torch {torch.__version__} no longer ships the TorchScript exporter",
                          options=["export with the dynamo exporter: ExportConfig(exporter='dynamo') or `workbench export "
                                   "--exporter dynamo` (ONNX Runtime then fuses no Attention: the fusion report says why)",
                                   "or use the training stack (`make setup`: torch 2.6), whose exporter is TorchScript"])
    return asked


@contextlib.contextmanager
def standard_symbolics():
    """Export with torch's own ONNX symbolics: an ``ORTModule`` registers ATen symbolics process-wide and never
    removes them, so a later export would hold ATen nodes (no EmbedLayerNormalization fusion). They are taken
    out of torch's registry while the export runs and put back after."""
    registration = torchscript_registration()
    if registration is None:  # no TorchScript exporter in this torch: nothing of ORTModule's to take out
        yield []
        return
    removed = []
    for group in list(registration.registry._registry.values()):
        overrides = getattr(getattr(group, "_functions", None), "_overrides", {})
        for opset, fn in list(overrides.items()):
            if _is_onnxruntime_symbolic(fn):
                group.remove_custom(opset)
                removed.append((group, opset, fn))
    try:
        yield [f"{g._name}@{o}" for g, o, _ in removed]
    finally:
        for group, opset, fn in removed:
            group.add_custom(fn, opset)


@contextlib.contextmanager
def torchscript_export_warnings():
    """Warnings a TorchScript export of an encoder raises that say nothing about this graph: the exporter's
    deprecation (chosen on purpose: it keeps ONNX Runtime's fusions), transformers 5's unused negative mask
    indices and its padding bool fixed by the tracer. The validation after every export catches a wrong graph."""
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export.*")
        warnings.filterwarnings("ignore", message=".*Exporting aten::index operator of advanced indexing.*")
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning, module=r"transformers\.masking_utils")
        yield


@contextlib.contextmanager
def without_ir_dump():
    """Keep torch 2.6 from printing the whole IR graph when an export fails: its ``setup_onnx_logging`` tests the
    *function* ``_C._jit_is_onnx_log_enabled`` instead of calling it; while ours runs, a helper calls it."""
    import importlib

    import torch

    # torch 2.6 has the exporter in torch.onnx.utils; from 2.9 in torch.onnx._internal.torchscript_exporter.utils
    modules = []
    for name in ("torch.onnx._internal.torchscript_exporter.utils", "torch.onnx.utils"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if getattr(module, "setup_onnx_logging", None) is not None:
            modules.append((module, module.setup_onnx_logging))
    if not modules:  # another torch version: nothing to fix
        yield
        return

    @contextlib.contextmanager
    def setup_onnx_logging(verbose: bool):
        # Off unless asked for, even if something earlier in the process (an ORTModule export)
        # switched it on and left it on; the previous state comes back afterwards.
        was_enabled = torch._C._jit_is_onnx_log_enabled()
        torch._C._jit_set_onnx_log_enabled(bool(verbose))
        try:
            yield
        finally:
            torch._C._jit_set_onnx_log_enabled(was_enabled)

    for module, _ in modules:
        module.setup_onnx_logging = setup_onnx_logging
    try:
        yield
    finally:
        for module, original in modules:
            module.setup_onnx_logging = original


def export_onnx(loaded, path: Path, cfg: "ExportConfig", sample_texts: Sequence[str], exporter: str) -> list[str]:
    """Trace ``loaded.model`` on a real batch, write the graph to ``path``; its output names."""
    import torch

    from ..data.batches import encode, model_inputs

    model = loaded.model
    model.eval()
    enc = encode(loaded.tokenizer, list(sample_texts)[:2] or ["a sample sentence"], cfg.max_length)
    # The TorchScript exporter binds inputs in forward()'s order, whatever order the tokenizer produced them in
    # (named otherwise, they get swapped), and only what forward() takes (DistilBERT and MPNet: no token_type_ids).
    enc = model_inputs(model, enc)
    names = list(enc)
    dynamic = None
    if cfg.dynamic_axes:
        dynamic = {k: {0: "batch", 1: "sequence"} for k in names}
        dynamic["logits"] = {0: "batch"}
    attn = getattr(loaded, "attn_implementation", "eager")
    try:
        if exporter == "dynamo":
            _export_dynamo(model, enc, names, path, cfg)
        else:
            with runs.atomic_path(path) as tmp, torch.no_grad(), without_ir_dump(), standard_symbolics(), \
                    torchscript_export_warnings():
                torch.onnx.export(
                    model, (), str(tmp), kwargs=enc, input_names=names, output_names=["logits"],
                    dynamic_axes=dynamic, opset_version=cfg.opset, do_constant_folding=cfg.do_constant_folding,
                    dynamo=False,
                )
    except (ExportError, OSError):  # an OSError is the disk (full, read-only), not the exporter: said as such
        raise
    except Exception as exc:  # torch raises UnsupportedOperatorError, OnnxExporterError, RuntimeError, ...
        raise explain_export_failure(exc, cfg, attn) from exc
    return ["logits"]


def _export_dynamo(model, enc, names: list[str], path: Path, cfg: "ExportConfig") -> None:
    """torch's dynamo exporter (the default from torch 2.9), one file: the logits TorchScript's give (within 1e-7
    on MiniLM), but an attention ONNX Runtime's BERT fusions do not find (:mod:`workbench.graph.diagnose` says so)."""
    import io
    import logging

    import torch
    from torch.export import Dim

    shapes = {k: ({0: Dim.DYNAMIC, 1: Dim.DYNAMIC} if cfg.dynamic_axes else None) for k in names}
    # onnxscript's version-converter notes and torch's "torchvision is not installed. Skipping ..." lines
    quiet = [logging.getLogger(name) for name in ("onnxscript", "onnx_ir", "torch.onnx", "torch.export")]
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(logging.ERROR)
    try:
        with runs.atomic_path(path) as tmp, torch.no_grad(), warnings.catch_warnings(), \
                contextlib.redirect_stdout(io.StringIO()):  # its progress lines ("[torch.onnx] Obtain model graph ...")
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (), str(tmp), kwargs=enc, input_names=names, output_names=["logits"],
                              dynamic_shapes=shapes, opset_version=cfg.opset, dynamo=True, external_data=False,
                              optimize=True)
    finally:
        for q, level in zip(quiet, levels):
            q.setLevel(level)
