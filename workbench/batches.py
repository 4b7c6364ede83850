"""Tokenise datasets and cut them into batches, the same way for every stage."""

from __future__ import annotations

import inspect
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


def forward_parameters(model) -> Optional[tuple[str, ...]]:
    """The keyword arguments ``model.forward`` takes, in signature order; None when it takes
    ``**kwargs`` (then any input is accepted). Wrappers (ORTModule, DDP, torch.compile) are seen
    through to the model they wrap."""
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
    """The tokenizer's outputs that ``model.forward`` accepts, in the order of its signature.

    Inputs follow the model, not the tokenizer: DistilBERT, MPNet and ModernBERT take no
    ``token_type_ids``, yet a BERT tokenizer saved beside them produces them ("forward() got an
    unexpected keyword argument 'token_type_ids'"). The workbench encodes single sentences, so
    token types are all zero and leaving them out changes nothing. Inputs the model needs but the
    tokenizer did not produce are the model's business (it fills its defaults, as BERT does with
    zero token types).
    """
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
    """Yield (encoded inputs, labels tensor, example indices) over a ``datasets.Dataset``.

    ``batches``: the index batches to use (e.g. :func:`workbench.lengths.length_sorted_batches`)
    instead of consecutive (or shuffled) runs of ``batch_size``."""
    import torch

    texts = dataset["text"]
    labels = dataset["label"]
    if batches is None:
        batches = batch_indices(len(dataset), batch_size, shuffle, seed, epoch)
    for idx in batches:
        enc = encode(tokenizer, [texts[i] for i in idx], max_length, pad_to_max)
        yield enc, torch.tensor([labels[i] for i in idx], dtype=torch.long), idx
