"""The thread count a process was asked for: ``OMP_NUM_THREADS``, for both runtimes.

PyTorch reads ``OMP_NUM_THREADS`` when it starts; ONNX Runtime does not, so every session the
workbench opens without an explicit thread count takes :func:`requested_threads`. That matters where
processes share the cores: two processes on two cores, each with two threads, spend most of their
time waiting on each other's threads (a MiniLM training step took 3 to 5 times as long).
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
    """``options`` (``onnxruntime.SessionOptions``) with ``threads`` (default :func:`requested_threads`) intra-op threads."""
    threads = threads if threads is not None else requested_threads()
    if threads is not None:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
    return options
