"""Tokenise datasets and cut them into batches, the same way for every stage."""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np


def encode(tokenizer, texts: Sequence[str], max_length: int, pad_to_max: bool = False) -> dict:
    """Tokenise ``texts`` into torch tensors (input_ids, attention_mask, token_type_ids if used)."""
    return dict(
        tokenizer(
            list(texts),
            truncation=True,
            max_length=max_length,
            padding="max_length" if pad_to_max else "longest",
            return_tensors="pt",
        )
    )


def batch_indices(n: int, batch_size: int, shuffle: bool, seed: int, epoch: int = 0, drop_last: bool = False) -> list[np.ndarray]:
    """Index batches over ``n`` examples; the order depends only on (seed, epoch)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    order = np.arange(n)
    if shuffle:
        order = np.random.default_rng([seed, epoch]).permutation(n)
    out = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    if drop_last and out and len(out[-1]) < batch_size:
        out.pop()
    return out


def iter_encoded(dataset, tokenizer, batch_size: int, max_length: int, shuffle: bool = False, seed: int = 0, epoch: int = 0,
                 pad_to_max: bool = False) -> Iterator[tuple[dict, "np.ndarray", np.ndarray]]:
    """Yield (encoded inputs, labels tensor, example indices) over a ``datasets.Dataset``."""
    import torch

    texts = dataset["text"]
    labels = dataset["label"]
    for idx in batch_indices(len(dataset), batch_size, shuffle, seed, epoch):
        enc = encode(tokenizer, [texts[i] for i in idx], max_length, pad_to_max)
        yield enc, torch.tensor([labels[i] for i in idx], dtype=torch.long), idx
