"""Tracing a PyTorch classifier into an ONNX file: torch 2.6's TorchScript exporter and its quirks.

:func:`export_onnx` traces the model on a real batch (inputs named in ``forward()``'s order,
dynamic ``batch``/``sequence`` axes) and writes the graph atomically. Around the exporter:
:func:`standard_symbolics` takes out the symbolics ORTModule registers process-wide,
:func:`_without_ir_dump` keeps a failed export from printing its whole IR graph, and
:func:`_explain_failure` turns the exporter's exception into an :class:`ExportError` with options
(another opset, eager attention).

This module knows torch, not the stage: :mod:`workbench.graph.export` holds the configuration and
the result.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from .. import runs
from .config import OPSET_RANGE

if TYPE_CHECKING:
    from .config import ExportConfig


class ExportError(RuntimeError):
    """Export failed. ``operator`` names the unsupported operator when there is one, and
    ``options`` lists what to try (another opset, eager attention, ...)."""

    def __init__(self, message: str, operator: Optional[str] = None, options: Sequence[str] = ()):
        self.operator = operator
        self.options = list(options)
        text = message
        if self.options:
            text += "\nOptions:\n" + "\n".join(f"  - {o}" for o in self.options)
        super().__init__(text)


def _explain_failure(exc: BaseException, cfg: "ExportConfig", attn: str) -> ExportError:
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


@contextlib.contextmanager
def standard_symbolics():
    """Export with torch's own ONNX symbolics, not the ones ORTModule registers for training.

    Building an ``ORTModule`` registers custom symbolics process-wide (``embedding`` as a
    ``com.microsoft::ATen`` node, ``gelu`` as the contrib ``Gelu``, ...) and never removes them.
    An inference export made afterwards in the same process (a notebook that fine-tunes with
    ORTModule, then exports) would then hold ATen nodes: the transformer optimizer cannot fuse
    EmbedLayerNormalization, and the graph needs ORTModule's ATen executor to run at all. While
    our export runs, those overrides are taken out of torch's registry; they are put back after.
    """
    from torch.onnx._internal import registration

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
def _without_ir_dump():
    """Keep torch 2.6 from printing the whole TorchScript IR graph when an export fails.

    torch 2.6's ``torch.onnx.utils.setup_onnx_logging`` tests the *function*
    ``_C._jit_is_onnx_log_enabled`` instead of calling it, so ONNX logging is always switched on
    during an export, and a failed export prints its IR graph (hundreds of lines, on stdout)
    before raising. While our export runs, that helper is replaced by one that calls the function;
    logging then stays as the user set it (off by default). The exception is untouched.
    """
    import torch
    import torch.onnx.utils as onnx_utils

    original = getattr(onnx_utils, "setup_onnx_logging", None)
    if original is None:  # another torch version: nothing to fix
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

    onnx_utils.setup_onnx_logging = setup_onnx_logging
    try:
        yield
    finally:
        onnx_utils.setup_onnx_logging = original


def export_onnx(loaded, path: Path, cfg: "ExportConfig", sample_texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """Trace ``loaded.model`` on a real batch and write the graph to ``path`` (atomically).

    Returns the graph's input and output names. Raises :class:`ExportError` with options.
    """
    import torch

    from ..data.batches import encode, model_inputs

    model = loaded.model
    model.eval()
    enc = encode(loaded.tokenizer, list(sample_texts)[:2] or ["a sample sentence"], cfg.max_length)
    # The TorchScript exporter binds inputs to forward()'s signature and names graph inputs in
    # that order (input_ids, attention_mask, token_type_ids for BERT), whatever order the
    # tokenizer produced them in: name them in signature order or the names get swapped. And
    # only what forward() takes: DistilBERT and MPNet have no token_type_ids, whatever the
    # tokenizer produces (model_inputs).
    enc = model_inputs(model, enc)
    names = list(enc)
    dynamic = None
    if cfg.dynamic_axes:
        dynamic = {k: {0: "batch", 1: "sequence"} for k in names}
        dynamic["logits"] = {0: "batch"}
    attn = getattr(loaded, "attn_implementation", "eager")
    try:
        with runs.atomic_path(path) as tmp, torch.no_grad(), _without_ir_dump(), standard_symbolics():
            torch.onnx.export(
                model, (), str(tmp), kwargs=enc, input_names=names, output_names=["logits"],
                dynamic_axes=dynamic, opset_version=cfg.opset, do_constant_folding=cfg.do_constant_folding,
                dynamo=False,
            )
    except (ExportError, OSError):  # an OSError is the disk (full, read-only), not the exporter: said as such
        raise
    except Exception as exc:  # torch raises UnsupportedOperatorError, OnnxExporterError, RuntimeError, ...
        raise _explain_failure(exc, cfg, attn) from exc
    return names, ["logits"]
