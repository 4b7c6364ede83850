"""The trained weights as a Hugging Face checkpoint folder (``save_pretrained``), written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import runs
from .config import TrainConfig


def save_checkpoint(model, tokenizer, folder: Path, cfg: TrainConfig) -> Path:
    """``save_pretrained`` into ``folder``, atomically, with the dropout probabilities a dropout-off run zeroed
    put back, so later fine-tuning behaves normally."""
    model = getattr(model, "_orig_mod", model)
    saved = {}
    if not cfg.dropout:
        for k, v in _dropout_defaults(cfg.model).items():
            if hasattr(model.config, k):
                saved[k] = getattr(model.config, k)
                setattr(model.config, k, v)
    try:
        with runs.atomic_dir(folder) as tmp:
            model.save_pretrained(str(tmp), safe_serialization=True)
            tokenizer.save_pretrained(str(tmp))
    finally:
        for k, v in saved.items():
            setattr(model.config, k, v)
    return Path(folder)


def _dropout_defaults(name: str) -> dict[str, Any]:
    from transformers import AutoConfig, BertConfig

    from ..models.load import DROPOUT_ATTRIBUTES, resolve_model_path

    path = resolve_model_path(name)
    base = BertConfig() if path is None else AutoConfig.from_pretrained(str(path), local_files_only=True)
    # every name load_model(dropout=False) zeroes (DistilBERT's, DeBERTa's and ModernBERT's too)
    return {k: getattr(base, k) for k in DROPOUT_ATTRIBUTES if hasattr(base, k)}
