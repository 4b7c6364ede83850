"""ORTModule specifics: wrapping a model with the config's knobs, and catching a silent fallback.

ORTModule's default policy quietly trains in PyTorch when export or graph building fails. With
``TrainConfig.fallback`` ``"disable"`` (default) the failure is raised and the run marked ``failed``; with
``"detect"`` the fallback is caught after the first step and the run marked ``fell_back``. Either way
``executed_in_onnxruntime`` is False: such a run never reads as an ORTModule result.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Optional

from ..core.threads import requested_threads
from ..runtime.session import ort_level
from .config import FallbackPolicy, TrainConfig, TrainConfigError


def _set_env(values: dict[str, Optional[str]]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@contextlib.contextmanager
def _env(values: dict[str, Optional[str]]):
    """Set (or with None: unset) environment variables for the duration of the block."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        _set_env(values)
        yield
    finally:
        _set_env(saved)


def _has_fd(stream) -> bool:
    try:
        stream.fileno()
        return True
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both OSError and ValueError
        return False


def allow_streams_without_fd() -> None:
    """Let ORTModule build its graph when ``sys.stdout``/``sys.stderr`` have no file descriptor: 1.19.2
    redirects fds 1 and 2 while building, and under ``capsys`` or ``redirect_stdout`` its clean-up fails
    with a ``TypeError`` that looks like an ORTModule failure. Patched once to skip the redirection."""
    from onnxruntime.training.ortmodule import _logger

    original = _logger._suppress_os_stream_output
    if getattr(original, "_workbench_patched", False):
        return

    def suppress(enable=True, on_exit=None):
        return original(enable=enable and _has_fd(sys.stdout) and _has_fd(sys.stderr), on_exit=on_exit)

    suppress._workbench_patched = True
    _logger._suppress_os_stream_output = suppress


def wrap_ortmodule(model, cfg: TrainConfig, graph_prefix: Optional[Path] = None):
    """Wrap ``model`` in ORTModule with the config's knobs (``ORTMODULE_*`` variables, session options). Not
    offered: ``ORTMODULE_ENABLE_COMPUTE_OPTIMIZER=0`` crashes 1.19.2 on the first step (a hook list is None)."""
    from ..doctor.checks import check_ortmodule_extensions

    ext = check_ortmodule_extensions()
    if not ext.ok:
        raise TrainConfigError(f"the ortmodule backend cannot run: {ext.value}; fix: {ext.fix}")
    allow_streams_without_fd()
    from ..core.quiet import ortmodule_warnings

    ortmodule_warnings()  # DeepSpeed's absence and ORTModule's own deprecated export call: see quiet.py
    with _env({"ORTMODULE_FALLBACK_POLICY": "FALLBACK_DISABLE" if cfg.fallback is FallbackPolicy.DISABLE else None,
               "ORTMODULE_ONNX_OPSET_VERSION": str(cfg.opset), "ORTMODULE_MEMORY_OPT_LEVEL": str(cfg.memory_optimizer_level)}):
        from onnxruntime.training.ortmodule import DebugOptions, LogLevel, ORTModule

        saving = {}
        if graph_prefix is not None:
            graph_prefix.parent.mkdir(parents=True, exist_ok=True)
            saving = {"save_onnx": True, "onnx_prefix": str(graph_prefix)}
        wrapped = ORTModule(model, DebugOptions(log_level=LogLevel[cfg.ort_log_level], **saving))
    raise_if_fell_back(wrapped, when="while wrapping the model")
    manager = wrapped._torch_module._execution_manager(True)
    original = manager._get_session_config
    threads = cfg.ort_threads or cfg.threads or requested_threads()  # OMP_NUM_THREADS caps PyTorch; here ONNX Runtime too

    def session_config():
        so, providers, provider_options = original()
        if threads:
            so.intra_op_num_threads = threads
        so.graph_optimization_level = ort_level(cfg.ort_graph_optimization)
        if not cfg.ort_allow_spinning:
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return so, providers, provider_options

    manager._get_session_config = session_config
    return wrapped


class FellBackError(RuntimeError):
    """ORTModule ran (or would run) the model in PyTorch instead of ONNX Runtime."""


def ortmodule_fell_back(wrapped) -> Optional[BaseException]:
    """The exception that made ORTModule fall back to PyTorch, or None while it runs in ONNX Runtime."""
    from onnxruntime.training.ortmodule._torch_module_pytorch import TorchModulePytorch

    fm = getattr(wrapped, "_fallback_manager", None)
    if fm is not None and fm.is_pending():
        return fm._exception
    if isinstance(getattr(wrapped, "_torch_module", None), TorchModulePytorch):
        return RuntimeError("ORTModule switched its backend to PyTorch during initialisation")
    return None


def ortmodule_session_nodes(wrapped) -> int:
    """Nodes of the graph ONNX Runtime's training session runs for ``wrapped``; 0 when nothing ran in it. The
    evidence behind ``executed_in_onnxruntime``: a name alone proves nothing."""
    if ortmodule_fell_back(wrapped) is not None:
        return 0
    manager = wrapped._torch_module._execution_manager(wrapped._is_training())
    models = getattr(manager, "_onnx_models", None)
    if getattr(manager, "_execution_agent", None) is None or models is None or models.optimized_model is None:
        return 0
    return len(models.optimized_model.graph.node)


def raise_if_fell_back(wrapped, when: str) -> None:
    exc = ortmodule_fell_back(wrapped)
    if exc is not None:
        raise FellBackError(f"ORTModule fell back to PyTorch {when}: {type(exc).__name__}: {first_lines(str(exc), 6)}") from exc


def first_lines(text: str, n: int) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    return " | ".join(lines[:n]) + (" ..." if len(lines) > n else "")
