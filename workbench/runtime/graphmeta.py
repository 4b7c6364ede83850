"""What a graph file asks of the session that runs it, carried in the graph itself.

A graph fused with a family left out (:mod:`workbench.graph.candidates`) must also run without the session's
own fusion of that family, which would put it back: the graph lists the optimizers to disable in its
``metadata_props``, which the quantizer keeps. :func:`read_metadata` skips every other field by its length,
so it costs a few reads even for a graph of hundreds of MiB.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, Optional, Sequence

DISABLED_OPTIMIZERS_KEY = "workbench.session.disabled_optimizers"
_METADATA_FIELD = 14  # ModelProto.metadata_props (onnx.proto); StringStringEntryProto: key = 1, value = 2
_cache: dict[tuple[str, int, int], dict[str, str]] = {}


def _varint(f: BinaryIO) -> Optional[int]:
    shift, value = 0, 0
    while True:
        b = f.read(1)
        if not b:
            return None
        value |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return value
        shift += 7


def _entry(data: bytes) -> tuple[str, str]:
    import io

    f, out = io.BytesIO(data), {1: "", 2: ""}
    while (tag := _varint(f)) is not None:
        if tag & 7 != 2:
            raise ValueError("not a metadata entry")
        out[tag >> 3] = f.read(_varint(f) or 0).decode("utf-8")
    return out[1], out[2]


def read_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The ``metadata_props`` of the ONNX file at ``path``, the graph not parsed; ``{}`` for what it cannot read."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _cache:
        found: dict[str, str] = {}
        try:
            with open(p, "rb") as f:
                while (tag := _varint(f)) is not None:
                    field, wire = tag >> 3, tag & 7
                    if wire == 0:
                        _varint(f)
                    elif wire in (1, 5):
                        f.seek(8 if wire == 1 else 4, os.SEEK_CUR)
                    elif wire == 2:
                        size = _varint(f) or 0
                        if field == _METADATA_FIELD:
                            k, v = _entry(f.read(size))
                            found[k] = v
                        else:
                            f.seek(size, os.SEEK_CUR)
                    else:
                        raise ValueError(f"wire type {wire}")
        except (ValueError, UnicodeDecodeError):
            found = {}
        _cache[key] = found
    return dict(_cache[key])


def disabled_optimizers(path: str | os.PathLike) -> tuple[str, ...]:
    """The ONNX Runtime session optimizers the graph at ``path`` asks to be disabled (empty: none)."""
    text = read_metadata(path).get(DISABLED_OPTIMIZERS_KEY, "")
    return tuple(n.strip() for n in text.split(",") if n.strip())


def mark_disabled_optimizers(model, names: Sequence[str]) -> None:
    """Record in ``model`` (in place) the session optimizers its sessions must disable; none removes the request."""
    kept = [p for p in model.metadata_props if p.key != DISABLED_OPTIMIZERS_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    if names:
        entry = model.metadata_props.add()
        entry.key, entry.value = DISABLED_OPTIMIZERS_KEY, ",".join(names)
