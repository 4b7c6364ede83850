"""The thread count a process was asked for: ``OMP_NUM_THREADS``, for both runtimes.

PyTorch reads ``OMP_NUM_THREADS`` when it starts; ONNX Runtime does not (its default is one
intra-op thread per physical core). Every ONNX Runtime session the workbench opens without an
explicit thread count takes :func:`requested_threads`, so one variable caps both runtimes.

That matters wherever processes share the cores: two processes on two cores, each with two
threads, spend most of their time waiting on each other's threads (a MiniLM training step took 3 to
5 times as long as with one thread each, measured on a 2-core machine). Where the variable is not
set, nothing changes.
"""

from __future__ import annotations

import os
from typing import Optional


def requested_threads() -> Optional[int]:
    """``OMP_NUM_THREADS`` as a positive whole number (its first level where it lists several),
    or None when it is unset or not one (OpenMP ignores such a value too)."""
    raw = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    try:
        threads = int(raw)
    except ValueError:
        return None
    return threads if threads >= 1 else None


def cap_session_threads(options, threads: Optional[int] = None):
    """Set ``options`` (an ``onnxruntime.SessionOptions``) to ``threads`` intra-op threads, or to
    :func:`requested_threads` when ``threads`` is None; unchanged (ONNX Runtime's default) when
    neither is set. Returns ``options``."""
    threads = threads if threads is not None else requested_threads()
    if threads is not None:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
    return options
