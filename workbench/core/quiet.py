"""Library messages a learner should not see, stopped at their source.

"No CUDA runtime is found, using CUDA_HOME=...": ``torch.utils.cpp_extension`` prints it on a machine with a CUDA
toolkit but no GPU, and the training wheel's ``import onnxruntime`` imports it, so every first import printed
it (a red box in a notebook); :func:`install` drops that line. onnxruntime 1.19.2's histogram calibrators
``print()`` progress between the workbench's own lines; :func:`calibrator_prints` drops those.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import io
import sys
from typing import Any

CPP_EXTENSION = "torch.utils.cpp_extension"
CUDA_HOME_LINE = "No CUDA runtime is found, using CUDA_HOME="
# onnxruntime/quantization/calibrate.py (1.19.2): the HistogramCalibrater's and its collectors' prints
CALIBRATOR_LINES = ("Collecting tensor data and making histogram", "Finding optimal threshold for each tensor",
                    "Number of tensors :", "Number of histogram bins :", "Number of quantized bins :", "Percentile :")


def write_back(text: str, drop: str | tuple[str, ...], stream: Any) -> None:
    kept = [line for line in text.splitlines(keepends=True) if not line.startswith(drop)]
    if kept:
        stream.write("".join(kept))
        stream.flush()


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, loader: Any):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        real = sys.stderr
        buffer = io.StringIO()
        try:
            with contextlib.redirect_stderr(buffer):
                self._loader.exec_module(module)
        finally:
            write_back(buffer.getvalue(), CUDA_HOME_LINE, real)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... (inspect, linecache)
        return getattr(self._loader, name)


class _QuietImportFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != CPP_EXTENSION:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _QuietLoader(spec.loader)
                return spec
        return None


def install() -> None:
    if CPP_EXTENSION not in sys.modules and not any(isinstance(f, _QuietImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietImportFinder())


class _NewHeadWarning:
    """Drops transformers' "Some weights of ... are newly initialized" when all are ``classifier.*``."""

    PREFIX = "Some weights of "
    MARK = "and are newly initialized: "

    def filter(self, record) -> bool:
        import ast

        text = str(record.msg)
        if not (text.startswith(self.PREFIX) and self.MARK in text):
            return True
        listed = text.split(self.MARK, 1)[1].split("\n", 1)[0]
        try:
            keys = ast.literal_eval(listed)
        except (ValueError, SyntaxError):
            return True
        return not (keys and all(str(k).startswith("classifier.") for k in keys))


@contextlib.contextmanager
def new_classifier_head_expected():
    """Only the classification head is new here: the workbench is about to train it."""
    import logging

    logger = logging.getLogger("transformers.modeling_utils")
    f = _NewHeadWarning()
    logger.addFilter(f)
    try:
        yield
    finally:
        logger.removeFilter(f)


def ortmodule_warnings() -> None:
    """DeepSpeed's import error (ORTModule tries it for ZeRO offload, unused here) and torch.onnx's deprecation
    of ``training=``, which ORTModule 1.19.2 itself passes: warnings a learner can do nothing about."""
    import warnings

    warnings.filterwarnings("ignore", message="DeepSpeed import error", category=UserWarning,
                            module=r"onnxruntime\.training\.utils\.hooks\._zero_offload_subscriber")
    warnings.filterwarnings("ignore", message="Setting `training` to something other than default is deprecated",
                            category=FutureWarning, module=r"torch\.onnx\.utils")


@contextlib.contextmanager
def calibrator_prints():
    real = sys.stdout
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            yield
    finally:
        write_back(buffer.getvalue(), CALIBRATOR_LINES, real)
