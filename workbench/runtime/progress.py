"""How far a graph's scoring is: both engines report a :class:`ScoringProgress` at most ``every_s`` apart,
the first (0 rows) and the last always.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional


@dataclass(frozen=True)
class ScoringProgress:
    """``rows`` of ``total`` scored with ``graph`` in ``seconds``; ``actors``: the Ray pool's size (None: this process)."""

    graph: str
    rows: int
    total: int
    seconds: float
    actors: Optional[int] = None

    @property
    def rows_per_second(self) -> Optional[float]:
        return self.rows / self.seconds if self.seconds > 0 and self.rows else None

    @property
    def done(self) -> bool:
        return self.rows >= self.total

    @property
    def eta_s(self) -> Optional[float]:
        rate = self.rows_per_second
        return (self.total - self.rows) / rate if rate else None

    def text(self) -> str:
        rate = self.rows_per_second
        parts = [f"scoring {self.graph}: {self.rows}/{self.total} rows"]
        if rate is not None:
            parts.append(f"{rate:.0f} rows/s")
        parts.append(f"{self.actors} Ray actor(s)" if self.actors is not None else "this process")
        return ", ".join(parts)


ProgressHook = Callable[[ScoringProgress], None]
_HOOK: contextvars.ContextVar[Optional[tuple[ProgressHook, float]]] = contextvars.ContextVar("workbench_scoring_progress",
                                                                                             default=None)


@contextlib.contextmanager
def scoring_progress(hook: Optional[ProgressHook], every_s: float = 0.5) -> Iterator[None]:
    """Inside the block, every graph scored reports to ``hook`` (None: the hook of the block around, if any)."""
    if hook is None:
        yield
        return
    token = _HOOK.set((hook, float(every_s)))
    try:
        yield
    finally:
        _HOOK.reset(token)


def graph_label(graph: Any, label: Optional[str] = None) -> str:
    """What a progress line calls a graph: ``label``, else its folder and file name (``dynamic/model.onnx``)."""
    if label:
        return label
    if isinstance(graph, (str, os.PathLike)):
        p = Path(graph)
        return f"{p.parent.name}/{p.name}" if p.parent.name else p.name
    return "graph"


class RowCounter:
    """Counts the rows of one graph's scoring as batches come back and reports them to the active hook."""

    def __init__(self, graph: str, total: int, actors: Optional[int] = None) -> None:
        active = _HOOK.get()
        self.hook, self.every_s = active if active is not None else (None, 0.0)
        self.graph, self.total, self.actors, self.rows = graph, int(total), actors, 0
        self.t0 = time.perf_counter()
        self.last = float("-inf")
        self._report(force=True)

    def add(self, rows: int) -> None:
        self.rows += int(rows)
        self._report(force=self.rows >= self.total)

    def counted(self, part):
        """``part`` (one batch's output), its rows counted."""
        self.add(len(part))
        return part

    def _report(self, force: bool) -> None:
        if self.hook is None:
            return
        now = time.perf_counter()
        if force or now - self.last >= self.every_s:
            self.last = now
            self.hook(ScoringProgress(self.graph, self.rows, self.total, now - self.t0, self.actors))
