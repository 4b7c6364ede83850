"""PyTorch's GPU peers of the ONNX Runtime CUDA variants (what a PyTorch user would deploy instead), on the same batches.

``eager_fp32``: the model as loaded; ``sdpa_fp16``: reloaded with SDPA attention, float16 weights;
``compile_fp16``: ``sdpa_fp16`` under ``torch.compile(mode="reduce-overhead")`` (CUDA graphs, the peer of ONNX
Runtime's). Every timed call ends in ``torch.cuda.synchronize()`` (the kernels' time, not the launch's);
compilation is timed apart.
"""

from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

from ..core.latency import measure
from ..data.batches import model_inputs
from ..runtime.ortinfer import ShapeLatency, check_shapes, synthetic_batch

PEERS = ("eager_fp32", "sdpa_fp16", "compile_fp16")


def torch_gpu_latency(model, shapes: Sequence[Sequence[int]], device: str = "cuda", peers: Sequence[str] = PEERS,
                      warmup: int = 10, repeats: int = 100, max_seconds: Optional[float] = None, vocab_size: int = 1000,
                      sdpa_loader: Optional[Callable[[], object]] = None) -> tuple[dict[str, list[ShapeLatency]], list[str]]:
    """``sdpa_loader`` returns the same weights with SDPA attention (None: the FP16 peers are skipped with a note)."""
    import torch

    from ..runtime.device import require_device

    device = require_device(device)
    if device == "cpu":
        raise ValueError("torch_gpu_latency times PyTorch on a CUDA device; for the CPU use perf.speed.time_side_by_side")
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise ValueError(f"unknown PyTorch peer(s) {unknown}; peers are {list(PEERS)}")
    shapes = check_shapes(shapes)
    out: dict[str, list[ShapeLatency]] = {}
    notes: list[str] = []

    def inputs(base, batch: int, seq: int) -> dict:  # the plain module's (model_inputs sees through a compiled wrapper)
        return model_inputs(base, {k: torch.from_numpy(v).to(device) for k, v in synthetic_batch(batch, seq, vocab_size).items()})

    def time_module(module, base) -> list[ShapeLatency]:
        res = []
        with torch.inference_mode():
            for batch, seq in shapes:
                enc = inputs(base, batch, seq)

                def call():
                    module(**enc)
                    torch.cuda.synchronize(device)

                res.append(ShapeLatency(batch, seq, measure(call, warmup=warmup, repeats=repeats, max_seconds=max_seconds)))
        return res

    module = getattr(model, "model", model).eval()
    if "eager_fp32" in peers:
        module.to(device)
        out["eager_fp32"] = time_module(module, module)
        module.to("cpu")
    wanted_fp16 = [p for p in peers if p in ("sdpa_fp16", "compile_fp16")]
    if wanted_fp16:
        loaded = sdpa_loader() if sdpa_loader is not None else None
        if loaded is None:
            notes.append("PyTorch SDPA FP16 and torch.compile not timed: the model cannot be reloaded with SDPA attention")
            return out, notes
        sdpa = getattr(loaded, "model", loaded).eval().to(device=device, dtype=torch.float16)
        if "sdpa_fp16" in peers:
            out["sdpa_fp16"] = time_module(sdpa, sdpa)
        if "compile_fp16" in peers:
            compiled = torch.compile(sdpa, mode="reduce-overhead")
            t0 = time.perf_counter()
            with torch.inference_mode():
                for batch, seq in shapes:  # compile (and record the CUDA graphs) for every shape before timing
                    enc = inputs(sdpa, batch, seq)
                    for _ in range(3):
                        compiled(**enc)
            torch.cuda.synchronize(device)
            notes.append(f"torch.compile(mode='reduce-overhead') start-up (compile + CUDA-graph recording, "
                         f"{len(shapes)} shape(s)): {time.perf_counter() - t0:.1f} s, not in the medians")
            out["compile_fp16"] = time_module(compiled, sdpa)
            del compiled
        sdpa.to("cpu")
        del sdpa
    torch.cuda.empty_cache()
    return out, notes
