"""``OMP_NUM_THREADS`` for both runtimes: PyTorch reads it, ONNX Runtime does not, so its sessions take it here.

Processes sharing cores must not oversubscribe them: two on two cores with two threads each made a MiniLM
training step 3 to 5 times as long.
"""

from __future__ import annotations

import os
from typing import Optional


def requested_threads() -> Optional[int]:
    """Its first level as a positive whole number; None otherwise (OpenMP ignores such a value too)."""
    raw = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    try:
        threads = int(raw)
    except ValueError:
        return None
    return threads if threads >= 1 else None


def cap_session_threads(options, threads: Optional[int] = None):
    threads = threads if threads is not None else requested_threads()
    if threads is not None:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
    return options
