"""Progress on the terminal: a one-line bar, one bar per training backend, and Ctrl-C that stops cleanly."""

from __future__ import annotations

import sys
from contextlib import closing, nullcontext


def bar(done: int, total: int, width: int) -> str:
    filled = int(width * min(done, total) / max(total, 1))
    return "#" * filled + "." * (width - filled)


class TerminalProgress:
    """A one-line progress bar on stderr: ``[#####.....] 50/100 loss 0.41 eta 12s``."""

    def __init__(self, label: str, width: int = 30, stream=None):
        self.label, self.width, self.stream = label, width, stream or sys.stderr
        self._last_len = 0

    def update(self, done: int, total: int, extra: str = "") -> None:
        total = max(total, 1)
        line = f"{self.label} [{bar(done, total, self.width)}] {done}/{total} {extra}".rstrip()
        pad = " " * max(0, self._last_len - len(line))
        if self.stream.isatty():
            self.stream.write("\r" + line + pad)
        elif done == total or done % max(1, total // 10) == 0:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._last_len = len(line)

    def close(self) -> None:
        if self.stream.isatty():
            self.stream.write("\n")
            self.stream.flush()


class TrainProgressBar:
    """Adapts workbench.train.Progress to the terminal bar, one bar per backend."""

    def __init__(self):
        self.bars: dict[str, TerminalProgress] = {}

    def __call__(self, p) -> None:
        name = p.backend.value if hasattr(p.backend, "value") else str(p.backend)
        bar = self.bars.get(name)
        if bar is None:
            bar = self.bars[name] = TerminalProgress(f"{name:<9}")
        if p.phase == "startup":
            bar.update(0, p.total_steps, "starting (export / compile happen on the first step)")
            return
        extra = f"loss {p.loss:.4f}  {p.samples_per_s:.1f} samples/s  eta {p.eta_s:.0f}s"
        if p.val_accuracy is not None:
            extra += f"  val acc {p.val_accuracy:.3f}"
        bar.update(p.step, p.total_steps, extra)
        if p.phase == "done":
            bar.close()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


class ScoringBar:
    """One bar per graph on stderr: ``scoring dynamic [#####.....] 600/1200 rows, 850 rows/s, 2 Ray actor(s)``;
    redrawn in place on a terminal, in a log a line at the start, at each quarter and at the end."""

    def __init__(self, stream=None, width: int = 30):
        self.stream, self.width = stream, width
        self.quarters: dict[str, int] = {}
        self._last_len = 0

    def line(self, p) -> str:
        rate = p.rows_per_second
        where = f"{p.actors} Ray actor(s)" if p.actors is not None else "this process"
        return (f"      scoring {p.graph} [{bar(p.rows, p.total, self.width)}] {p.rows}/{p.total} rows, "
                + (f"{rate:.0f} rows/s, " if rate is not None else "") + where)

    def __call__(self, p) -> None:
        stream = self.stream or sys.stderr
        line = self.line(p)
        if stream.isatty():
            stream.write("\r" + line + " " * max(0, self._last_len - len(line)) + ("\n" if p.done else ""))
            self._last_len = 0 if p.done else len(line)
        else:
            quarter = 4 * p.rows // max(p.total, 1)
            if p.rows == 0 or p.done or quarter > self.quarters.get(p.graph, 0):
                stream.write(line + "\n")
            self.quarters[p.graph] = 0 if p.done else quarter
        stream.flush()


def drawn(bar):
    """``bar`` as a context manager that closes it; None (nothing drawn: ``--json``) as one that does nothing."""
    return nullcontext() if bar is None else closing(bar)


def stop_on_sigint():
    """A threading.Event set by the first Ctrl-C, so the run stops cleanly between steps."""
    import signal
    import threading

    stop = threading.Event()

    def handler(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        print("\nstopping after this step (Ctrl-C again to abort)", file=sys.stderr)
        stop.set()

    signal.signal(signal.SIGINT, handler)
    return stop
