"""Peak memory of one run: RSS sampled by ``psutil`` during the run only (``ru_maxrss`` spans the process's
lifetime, and freed memory is not always returned to the OS, hence ``CompareConfig(isolate=True)``), or on
CUDA ``torch.cuda.max_memory_allocated`` (ORT's CUDA arena is separate)."""

from __future__ import annotations

import threading
from typing import Optional


class PeakMemory:
    """Samples the process RSS in a background thread (CPU) or reads the CUDA allocator's peak."""

    def __init__(self, device: str, interval_s: float = 0.02):
        import psutil

        self.device, self.interval_s = device, interval_s
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.baseline_mib = self.rss_mib()
        self.peak_mib = self.baseline_mib
        if device.startswith("cuda"):
            import torch

            torch.cuda.reset_peak_memory_stats()
            self.source = "torch.cuda.max_memory_allocated (PyTorch caching allocator; ONNX Runtime's CUDA arena not included)"
        else:
            self.source = f"process RSS (psutil), sampled every {interval_s * 1000:.0f} ms and at every step during this run"

    def rss_mib(self) -> float:
        return self._proc.memory_info().rss / 2**20

    def sample(self) -> None:
        if not self.device.startswith("cuda"):
            self.peak_mib = max(self.peak_mib, self.rss_mib())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> "PeakMemory":
        if not self.device.startswith("cuda"):
            self._thread = threading.Thread(target=self._loop, name="workbench-rss", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        if self.device.startswith("cuda"):
            import torch

            self.peak_mib = torch.cuda.max_memory_allocated() / 2**20
