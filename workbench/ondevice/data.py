"""On-device training: the model as trained here, and the batches both sides train on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np

from .. import runs
from .config import OnDeviceConfig


def load_ondevice_model(model: str, cfg: OnDeviceConfig, class_names: Optional[list[str]] = None):
    """``model`` as trained here: dropout off, eager attention, eval mode (the same as train mode with dropout 0,
    and so for any layer we missed)."""
    from ..models.load import BUILTIN_MODELS, load_for_data, load_model, resolve_model_path

    if model in BUILTIN_MODELS:
        if class_names:
            return load_for_data(model, class_names, dropout=False, seed=cfg.seed)
        return load_model(model, dropout=False, seed=cfg.seed)
    folder = resolve_model_path(model)
    config = json.loads((folder / "config.json").read_text())
    id2label = {int(k): v for k, v in (config.get("id2label") or {}).items()}
    labels = {"num_labels": len(id2label), "id2label": id2label} if len(id2label) >= 2 else {}
    return load_model(model, dropout=False, seed=cfg.seed, **labels)


def make_batches(loaded, train, cfg: OnDeviceConfig) -> list[dict[str, np.ndarray]]:
    """``cfg.steps`` int64 batches, a seeded shuffle of the training split cycled as needed; both sides get these."""
    from ..data.batches import batch_indices

    out: list[dict[str, np.ndarray]] = []
    epoch = 0
    while len(out) < cfg.steps:
        for idx in batch_indices(len(train), cfg.batch_size, shuffle=True, seed=cfg.seed, epoch=epoch, drop_last=True):
            out.append(encode_batch(loaded, train, idx, cfg.max_length))
            if len(out) == cfg.steps:
                break
        epoch += 1
    return out


def encode_batch(loaded, split, idx, max_length: int) -> dict[str, np.ndarray]:
    """Rows ``idx`` of ``split`` as one batch: the model's inputs (int64 numpy, model-input order) and ``labels``."""
    from ..data.batches import encode, model_inputs

    enc = model_inputs(loaded.model, encode(loaded.tokenizer, [split["text"][i] for i in idx], max_length))
    batch = {k: v.numpy().astype(np.int64) for k, v in enc.items()}
    batch["labels"] = np.asarray([split["label"][i] for i in idx], dtype=np.int64)
    return batch


def save_batches(path: Path, batches: list[dict[str, np.ndarray]]) -> Path:
    import io

    flat = {f"{i}:{k}": v for i, b in enumerate(batches) for k, v in b.items()}
    buf = io.BytesIO()
    np.savez(buf, **flat)
    return runs.atomic_write_bytes(path, buf.getvalue())


def load_batches(path: Path) -> list[dict[str, np.ndarray]]:
    data = np.load(path)
    out: dict[int, dict[str, np.ndarray]] = {}
    for key in data.files:
        i, name = key.split(":", 1)
        out.setdefault(int(i), {})[name] = data[key]
    return [out[i] for i in sorted(out)]
