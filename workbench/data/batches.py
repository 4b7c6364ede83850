"""Tokenise datasets and cut them into batches, the same way for every stage."""

from __future__ import annotations

import inspect
import weakref
from typing import Iterator, Mapping, Optional, Sequence

import numpy as np

# What a tokenizer may produce that is not a model input (asked for with return_* flags).
_NOT_MODEL_INPUTS = ("special_tokens_mask", "offset_mapping", "overflowing_tokens", "num_truncated_tokens", "length")


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


class EncodedRows:
    """Every row of a text list tokenised once (truncated, unpadded) as one flat int32 array per tokenizer
    output with row offsets; :meth:`batch` pads any subset of rows exactly as ``encode`` would."""

    def __init__(self, tokenizer, texts: Sequence[str], max_length: int, chunk: int = 2048):
        self.max_length = int(max_length)
        self.pad = {"input_ids": tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
                    "attention_mask": 0, "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0) or 0}
        self.left = getattr(tokenizer, "padding_side", "right") == "left"
        parts: dict[str, list[np.ndarray]] = {}
        lengths: list[int] = []
        texts = list(texts)
        for start in range(0, len(texts), chunk):
            enc = tokenizer(texts[start:start + chunk], truncation=True, max_length=self.max_length, padding=False)
            for k, rows in enc.items():
                if k in _NOT_MODEL_INPUTS:
                    continue
                parts.setdefault(k, []).append(np.fromiter((t for row in rows for t in row), dtype=np.int32))
            lengths.extend(len(r) for r in enc["input_ids"])
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)
        self.flat = {k: (np.concatenate(v) if v else np.zeros(0, np.int32)) for k, v in parts.items()}

    def __len__(self) -> int:
        return len(self.lengths)

    def batch(self, idx: Sequence[int]) -> dict[str, np.ndarray]:
        """The rows ``idx`` padded to the longest of them (int64 arrays, the tokenizer's keys)."""
        idx = np.asarray(idx, dtype=np.int64)
        width = int(self.lengths[idx].max()) if len(idx) else 0
        out = {}
        for k, flat in self.flat.items():
            arr = np.full((len(idx), width), self.pad.get(k, 0), dtype=np.int64)
            for r, i in enumerate(idx):
                row = flat[self.offsets[i]:self.offsets[i + 1]]
                if self.left:
                    arr[r, width - len(row):] = row
                else:
                    arr[r, :len(row)] = row
            out[k] = arr
        return out


def padded_batch(tokenizer, texts: Sequence[str], max_length: int) -> dict[str, np.ndarray]:
    """One scoring batch of ``texts`` padded as :meth:`EncodedRows.batch` pads it (a Ray worker's batch)."""
    return EncodedRows(tokenizer, texts, max_length).batch(np.arange(len(texts)))


# tokenizer -> [(max_length, texts, EncodedRows), ...], newest last; a tokenizer's entries go with it
_ENCODED_CACHE: "weakref.WeakKeyDictionary[object, list]" = weakref.WeakKeyDictionary()
_ENCODED_PER_TOKENIZER = 4


def encoded_rows(tokenizer, texts: Sequence[str], max_length: int) -> EncodedRows:
    """``EncodedRows``, shared by every graph scored on the same texts (compared by value) and length."""
    texts = tuple(texts)
    try:
        entries = _ENCODED_CACHE.setdefault(tokenizer, [])
    except TypeError:  # a tokenizer that cannot be weakly referenced: no reuse
        return EncodedRows(tokenizer, texts, max_length)
    for i, (key_len, key_texts, rows) in enumerate(entries):
        if key_len == max_length and key_texts == texts:
            entries.append(entries.pop(i))
            return rows
    rows = EncodedRows(tokenizer, texts, max_length)
    entries.append((max_length, texts, rows))
    del entries[:-_ENCODED_PER_TOKENIZER]
    return rows


def forward_parameters(model) -> Optional[tuple[str, ...]]:
    """The keyword arguments ``model.forward`` takes through its wrappers; None when it takes only ``**kwargs``."""
    for attr in ("_orig_mod", "module"):  # torch.compile's OptimizedModule; DDP and ORTModule
        inner = getattr(model, attr, None)
        if inner is not None and hasattr(inner, "forward") and inner is not model:
            return forward_parameters(inner)
    forward = getattr(model, "forward", model)
    params = inspect.signature(forward).parameters.values()
    named = tuple(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    if any(p.kind is p.VAR_KEYWORD for p in params) and not named:
        return None
    return named


def model_inputs(model, encoded: Mapping) -> dict:
    """The tokenizer's outputs ``model.forward`` accepts: DistilBERT, MPNet and ModernBERT take no ``token_type_ids``,
    yet a BERT tokenizer beside them makes them (all zero for single sentences: dropping them changes nothing)."""
    accepted = forward_parameters(model)
    if accepted is None:
        return {k: v for k, v in encoded.items() if k not in _NOT_MODEL_INPUTS}
    return {k: encoded[k] for k in accepted if k in encoded}


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
                 pad_to_max: bool = False, batches: Optional[Sequence[np.ndarray]] = None,
                 ) -> Iterator[tuple[dict, "np.ndarray", np.ndarray]]:
    """Yield (encoded inputs, labels tensor, example indices) over a ``datasets.Dataset``, in ``batches`` when given."""
    import torch

    texts = dataset["text"]
    labels = dataset["label"]
    if batches is None:
        batches = batch_indices(len(dataset), batch_size, shuffle, seed, epoch)
    for idx in batches:
        enc = encode(tokenizer, [texts[i] for i in idx], max_length, pad_to_max)
        yield enc, torch.tensor([labels[i] for i in idx], dtype=torch.long), idx
