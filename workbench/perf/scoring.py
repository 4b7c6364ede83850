"""Rows per second of scoring a dataset, beside the floor of the same batches.

``b`` rows padded to ``s`` tokens do ``b x work(1, s)``, a quadratic in ``s`` (attention grows with ``s^2``)
fitted exactly from the graph's counted work at three lengths (:func:`floor_curve`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import numpy as np

if TYPE_CHECKING:
    from ..runtime.engine import RayPool
    from .machine_profile import MachineProfile


@dataclass(frozen=True)
class ScoringSpeed:
    rows: int
    seconds: float
    order: str                       # "length" or "file"
    batch_size: int
    padded_tokens: int               # tokens processed, padding included
    tokens: int                      # tokens of the rows themselves
    floor_seconds: Optional[float] = None
    note: str = ""

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("nan")

    @property
    def floor_rows_per_second(self) -> Optional[float]:
        return self.rows / self.floor_seconds if self.floor_seconds else None

    @property
    def of_floor(self) -> Optional[float]:
        return self.floor_seconds / self.seconds if self.floor_seconds and self.seconds > 0 else None

    def text(self) -> str:
        s = f"{self.rows} rows in {self.seconds:.2f} s ({self.rows_per_second:.0f} rows/s, {self.order} order)"
        if self.of_floor is not None:
            s += f"; floor {self.floor_rows_per_second:.0f} rows/s, {100 * self.of_floor:.2g}% of it"
        return s


def floor_curve(graph: str | os.PathLike, profile: "MachineProfile", seqs: Sequence[int] = (8, 32, 64)
                ) -> Callable[..., float]:
    """``curve(s, batch=1)``: the floor in ms of ``batch`` rows padded to ``s`` tokens."""
    from .work import floor_seconds, graph_work

    seqs = sorted({int(s) for s in seqs})
    if len(seqs) != 3:
        raise ValueError(f"floor_curve needs three distinct lengths, got {seqs}")
    works = [graph_work(graph, 1, s) for s in seqs]
    x = np.asarray(seqs, dtype=float)
    fits = [np.polyfit(x, np.asarray(ys, dtype=float), 2) for ys in (
        [w.fp32_macs for w in works], [w.int8_macs - w.static_int8_macs for w in works], [w.static_int8_macs for w in works])]

    def curve(s: int, batch: int = 1) -> float:
        fp32, dynamic, static = (batch * max(0.0, float(np.polyval(c, float(s)))) for c in fits)
        return 1e3 * floor_seconds(fp32, dynamic, static, rows=batch * int(s), profile=profile)

    return curve


def batches_floor_seconds(curve: Callable[..., float], lengths: Sequence[int], batches: Sequence[np.ndarray]) -> float:
    """Each batch padded to its longest row."""
    arr = np.asarray(lengths, dtype=np.int64)
    return sum(curve(int(arr[b].max()), len(b)) for b in batches if len(b)) / 1e3


def timed_scoring(session, graph_path, tokenizer, dataset, max_length: int, batch_size: int, order: str = "length",
                  profile: Optional["MachineProfile"] = None, curve: Optional[Callable[..., float]] = None,
                  note: str = "", pool: Optional["RayPool"] = None, label: Optional[str] = None) -> tuple[np.ndarray, ScoringSpeed]:
    """``predict_dataset`` timed (tokenised before the clock starts); on a Ray ``pool`` no floor (this machine's says
    nothing of the cluster's)."""
    import time

    from ..data.token_lengths import padded_tokens
    from ..runtime.ortinfer import predict_dataset, row_lengths, scoring_batches

    lengths = row_lengths(tokenizer, dataset["text"], max_length, pool)
    batches = scoring_batches(tokenizer, dataset, max_length, batch_size, order, lengths=lengths)
    t0 = time.perf_counter()
    logits = predict_dataset(session if pool is None else graph_path, tokenizer, dataset, max_length, batch_size, order=order,
                             pool=pool, label=label, batches=batches)
    seconds = time.perf_counter() - t0
    floor_s = None
    if pool is not None:
        profile, curve, note = None, None, "; ".join(n for n in (note, f"scored {pool.text}: no floor") if n)
    if curve is None and profile is not None and graph_path is not None:
        curve = floor_curve(graph_path, profile)
    if curve is not None:
        floor_s = batches_floor_seconds(curve, lengths, batches)
    return logits, ScoringSpeed(rows=len(dataset), seconds=seconds, order=order, batch_size=batch_size,
                                padded_tokens=padded_tokens(lengths, batches), tokens=int(lengths.sum()),
                                floor_seconds=floor_s, note=note)
