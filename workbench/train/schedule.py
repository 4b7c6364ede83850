"""What every backend shares step for step: the step count, the batch order (from the seed and the epoch
only, so every backend sees the same batches) and the learning rate at each step.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

from .config import Schedule, TrainConfig, TrainConfigError


def total_steps_for(n_train: int, cfg: TrainConfig, world_size: int = 1) -> int:
    """``cfg.max_steps``, else the optimizer steps of ``cfg.epochs`` passes (incomplete batches dropped)."""
    per_epoch = (n_train // (cfg.batch_size * world_size)) // cfg.grad_accum
    if per_epoch == 0:
        raise TrainConfigError(
            f"the training split has {n_train} examples, fewer than one step needs "
            f"(batch_size {cfg.batch_size} x grad_accum {cfg.grad_accum} x {world_size} process(es)); "
            "lower batch_size/grad_accum or use more data (DataConfig(max_train=...))"
        )
    return cfg.max_steps if cfg.max_steps is not None else per_epoch * cfg.epochs


def iter_micro_batches(dataset, tokenizer, cfg: TrainConfig, rank: int = 0, world_size: int = 1) -> Iterator[tuple[dict, Any]]:
    """Endless (inputs, labels) micro-batches in the seeded order, each global batch split between DDP ranks.
    Incomplete batches are dropped, so shapes stay fixed across steps."""
    import torch

    from ..data.batches import batch_indices, encode

    texts, labels = dataset["text"], dataset["label"]
    global_batch = cfg.batch_size * world_size
    epoch = 0
    while True:
        for idx in batch_indices(len(dataset), global_batch, shuffle=True, seed=cfg.seed, epoch=epoch, drop_last=True):
            mine = idx[rank * cfg.batch_size:(rank + 1) * cfg.batch_size]
            enc = encode(tokenizer, [texts[i] for i in mine], cfg.max_length, cfg.pad_to_max)
            yield enc, torch.tensor([labels[i] for i in mine], dtype=torch.long)
        epoch += 1


def lr_factor(step: int, total: int, cfg: TrainConfig) -> float:
    """Learning-rate multiplier for the 0-based optimizer step ``step`` (warm-up, then the schedule)."""
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return (step + 1) / (cfg.warmup_steps + 1)
    if cfg.schedule is Schedule.CONSTANT:
        return 1.0
    progress = (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)
    if cfg.schedule is Schedule.LINEAR:
        return max(0.0, 1.0 - progress)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
