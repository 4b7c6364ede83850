"""Facts about an ONNX graph: :func:`load_graph` is the one place the graph stage parses a file, so each file is
parsed once and the model passed along."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path


class GraphFileError(ValueError):
    """A file given as an ONNX graph that is not one (truncated, or something else): one line."""


def load_graph(path: str | os.PathLike):
    """The ``onnx.ModelProto`` at ``path``, external weights left on disk."""
    import onnx
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, RuntimeWarning, ValueError) as exc:
        raise GraphFileError(f"{path} is not a readable ONNX graph ({str(exc).splitlines()[0][:100]}): it is cut short or "
                             "not ONNX at all; export it again (`workbench export`) or give the .onnx file it came from") from exc
    if not model.graph.node:
        raise GraphFileError(f"{path} holds no ONNX graph (no nodes): it is cut short or not ONNX at all; export it again "
                             "(`workbench export`) or give the .onnx file it came from")
    return model


def as_model(model_or_path):
    if isinstance(model_or_path, (str, os.PathLike)):
        return load_graph(model_or_path)
    return model_or_path


def op_histogram(model_or_path) -> dict[str, int]:
    """Operator counts, most frequent first, without domain prefixes (contrib ops as ONNX Runtime names them)."""
    model = as_model(model_or_path)
    counts = Counter(n.op_type for n in model.graph.node)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def graph_inputs(model_or_path) -> list[str]:
    """The declared inputs that are not initializers (the exporter drops inputs the model never reads)."""
    model = as_model(model_or_path)
    initializers = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def file_size_mib(path: str | os.PathLike) -> float:
    """Size on disk of a graph, external weight file (``<name>.data``) included."""
    path = Path(path)
    size = path.stat().st_size
    side = path.with_name(path.name + ".data")
    if side.exists():
        size += side.stat().st_size
    return size / 2**20
