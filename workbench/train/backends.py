"""The three backends: the module each one trains, the optimizer, what torch.compile did (Dynamo's
own counters), and a failure turned into its cause and fix."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from .config import Backend, Optimizer, TrainConfig
from .ortmodule import FellBackError, first_lines, wrap_ortmodule
from .results import CompileStats


def prepare_model(model, backend: Backend, cfg: TrainConfig, graph_prefix: Optional[Path]):
    if backend is Backend.ORTMODULE:
        return wrap_ortmodule(model, cfg, graph_prefix)
    if backend is Backend.COMPILE:
        import torch

        # An empty Dynamo cache, or a second run in this process reuses the first's compiled code and its
        # start-up and CompileStats show nothing compiled.
        torch._dynamo.reset()
        return torch.compile(model, mode=cfg.compile_mode, dynamic=cfg.compile_dynamic)
    return model


def make_optimizer(params, cfg: TrainConfig):
    import torch

    params = [p for p in params if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]  # biases and LayerNorm weights
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if cfg.optimizer is Optimizer.ORT_FUSED_ADAM:
        from onnxruntime.training.optim import AdamWMode, FusedAdam

        return FusedAdam(groups, lr=cfg.lr, adam_w_mode=AdamWMode.ADAMW_TORCH, eps=1e-8)
    return torch.optim.AdamW(groups, lr=cfg.lr, fused=cfg.optimizer is Optimizer.ADAMW_FUSED or None)


def dynamo_counters() -> dict[str, dict[str, int]]:
    from torch._dynamo.utils import counters

    return {k: dict(v) for k, v in counters.items()}


def compile_stats_since(before: dict[str, dict[str, int]], repairs: Optional[list[str]] = None) -> CompileStats:
    """Dynamo's counters grown since ``before``, with what the workbench repaired in Inductor for the run."""
    after = dynamo_counters()

    def grew(group: str) -> dict[str, int]:
        old = before.get(group, {})
        return {k: v - old.get(k, 0) for k, v in after.get(group, {}).items() if v - old.get(k, 0)}

    frames, stats, breaks = grew("frames"), grew("stats"), grew("graph_break")
    return CompileStats(frames_total=frames.get("total", 0), frames_compiled=frames.get("ok", 0),
                        graphs=stats.get("unique_graphs", 0), graph_breaks=sum(breaks.values()), break_reasons=breaks,
                        repairs=list(repairs or []))


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def explain_failure(exc: BaseException, backend: Backend, cfg: TrainConfig) -> str:
    """Turn an exception from a training step into 'what went wrong, and what to do'."""
    text = f"{type(exc).__name__}: {exc}"
    detail = first_lines(str(exc), 4)
    if isinstance(exc, FellBackError):
        cause = exc.__cause__
        return (
            f"{exc.args[0].split(':')[0]} (fallback policy 'detect' = ORTModule's default, which silently trains in "
            "PyTorch), so this run did not execute in ONNX Runtime and is not an ORTModule result; it was stopped. "
            f"Cause: {explain_failure(cause, backend, cfg) if cause is not None else detail}"
        )
    if backend is Backend.ORTMODULE:
        if "gradient_builder" in text or (cfg.attn_implementation == "sdpa" and "ORTModule" in text):
            sdpa = cfg.attn_implementation == "sdpa"
            return (
                f"ORTModule could not build the gradient graph of the model (attention: {cfg.attn_implementation!r}, "
                f"dropout {'on' if cfg.dropout else 'off'}). "
                + ("transformers' SDPA attention with dropout exports an attention-dropout node whose gradient ONNX "
                   "Runtime cannot build. Fix: load the model with attn_implementation='eager' (the default in "
                   "TrainConfig), or turn dropout off, or train with the eager backend. " if sdpa else
                   "Fix: train with the eager backend, or simplify the model's forward pass. ")
                + f"ONNX Runtime said: {detail}"
            )
        if "Duplicate definition of name (_grad)" in text:
            # Measured on ModernBERT (norm_bias=False); the message says why.
            return (
                "ORTModule could not build the gradient graph: the model has LayerNorms without a bias "
                "(ModernBERT's norm_bias=False), which export with an empty bias input, and onnxruntime-training "
                "1.19.2's gradient builder names the gradient of each empty input '_grad', twice. Fix: train with "
                "the eager or compile backend (export, fusion and INT8 of the trained model work), or set "
                "\"norm_bias\": true in the model's config.json: its LayerNorms then get zero biases (the same "
                "outputs) that ORTModule can differentiate, and are trained with the rest. "
                "ONNX Runtime said: 'This is an invalid model. Error: Duplicate definition of name (_grad).'"
            )
        if "Could not find an implementation" in text:
            return (
                f"ONNX Runtime has no kernel for an op in this graph on {cfg.device} (precision {cfg.precision.value}). "
                "Fix: use precision='fp32' with ortmodule, or another backend. "
                f"ONNX Runtime said: {detail}"
            )
        if "exporting the PyTorch model to ONNX" in text or "UnsupportedOperatorError" in text:
            op = re.search(r"Exporting the operator '([^']+)' to ONNX opset version (\d+) is not supported", text)
            what = (f"the operator {op.group(1)} has no ONNX export at opset {op.group(2)}" if op
                    else f"an op or construct without an ONNX equivalent at opset {cfg.opset}")
            return (
                f"ORTModule could not export the model to ONNX: {what}. Fix: replace that op in the model (or "
                "register an ONNX symbolic for it), try another opset (TrainConfig(opset=...)), or train with the "
                f"eager backend. Export error: {_last_line(text)}"
            )
        return f"ORTModule failed: {type(exc).__name__}: {detail}. Fix: see the error above, or train with the eager backend."
    if backend is Backend.COMPILE:
        return (
            f"torch.compile failed: {type(exc).__name__}: {detail}. Fix: try compile_mode='default', "
            "compile_dynamic=False with pad_to_max=True, or train with the eager backend."
        )
    return f"training failed: {type(exc).__name__}: {detail}"
