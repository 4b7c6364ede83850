"""Which ONNX exporters this torch ships: the TorchScript exporter (deprecated since torch 2.9) and its registry."""

from __future__ import annotations


def torchscript_registration():
    """torch's registry of TorchScript ONNX symbolics (moved in torch 2.9); None without the exporter."""
    import importlib

    for name in ("torch.onnx._internal.registration", "torch.onnx._internal.torchscript_exporter.registration"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def torchscript_available() -> bool:
    """Whether this torch still ships the TorchScript exporter (deprecated since torch 2.9)."""
    return torchscript_registration() is not None
