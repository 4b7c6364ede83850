"""Opening a graph in ONNX Runtime (:func:`make_session`), and :class:`InferenceError`, what a graph that
cannot be opened or fed raises; :mod:`workbench.runtime.ortinfer` feeds and times the sessions."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence

from ..core.threads import cap_session_threads

GRAPH_OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")
EXECUTION_MODES = ("sequential", "parallel")


class InferenceError(ValueError):
    """A graph that cannot be opened or fed; the message says what was wrong and what to do."""


def ort_level(name: str):
    import onnxruntime as ort

    levels = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    key = getattr(name, "value", name)
    if key not in levels:
        raise InferenceError(
            f"graph_optimization must be one of {list(GRAPH_OPTIMIZATION_LEVELS)}, got {name!r}; "
            "use 'disabled' to run the graph exactly as written, 'all' for ONNX Runtime's default"
        )
    return levels[key]


def make_session(
    onnx_path: str | os.PathLike | bytes,
    threads: Optional[int] = None,
    graph_optimization: str = "all",
    optimized_model_path: str | os.PathLike | None = None,
    allow_spinning: bool = True,
    keep_spinning: bool = False,
    device: str = "cpu",
    cuda_graph: bool = False,
    profile_prefix: Optional[str] = None,
    disabled_optimizers: Optional[Sequence[str]] = None,
    memory_pattern: bool = True,
    cpu_arena: bool = True,
    execution_mode: str = "sequential",
):
    """Open ``onnx_path`` (or a serialized model) in an ``onnxruntime.InferenceSession`` on ``device``.

    Spinning: by default worker threads busy-wait *during* a run (which matters most for small graphs) and stop
    the moment it returns, so an idle session takes no core from what runs next; ``keep_spinning=True`` is
    ONNX Runtime's own default. ``disabled_optimizers``: None takes those the graph asks for."""
    from .device import require_device, session_providers
    import onnxruntime as ort

    device = require_device(device)  # CUDA asked for and absent: said first, whatever else is wrong
    in_memory = isinstance(onnx_path, bytes)
    path = Path("<the graph given in memory>" if in_memory else onnx_path)
    if not in_memory and not path.is_file():
        raise InferenceError(f"no ONNX graph at {path}: export one first (workbench export, or run_export)")
    if threads is not None and threads < 1:
        raise InferenceError(f"threads must be a positive number, got {threads}; "
                             "leave it unset for OMP_NUM_THREADS where it is set, otherwise ONNX Runtime's default (one per core)")
    opts = _session_options(ort, graph_optimization, threads, allow_spinning, keep_spinning, optimized_model_path, profile_prefix)
    _memory_and_mode(ort, opts, memory_pattern, cpu_arena, execution_mode)
    providers, provider_options = session_providers(device, cuda_graph=cuda_graph)  # the CPU's, or CUDA's checked above
    if device != "cpu":
        _load_cuda_libraries(ort)
    if disabled_optimizers is None:
        from .graphmeta import disabled_optimizers as asked

        disabled_optimizers = () if in_memory else asked(path)
    try:
        session = ort.InferenceSession(onnx_path if in_memory else str(path), sess_options=opts, providers=providers,
                                       provider_options=provider_options, disabled_optimizers=list(disabled_optimizers) or None)
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
        raise InferenceError(f"ONNX Runtime could not open {path}: {exc}") from exc
    _check_opened_on(session, device, path)
    return session


def _check_opened_on(session, device: str, path: Path) -> None:
    """A CUDA session that ONNX Runtime quietly opened on the CPU alone is an error, never a silent fallback."""
    from .device import CUDA_PROVIDER

    if device != "cpu" and CUDA_PROVIDER not in session.get_providers():
        raise InferenceError(
            f"ONNX Runtime opened {path.name} on {session.get_providers()} although {device} was asked for: the CUDA "
            "provider failed to load (missing CUDA/cuDNN libraries; onnxruntime's warning above names the library). "
            "Install the CUDA libraries onnxruntime-gpu was built for (torch's nvidia-* wheels provide them: the "
            "workbench imports torch first), or use --device cpu"
        )


def _session_options(ort, graph_optimization: str, threads: Optional[int], allow_spinning: bool, keep_spinning: bool,
                     optimized_model_path: str | os.PathLike | None, profile_prefix: Optional[str]):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort_level(graph_optimization)
    opts.log_severity_level = 3  # errors only; warnings about unused initializers are noise here
    cap_session_threads(opts, threads)  # threads, else OMP_NUM_THREADS where set, else ONNX Runtime's default
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if allow_spinning else "0")
    if allow_spinning and not keep_spinning:
        opts.add_session_config_entry("session.force_spinning_stop", "1")
    if optimized_model_path is not None:
        Path(optimized_model_path).parent.mkdir(parents=True, exist_ok=True)
        opts.optimized_model_filepath = str(optimized_model_path)
    if profile_prefix is not None:
        opts.enable_profiling = True
        opts.profile_file_prefix = str(profile_prefix)
    return opts


def _memory_and_mode(ort, opts, memory_pattern: bool, cpu_arena: bool, execution_mode: str):
    modes = {"sequential": ort.ExecutionMode.ORT_SEQUENTIAL, "parallel": ort.ExecutionMode.ORT_PARALLEL}
    if execution_mode not in modes:
        raise InferenceError(f"execution_mode must be one of {list(EXECUTION_MODES)}, got {execution_mode!r}; "
                             "'sequential' (ONNX Runtime's default) runs one node at a time")
    opts.execution_mode = modes[execution_mode]
    if execution_mode == "parallel":  # with one inter-op thread ONNX Runtime quietly runs sequentially
        opts.inter_op_num_threads = max(2, opts.intra_op_num_threads)
    opts.enable_mem_pattern = bool(memory_pattern)
    opts.enable_cpu_mem_arena = bool(cpu_arena)
    return opts


def _load_cuda_libraries(ort) -> None:
    """Make the CUDA/cuDNN libraries visible before a CUDA session opens: importing torch loads the nvidia-*
    wheels' libraries (checked on an H100 machine); onnxruntime >= 1.21 has ``preload_dlls`` too."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    preload = getattr(ort, "preload_dlls", None)
    if preload is not None:
        preload()
