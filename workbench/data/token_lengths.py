"""The data's own token lengths, and batches sorted by length.

Fixed timing shapes (1x32, 1x128, 8x128) say little about short, uneven texts, so each variant is also timed at
batch 1 x the median and 95th-percentile length. Scoring in file order pads every batch to its longest row:
on short, uneven reviews about twice the work of the texts themselves, hence :func:`length_sorted_batches`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

ORDERS = ("length", "file")
SORTED_NOTE = ("scored in batches sorted by token length (each padded to its own longest row), results in row order; "
               "dynamic INT8 computes activation scales per batch, so its predictions depend on their batch-mates "
               "(FP32 and INT8 are scored on the same batches)")
FILE_NOTE = "scored in file order (batches padded to their longest row)"


class LengthError(ValueError):
    """A length question that cannot be answered (no rows, no text column, bad batch size)."""


@dataclass(frozen=True)
class LengthStats:
    """Token lengths of ``n`` rows (special tokens included, truncated at ``max_length``)."""

    n: int
    max_length: int
    median: float
    p95: float
    max: int
    min: int
    mean: float
    truncated: int                      # rows longer than max_length before truncation
    hist_edges: list[int] = field(default_factory=list)   # bin edges in tokens (len = len(hist_counts) + 1)
    hist_counts: list[int] = field(default_factory=list)

    @property
    def median_tokens(self) -> int:
        return int(math.ceil(self.median))

    @property
    def p95_tokens(self) -> int:
        return int(math.ceil(self.p95))

    def shapes(self) -> tuple[tuple[int, int], ...]:
        """Batch 1 at the median and at the 95th-percentile length (one shape when they are equal)."""
        out = [(1, self.median_tokens)]
        if self.p95_tokens != self.median_tokens:
            out.append((1, self.p95_tokens))
        return tuple(out)

    def text(self) -> str:
        return (f"{self.n} rows: median {self.median:g} tokens, 95th percentile {self.p95:g}, max {self.max}"
                + (f" ({self.truncated} truncated at {self.max_length})" if self.truncated else ""))


def token_lengths(tokenizer, texts: Sequence[str], max_length: int, chunk: int = 1024) -> np.ndarray:
    """The number of tokens the model sees for each text (special tokens included, at most ``max_length``)."""
    if max_length < 1:
        raise LengthError(f"max_length must be at least 1 token, got {max_length}")
    texts = list(texts)
    out = np.empty(len(texts), dtype=np.int64)
    for start in range(0, len(texts), chunk):
        part = texts[start:start + chunk]
        ids = tokenizer(part, truncation=True, max_length=max_length, padding=False)["input_ids"]
        out[start:start + len(part)] = [len(x) for x in ids]
    return out


def _untruncated_over(tokenizer, texts: Sequence[str], max_length: int, chunk: int = 1024) -> int:
    n = 0
    for start in range(0, len(texts), chunk):
        ids = tokenizer(list(texts[start:start + chunk]), truncation=False, padding=False)["input_ids"]
        n += sum(len(x) > max_length for x in ids)
    return n


def stats_from_lengths(lengths: Sequence[int], max_length: int, truncated: int = 0, bins: int = 20) -> LengthStats:
    arr = np.asarray(lengths, dtype=np.int64)
    if arr.size == 0:
        raise LengthError("no rows: the token-length distribution of an empty split is undefined")
    lo, hi = int(arr.min()), int(arr.max())
    width = max(1, int(math.ceil((hi - lo + 1) / bins)))
    edges = list(range(lo, hi + width + 1, width))
    counts, _ = np.histogram(arr, bins=edges)
    return LengthStats(
        n=int(arr.size), max_length=int(max_length), median=float(np.percentile(arr, 50)), p95=float(np.percentile(arr, 95)),
        max=hi, min=lo, mean=float(arr.mean()), truncated=int(truncated),
        hist_edges=[int(e) for e in edges], hist_counts=[int(c) for c in counts],
    )


def length_stats(data, tokenizer, max_length: int, split: Optional[str] = None, text_column: str = "text",
                 bins: int = 20) -> LengthStats:
    """The token-length distribution of a ``Dataset``, a ``DatasetDict``'s ``split`` or a list of texts."""
    if isinstance(data, dict):  # a DatasetDict is a dict of splits
        split = split or "test"
        if split not in data:
            raise LengthError(f"split {split!r} is not in the data; splits: {sorted(data.keys())}")
        data = data[split]
    if hasattr(data, "column_names"):
        if text_column not in data.column_names:
            raise LengthError(f"text column {text_column!r} is not in the data; columns: {data.column_names}")
        texts = list(data[text_column])
    else:
        texts = list(data)
    lengths = token_lengths(tokenizer, texts, max_length)
    truncated = _untruncated_over(tokenizer, texts, max_length) if lengths.size and lengths.max() >= max_length else 0
    return stats_from_lengths(lengths, max_length, truncated, bins)


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Row indices in batches of ``batch_size``, rows sorted by length (stable: equal lengths keep file order)."""
    if batch_size < 1:
        raise LengthError(f"batch_size must be at least 1, got {batch_size}")
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def file_order_batches(n: int, batch_size: int) -> list[np.ndarray]:
    if batch_size < 1:
        raise LengthError(f"batch_size must be at least 1, got {batch_size}")
    order = np.arange(n)
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]


def padded_tokens(lengths: Sequence[int], batches: Sequence[np.ndarray]) -> int:
    arr = np.asarray(lengths, dtype=np.int64)
    return int(sum(len(b) * int(arr[b].max()) for b in batches if len(b)))


@dataclass(frozen=True)
class ScoringWork:
    """The tokens of scoring ``n`` rows: real, and padded in file order and sorted by length."""

    n: int
    batch_size: int
    tokens: int
    padded_file_order: int
    padded_sorted: int

    @property
    def file_order_overhead(self) -> float:
        return self.padded_file_order / self.tokens if self.tokens else float("nan")

    @property
    def sorted_overhead(self) -> float:
        return self.padded_sorted / self.tokens if self.tokens else float("nan")

    def text(self) -> str:
        return (f"{self.n} rows in batches of {self.batch_size}: file order pads to {self.file_order_overhead:.2f}x the "
                f"tokens, sorted by length {self.sorted_overhead:.3f}x")


def scoring_work(lengths: Sequence[int], batch_size: int) -> ScoringWork:
    arr = np.asarray(lengths, dtype=np.int64)
    return ScoringWork(
        n=int(arr.size), batch_size=int(batch_size), tokens=int(arr.sum()),
        padded_file_order=padded_tokens(arr, file_order_batches(arr.size, batch_size)),
        padded_sorted=padded_tokens(arr, length_sorted_batches(arr, batch_size)),
    )


def with_data_shapes(shapes: Sequence[Sequence[int]], stats: LengthStats) -> tuple[tuple[int, int], ...]:
    """``shapes`` followed by batch 1 at the data's median and 95th-percentile lengths (those not already there)."""
    out = [tuple(int(x) for x in s) for s in shapes]
    for s in stats.shapes():
        if s not in out:
            out.append(s)
    return tuple(out)
